#!/usr/bin/env bash
# Runs clang-tidy (Debian 12's clang-tidy 14) with the repository's .clang-tidy over every
# source file of src/, and fails when it reports anything. src/ is clean today; a finding is
# either fixed or, when the check is wrong for the line, silenced there with a NOLINT comment
# that says why. Not a step of scripts/test.sh: it takes about 15 minutes on 2 cores.
#
#   scripts/tidy.sh            configure build-tidy/ (compile commands only), run, report
#   scripts/tidy.sh FILE...    only these files (paths under src/)
#
# Exits 0 when clang-tidy reports nothing, 1 when it reports something, 2 when it cannot run.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
ROOT=$(pwd)
# shellcheck source-path=SCRIPTDIR source=lib/deps.sh
source "$ROOT/scripts/lib/deps.sh"
recap_ensure_packages "${RECAP_DEBIAN_PACKAGES[@]}" clang-tidy || exit 2

build="${RECAP_TIDY_BUILD:-$ROOT/build-tidy}"
mkdir -p "$build" || exit 2
# The compile commands are all clang-tidy needs: configure, do not build.
if ! cmake -S "$ROOT" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DRECAP_BUILD_TESTS=OFF -DRECAP_BUILD_EXAMPLES=OFF \
    >"$build/configure.log" 2>&1; then
  echo "scripts/tidy.sh: configuring $build failed; see $build/configure.log" >&2
  exit 2
fi

if [[ $# -gt 0 ]]; then
  files=("$@")
else
  mapfile -t files < <(find src -name '*.cc' | sort)
fi
jobs=$(nproc 2>/dev/null || echo 2)
log="$build/tidy.log"
echo "scripts/tidy.sh: clang-tidy over ${#files[@]} files with $jobs jobs (log: $log)"
# run-clang-tidy takes the files as patterns matched against the compile commands' paths.
run-clang-tidy -p "$build" -j "$jobs" -quiet "${files[@]}" >"$log" 2>&1
findings=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E ': (warning|error): ' | sort -u)
if [[ -n "$findings" ]]; then
  echo "$findings"
  echo "scripts/tidy.sh: $(echo "$findings" | wc -l) findings; fix them, or silence one with" \
    "// NOLINT(<check>): <why> where the check is wrong for that line." >&2
  exit 1
fi
echo "scripts/tidy.sh: clean (${#files[@]} files)."
