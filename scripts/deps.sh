#!/usr/bin/env bash
# Checks for the Debian packages mxc's build, tests and benchmarks need and installs the
# missing ones with apt-get (as root). Called by the Makefile; safe to run again.
#   scripts/deps.sh          what the build and the tests need (clang and its sanitizer and
#                            libFuzzer runtimes included: make check's clang build, make fuzz)
#   scripts/deps.sh --bench  also the benchmarks' baselines: Debian's PyTorch and numpy for
#                            /usr/bin/python3 (scripts/bench_train_pytorch.py); `make bench`
#   scripts/deps.sh --fuzz   the same as without it (kept for `make fuzz`)
set -euo pipefail

packages=(check libsubunit-dev libopenblas-dev zlib1g-dev pkg-config dataset-fashion-mnist)
# JPEG and PNG decoding for RecordIO image files (io/image.c)
packages+=(libjpeg62-turbo-dev libpng-dev)
# `make check`'s clang build: the compiler and its sanitizer runtimes (which the fuzz
# targets use too, with libFuzzer); libomp for the benchmarks' OpenMP baselines when they
# are built with CC=clang.
packages+=(clang libclang-rt-14-dev libomp-14-dev)
# MPI for the dist_sync store (USE_MPI=1, the default) and mpirun for its tests
packages+=(libopenmpi-dev openmpi-bin)
for option in "$@"; do
    case "$option" in
    # the PyTorch baseline of bench/bench_train.c (Debian's own python3 packages)
    --bench) packages+=(python3-torch python3-numpy) ;;
    # the fuzz targets: nothing beyond the clang build's packages
    --fuzz) ;;
    *) echo "mxc deps: unknown option $option" >&2; exit 2 ;;
    esac
done

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

echo "mxc deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
    echo "mxc deps: not root; run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "mxc deps: done"
