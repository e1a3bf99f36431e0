#!/usr/bin/env bash
# Verifies mxc on a machine with an NVIDIA GPU in one command: builds everything with
# USE_CUDA=1 USE_CUDNN=1 CUDA_ARCH=sm_90, runs every Check suite (the GPU ones included, which
# skip elsewhere), then the GPU benchmarks, and ends with a summary.
#
#   scripts/gpu_check.sh [--deps DIR|FILE.tar.xz] [--log DIR] [--jobs N] [--no-bench]
#                        [--stage build,test,bench]
#
# --deps  the Debian packages the build needs (check, libsubunit, libopenblas, zlib,
#         libjpeg62-turbo, libpng16 with their -dev packages, and the Fashion-MNIST data set), unpacked as a root file system (usr/include, usr/lib/...),
#         for a machine where apt-get cannot reach a registry; a .tar.xz of such a folder is
#         unpacked first. Made on a Debian machine with `apt-get download` and `dpkg -x`
#         (docs/testing.md, "On a GPU").
# --log   where each step's full output goes (default build-cuda/gpu_check)
# --jobs  make's jobs (default: the cores); the suites run MXC_TEST_JOBS at a time
#         (default half the cores)
# --stage which steps run (default all three): a lent GPU machine allows 10 minutes per
#         command, so `--stage build,test` and then `--stage bench` (the build is kept
#         while the machine stays warm) split the work; each step prints its duration.
# cuDNN and cuBLAS are taken from CUDA_HOME (default /usr/local/cuda), else from the
# nvidia-cudnn / nvidia-cublas Python wheels when those are installed.
set -uo pipefail
cd "$(dirname "$0")/.."

deps=""
log=""
jobs=$(nproc 2>/dev/null || echo 4)
bench=1
stages=build,test,bench
while [ $# -gt 0 ]; do
    case "$1" in
    --deps) deps=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --no-bench) bench=0; shift ;;
    --stage) stages=$2; shift 2 ;;
    *) echo "gpu_check: unknown option $1" >&2; exit 2 ;;
    esac
done
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
export PATH=$CUDA_HOME/bin:$PATH
# MPI where OpenMPI's development files are (the dist_sync store and its suites), else
# a build without it (those suites then check the refusal)
if pkg-config --exists ompi-c 2>/dev/null || command -v mpicc >/dev/null 2>&1; then
    mpi=1
    build=build-cuda
else
    mpi=0
    build=build-cuda-nompi
fi
log=${log:-$build/gpu_check}
make_args=(USE_CUDA=1 USE_CUDNN=1 USE_MPI=$mpi CUDA_ARCH=sm_90 CUDA_HOME="$CUDA_HOME")

mkdir -p "$log"

prepend() { # prepend VAR DIR: adds DIR to a colon-separated search path
    local cur=${!1:-}
    export "$1=$2${cur:+:$cur}"
}

if [ -n "$deps" ]; then
    if [ -f "$deps" ]; then
        mkdir -p /tmp/mxc-deps && tar -C /tmp/mxc-deps -xJf "$deps" || exit 1
        deps=/tmp/mxc-deps
    fi
    deps=$(cd "$deps" && pwd)
    # usr/include/x86_64-linux-gnu: libjpeg-turbo's jconfig.h
    for d in usr/include usr/include/x86_64-linux-gnu usr/include/x86_64-linux-gnu/openblas-pthread; do
        prepend C_INCLUDE_PATH "$deps/$d"
        prepend CPLUS_INCLUDE_PATH "$deps/$d"
    done
    for d in usr/lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu/openblas-pthread; do
        prepend LIBRARY_PATH "$deps/$d"
        prepend LD_LIBRARY_PATH "$deps/$d"
    done
    [ -d "$deps/usr/share/datasets/fashion-mnist" ] &&
        export MXC_FASHION_MNIST_DIR="$deps/usr/share/datasets/fashion-mnist"
    # the packages are there: the Makefile's apt-get step has nothing to do
    mkdir -p $build && touch $build/.deps-ok
fi

# A CUDA library the toolkit lacks, from its Python wheel: headers, and a link-time name
# (the wheels ship only libX.so.N).
wheel_lib() { # wheel_lib cudnn 9
    [ -f "$CUDA_HOME/lib64/lib$1.so" ] && return 0
    local h
    h=$(find /usr /opt -path "*nvidia/$1/include/$1.h" 2>/dev/null | head -n 1)
    [ -z "$h" ] && h=$(find /usr /opt -path "*nvidia/cu13/include/$1.h" 2>/dev/null | head -n 1)
    [ -n "$h" ] || { echo "gpu_check: lib$1 not found in $CUDA_HOME or a wheel"; return 1; }
    local root libdir
    root=$(dirname "$(dirname "$h")")
    libdir=$root/lib
    mkdir -p /tmp/mxc-cudalibs
    ln -sf "$(ls "$libdir"/lib$1.so.* | head -n 1)" /tmp/mxc-cudalibs/lib$1.so
    prepend C_INCLUDE_PATH "$root/include"
    prepend CPLUS_INCLUDE_PATH "$root/include"
    prepend LIBRARY_PATH /tmp/mxc-cudalibs
    prepend LD_LIBRARY_PATH "$libdir"
    echo "gpu_check: lib$1 from $root"
}
wheel_lib cudnn
wheel_lib cublas

{
    echo "== device"
    nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=csv 2>&1
    nvcc --version | tail -n 2
    date -u
} | tee "$log/device.txt"

stage() { [[ ",$stages," == *",$1,"* ]]; }
took() { echo "gpu_check: $1 took $((SECONDS - $2)) s"; }

status=0
if stage build; then
    echo "== build (make ${make_args[*]})"
    t=$SECONDS
    if ! make -j"$jobs" "${make_args[@]}" all tools >"$log/build.txt" 2>&1; then
        tail -n 40 "$log/build.txt"
        echo "gpu_check: build failed (log: $log/build.txt)"
        exit 1
    fi
    tail -n 3 "$log/build.txt"
    took build $t
fi

if stage test; then
    echo "== tests"
    t=$SECONDS
    # each forked test starts CUDA, its engine's GPU workers and library handles afresh
    export CK_DEFAULT_TIMEOUT=${CK_DEFAULT_TIMEOUT:-120}
    export MXC_TEST_JOBS=${MXC_TEST_JOBS:-$(((jobs + 1) / 2))}
    bash scripts/run_tests.sh $build/bin >"$log/tests.txt" 2>&1 || status=1
    grep -E "^(== |[0-9]+%: Checks)|failed suites|^tests:" "$log/tests.txt"
    grep -E ":[EF]:" "$log/tests.txt" | head -n 40
    took tests $t
fi

if [ $bench -eq 1 ] && stage bench; then
    echo "== GPU benchmarks"
    t=$SECONDS
    # (both exist in every build; a missing one is a failure, not a skip)
    for b in $build/bin/bench_ops $build/bin/bench_train; do
        echo "-- $b --ctx gpu"
        if [ ! -x "$b" ]; then
            echo "gpu_check: $b missing"
            status=1
            continue
        fi
        timeout 300 "$b" --ctx gpu >"$log/$(basename "$b").txt" 2>&1 || status=1
        tail -n 70 "$log/$(basename "$b").txt"
    done
    took benchmarks $t
fi

echo "== summary"
stage test && grep -E "^tests:|failed suites" "$log/tests.txt"
# bench_train's check of its cuBLAS/cuDNN baseline against mxc, and a missing baseline
[ $bench -eq 1 ] && stage bench && grep -h -E "WARNING|NO BASELINE" "$log"/bench_*.txt 2>/dev/null
[ $status -eq 0 ] && echo "gpu_check: all passed (stages $stages)" || echo "gpu_check: FAILED (stages $stages)"
exit $status
