#!/usr/bin/env bash
# Runs the Check suites in a build's bin folder: scripts/run_tests.sh BIN [name ...]
# (names without the check_ prefix limit the run). Exits non-zero if any suite fails and
# ends with one summary line: "N passed, N failed". MXC_TEST_JOBS=N runs N suites at a
# time (default 1; each suite's output is still printed whole, in order): for machines
# with many cores, such as the GPU machine of scripts/gpu_check.sh. The suites' scratch
# files under build/ are named after their suite, so they do not collide.
set -u
bin=$1
shift
if [ $# -gt 0 ]; then
    suites=()
    for n in "$@"; do suites+=("$bin/check_$n"); done
else
    suites=()
    for s in "$bin"/check_*; do
        case "$s" in *.d) ;; *) suites+=("$s") ;; esac
    done
fi

# Suites write their scratch files under build/ (paths relative to the repository root),
# which a build for another folder (build-cuda) does not create.
mkdir -p build

# Each suite's output and exit status go to a scratch folder; with MXC_TEST_JOBS > 1 all
# suites run first, up to that many at once, else each runs just before its report.
jobs=${MXC_TEST_JOBS:-1}
outdir=$(mktemp -d)
trap 'rm -rf "$outdir"' EXIT
run_suite() { # run_suite BINARY OUTDIR
    "$1" >"$2/$(basename "$1").out" 2>&1
    echo $? >"$2/$(basename "$1").rc"
}
if [ "$jobs" -gt 1 ]; then
    export -f run_suite
    for s in "${suites[@]}"; do
        [ -x "$s" ] && printf '%s\0' "$s"
    done | xargs -0 -r -P "$jobs" -I{} bash -c 'run_suite "$1" "$2"' _ {} "$outdir"
fi

passed=0
failed=0
failed_suites=()
for s in "${suites[@]}"; do
    [ -x "$s" ] || { echo "missing test binary $s"; failed=$((failed + 1)); continue; }
    echo "== $(basename "$s")"
    [ "$jobs" -gt 1 ] || run_suite "$s" "$outdir"
    out=$(cat "$outdir/$(basename "$s").out")
    status=$(cat "$outdir/$(basename "$s").rc")
    echo "$out"
    # Check prints "NN%: Checks: C, Failures: F, Errors: E"
    line=$(echo "$out" | grep -E '^[0-9]+%: Checks: ' | tail -n 1)
    if [ -n "$line" ]; then
        c=$(echo "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
        f=$(echo "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
        e=$(echo "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
        passed=$((passed + c - f - e))
        failed=$((failed + f + e))
    fi
    if [ $status -ne 0 ]; then
        failed_suites+=("$(basename "$s")")
        [ -n "$line" ] || failed=$((failed + 1))
    fi
done

echo
[ ${#failed_suites[@]} -eq 0 ] || echo "failed suites: ${failed_suites[*]}"
echo "tests: $passed passed, $failed failed"
[ $failed -eq 0 ] && [ ${#failed_suites[@]} -eq 0 ]
