#!/usr/bin/env bash
# ctest install.issue42: what a user's plain configure builds (scripts/install.sh, the README's
# install line): the libraries, the command and the Python module, and none of the tests,
# examples or benchmarks; and scripts/install.sh's usage errors.
#
#   plain_configure.sh SOURCE_DIR WORK_DIR
set -uo pipefail
source_dir=$1
work=$2
rm -rf "$work"
mkdir -p "$work"

fail=0
if ! cmake -S "$source_dir" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    >"$work/configure.log" 2>&1; then
  cat "$work/configure.log"
  echo "FAIL: a plain configure failed"
  exit 1
fi
ninja -C "$work/build" -t targets all >"$work/targets.txt"
has() { grep -Eq "^$1: " "$work/targets.txt"; }
for wanted in recap_core recap_sqlite recap_http recap_postgres recap_c recap_cli recap_python_c; do
  if ! has "$wanted"; then
    echo "FAIL: a plain configure does not build $wanted"
    fail=1
  fi
done
for unwanted in cli_tests store_tests compactor_tests recap_demo recap_host_loop \
    recap_bench_core recap_testing; do
  if has "$unwanted"; then
    echo "FAIL: a plain configure builds $unwanted (the tests' or examples')"
    fail=1
  fi
done
if grep -q "add_test\|^add_test" "$work/build/CTestTestfile.cmake" 2>/dev/null; then
  echo "FAIL: a plain configure registers tests"
  fail=1
fi

# Usage errors say what to type, and install nothing.
out=$(bash "$source_dir/scripts/install.sh" --prefix /proc/recap-cannot-write 2>&1)
rc=$?
if [[ $rc -ne 2 || "$out" != *"--prefix DIR"* ]]; then
  echo "FAIL: an unwritable --prefix: exit $rc, said: $out"
  fail=1
fi
out=$(bash "$source_dir/scripts/install.sh" --prefx /tmp 2>&1)
rc=$?
if [[ $rc -ne 2 || "$out" != *"unknown argument '--prefx'"* ]]; then
  echo "FAIL: a misspelt option: exit $rc, said: $out"
  fail=1
fi

[[ $fail -eq 0 ]] && echo "install: a plain configure builds the libraries, the command and the Python module only"
exit $fail
