#!/usr/bin/env bash
# The image record pipeline against MXNet 1.9.1's ImageRecordIter, in one run: the same
# .rec file, the same settings (224 x 224 crops after resize 256, rand_crop, rand_mirror,
# float32, batches of 32, shuffled) and the same preprocess threads (1 and 2), images per
# second of each side by side with mxc / MXNet.
#
#   bash scripts/bench_io_mxnet.sh [--rec PATH] [--images N] [--threads 1,2] [--epochs E]
#                                  [--json]
#
# The file is build/bench_io.rec by default, written by build/bin/bench_io when missing
# (N JPEGs of 500 x 375, default 256). MXNet runs from $MXNET_PYTHON when set, else from the
# virtual environment build/mxnet-venv, made and filled from PyPI (mxnet==1.9.1,
# numpy<1.24) the first time. --json prints bench_io's lines and one line per thread count
# with bench "io", case "rec_224_t<threads>_mxnet", the MXNet figure and ratio_vs_baseline
# (mxc / MXNet). Run from the repository root after `make benches` (make bench does both).
set -euo pipefail

rec=build/bench_io.rec images=256 threads=1,2 epochs=2 json=0
while [ $# -gt 0 ]; do
    case "$1" in
    --rec) rec=$2; shift 2 ;;
    --images) images=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --json) json=1; shift ;;
    *) echo "usage: $0 [--rec PATH] [--images N] [--threads 1,2] [--epochs E] [--json]" >&2
       exit 2 ;;
    esac
done

bench=build/bin/bench_io
[ -x "$bench" ] || { echo "bench_io_mxnet: $bench is missing: run make benches" >&2; exit 1; }

py=${MXNET_PYTHON:-build/mxnet-venv/bin/python}
if ! MXNET_MKLDNN_ENABLED=0 "$py" -c 'import mxnet' 2>/dev/null; then
    if [ -n "${MXNET_PYTHON:-}" ]; then
        echo "bench_io_mxnet: $MXNET_PYTHON cannot import mxnet" >&2
        exit 1
    fi
    echo "bench_io_mxnet: installing mxnet 1.9.1 into build/mxnet-venv (PyPI)" >&2
    python3 -m venv build/mxnet-venv
    build/mxnet-venv/bin/pip install --quiet mxnet==1.9.1 'numpy<1.24'
fi

mxc_out=$("$bench" --json --rec "$rec" --images "$images" --threads "$threads" \
    --epochs "$epochs")

mxnet_out=$(MXNET_MKLDNN_ENABLED=0 "$py" - "$rec" "$threads" "$epochs" <<'EOF' 2>/dev/null
import sys, time
import mxnet as mx

rec, threads, epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
for t in (int(x) for x in threads.split(",")):
    it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 224, 224), batch_size=32,
                               resize=256, rand_crop=True, rand_mirror=True, shuffle=True,
                               preprocess_threads=t)
    batches = iter(it)
    next(batches)  # warm-up, as bench_io
    n, start = 0, time.perf_counter()
    for e in range(epochs):
        for b in batches:
            b.data[0].wait_to_read()
            n += 32 - b.pad
        it.reset()
        batches = iter(it)
    print(t, n / (time.perf_counter() - start))
EOF
)

# mxc's figure for thread count $1 from bench_io's JSON lines
mxc_rate() {
    printf '%s\n' "$mxc_out" | grep "\"case\":\"rec_224_t$1\"" |
        sed 's/.*"images_per_s":\([0-9.e+-]*\).*/\1/'
}

[ "$json" = 1 ] && printf '%s\n' "$mxc_out"
[ "$json" = 1 ] || printf '%-8s %14s %14s %8s\n' threads "mxc img/s" "MXNet img/s" ratio
while read -r t rate; do
    mine=$(mxc_rate "$t")
    ratio=$(awk -v a="$mine" -v b="$rate" 'BEGIN { printf "%.3f", a / b }')
    if [ "$json" = 1 ]; then
        printf '{"bench":"io","case":"rec_224_t%s_mxnet","system":"mxnet-1.9.1",' "$t"
        printf '"images_per_s":%s,"threads":%s,"baseline":"mxnet","ratio_vs_baseline":%s}\n' \
            "$rate" "$t" "$ratio"
    else
        printf '%-8s %14.1f %14.1f %7sx\n' "$t" "$mine" "$rate" "$ratio"
    fi
done <<<"$mxnet_out"
