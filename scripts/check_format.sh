#!/usr/bin/env bash
# Checks that every C source and header follows .clang-format (STYLE.md): lists the files
# that would change and exits 1 if any would. `make format` rewrites them. Installs
# Debian's clang-format (the version CI and developers share) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null 2>&1; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "check_format: clang-format is missing; install it (apt-get install clang-format)" >&2
        exit 1
    fi
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang-format
fi
bad=()
while IFS= read -r f; do
    clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.c' '*.h' '*.cu' ':!tests/data')
if [ ${#bad[@]} -gt 0 ]; then
    echo "check_format: these files do not follow .clang-format (run make format):"
    printf '  %s\n' "${bad[@]}"
    exit 1
fi
echo "check_format: $(git ls-files '*.c' '*.h' '*.cu' ':!tests/data' | wc -l) files follow .clang-format ($(clang-format --version))"
