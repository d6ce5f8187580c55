#!/usr/bin/env bash
# Builds recap's benchmarks and checks the performance budgets of SPEC §13 (R11).
#
#   scripts/bench.sh            install missing Debian packages, configure build-bench/
#                               (Release, -DRECAP_BUILD_BENCH=ON), build the benchmarks, run
#                               them and print one table: figure, store, bare, ratio, budget,
#                               PASS/FAIL. About a minute on a 2-core machine.
#   scripts/bench.sh --smoke    the same at tiny sizes (checks that everything runs; budgets
#                               are not enforced)
#   scripts/bench.sh -- ARGS    pass ARGS to the benchmark executables (e.g.
#                               --recap_repetitions=5, --benchmark_filter=load)
#
# The temporary database files go to build-bench/ (a real disk: the durable figures measure
# fsync). Exits 0 when every budget is met, 1 when one is missed, 2 when something failed.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
ROOT=$(pwd)
# shellcheck source-path=SCRIPTDIR source=lib/deps.sh
source "$ROOT/scripts/lib/deps.sh"

extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) extra+=(--recap_smoke); shift ;;
    --) shift; extra+=("$@"); break ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scripts/bench.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

BUILD=build-bench
BENCHES=(recap_bench_sqlite)

recap_ensure_packages "${RECAP_DEBIAN_PACKAGES[@]}" || exit 2

gen=(); [[ -f $BUILD/CMakeCache.txt ]] || gen=(-G Ninja)
echo "==> configure $BUILD (Release, RECAP_BUILD_BENCH=ON)"
cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DRECAP_BUILD_BENCH=ON \
  -DRECAP_BUILD_TESTS=OFF -DRECAP_BUILD_EXAMPLES=OFF -DRECAP_INSTALL=OFF >/dev/null || exit 2
echo "==> build ${BENCHES[*]}"
cmake --build "$BUILD" -j "${RECAP_BENCH_JOBS:-$(recap_jobs)}" --target "${BENCHES[@]}" || exit 2

status=0
for bench in "${BENCHES[@]}"; do
  echo
  echo "==> $bench ${extra[*]}"
  "$BUILD/bench/$bench" --recap_dir="$ROOT/$BUILD" "${extra[@]}"
  rc=$?
  if [[ $rc -gt $status ]]; then status=$rc; fi
done

echo
case $status in
  0) echo "scripts/bench.sh: PASSED: every budget met" ;;
  1) echo "scripts/bench.sh: FAILED: a budget was missed (see the table above)" ;;
  *) echo "scripts/bench.sh: FAILED: a benchmark could not run (exit $status)" ;;
esac
exit "$status"
