#!/usr/bin/env bash
# Runs the Check suites in a build's bin folder: scripts/run_tests.sh BIN [name ...]
# (names without the check_ prefix limit the run). Exits non-zero if any suite fails and
# ends with one summary line: "N passed, N failed".
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

passed=0
failed=0
failed_suites=()
for s in "${suites[@]}"; do
    [ -x "$s" ] || { echo "missing test binary $s"; failed=$((failed + 1)); continue; }
    echo "== $(basename "$s")"
    out=$("$s" 2>&1)
    status=$?
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
