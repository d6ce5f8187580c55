#!/usr/bin/env bash
# Checks that every C++ file of the checkout is formatted as .clang-format says (clang-format
# from Debian 12's clang-format package). Prints the files that are not, and the command that
# formats them; exits 1 then, 0 when all are formatted. scripts/test.sh runs it as its
# `format` step.
#
#   scripts/check_format.sh          check
#   scripts/check_format.sh --fix    format them in place (clang-format -i)
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
fix=0
case "${1:-}" in
  --fix) fix=1 ;;
  "") ;;
  *) echo "check_format.sh: unknown argument '$1' (use --fix to format the files)" >&2; exit 2 ;;
esac

if ! command -v clang-format >/dev/null 2>&1; then
  echo "check_format.sh: clang-format not found; install it: apt-get install clang-format" >&2
  exit 2
fi

# The project's C++ files: tracked ones in a git checkout, else every one under the sources.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.cc' '*.h' '*.cpp' '*.c')
else
  mapfile -t files < <(find include src tests bench examples -type f \
    \( -name '*.cc' -o -name '*.h' -o -name '*.cpp' -o -name '*.c' \) | sort)
fi
if [[ ${#files[@]} -eq 0 ]]; then
  echo "check_format.sh: no C++ files found" >&2
  exit 2
fi

if [[ $fix -eq 1 ]]; then
  clang-format -i -- "${files[@]}"
  echo "check_format.sh: formatted ${#files[@]} files."
  exit 0
fi

# Every processor at once, a batch of files a call; each file that is not formatted is named
# once ("<file>:<line>:<col>: error: code should be clang-formatted").
jobs=$(nproc 2>/dev/null || echo 2)
said=$(printf '%s\0' "${files[@]}" |
  xargs -0 -n 16 -P "$jobs" clang-format --dry-run --Werror -- 2>&1 >/dev/null)
status=$?
mapfile -t bad < <(printf '%s\n' "$said" |
  sed -n 's/^\(.*\):[0-9][0-9]*:[0-9][0-9]*: error: .*/\1/p' | sort -u)
if [[ $status -ne 0 && ${#bad[@]} -eq 0 ]]; then
  # clang-format failed without naming an unformatted file: say what it said.
  echo "check_format.sh: clang-format failed (exit $status):" >&2
  printf '%s\n' "$said" | head -20 >&2
  exit 2
fi
if [[ ${#bad[@]} -gt 0 ]]; then
  echo "check_format.sh: ${#bad[@]} of ${#files[@]} C++ files are not formatted as .clang-format says:"
  printf '  %s\n' "${bad[@]}"
  echo "Format them with: scripts/check_format.sh --fix   (or clang-format -i <file>)"
  exit 1
fi
echo "check_format.sh: all ${#files[@]} C++ files are formatted ($(clang-format --version | head -1))."
