#!/usr/bin/env bash
# Builds recap's benchmarks and checks the performance budgets of SPEC §13 (R11).
#
#   scripts/bench.sh            install missing Debian packages, configure build-bench/
#                               (Release, -DRECAP_BUILD_BENCH=ON), build the benchmarks, run
#                               them and print their tables — recap_bench_core (R11.1-R11.4,
#                               R11.6, W2), recap_bench_sqlite (R11.5), recap_bench_import
#                               (the command's big imports and exports) and recap_bench_offline
#                               (offline compaction of up to 1,000,000 messages against their
#                               import), recap_bench_sessions (R12.6: 10,000 sessions within
#                               cache.maxBytes): figure, measured, baseline, ratio, budget,
#                               PASS/FAIL; then the chaos soak (recap_bench_soak, issue 17: 50
#                               sessions x 1,000 turns on two hosts with faults on a schedule).
#                               A few minutes on 2 cores.
#                               Then recap_bench_tiers (issue 19): summarizer calls and input
#                               characters per 1,000 turns with and without
#                               compaction.clearToolResults and maxSummarizerInputTokens; and
#                               recap_bench_background (issue 20): Prepare's latency per turn
#                               with a 2 s summarizer, blocking against compaction.background;
#                               and recap_bench_reach (issue 22): the request body per turn
#                               and Prepare through the C API; and, when `recap proxy` is
#                               built, recap_bench_proxy: the time to first byte the proxy
#                               adds, 100 concurrent conversations through it, and the bytes
#                               the upstream receives with and without it.
#   scripts/bench.sh --smoke    the same at tiny sizes (checks that everything runs; budgets
#                               are not enforced)
#   scripts/bench.sh --json FILE  also write every budget to FILE as JSON:
#                               {"budgets": [{"id": "R11.1", "value": …, "baseline": …,
#                               "ratio": …, "limit": …, "pass": …}, …]}
#   scripts/bench.sh -- ARGS    pass ARGS to the benchmark executables (e.g.
#                               --recap_repetitions=5, --benchmark_filter=load)
#
# When the build has the postgres component (RECAP_BUILD_POSTGRES, on by default), the budget
# tables are followed by recap_bench_postgres: the PostgreSQL store against the SQLite store on
# W1, on a private PostgreSQL server it starts and stops itself — a comparison table (figure,
# postgres, sqlite, ratio), no budget. With --json, FILE then also holds its figures under
# "comparisons": [{"id": "postgres/append_durable", "postgres": …, "sqlite": …, "ratio": …}, …].
#
# The temporary database files go to build-bench/ (a real disk: the durable figures measure
# fsync); RECAP_BENCH_BUILD=DIR builds in DIR instead, RECAP_BENCH_JOBS=N builds with N jobs.
# Exits 0 when every budget is met, 1 when one is missed, 2 when something failed.
set -uo pipefail

CALLER_PWD=$PWD
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
ROOT=$(pwd)
# shellcheck source-path=SCRIPTDIR source=lib/deps.sh
source "$ROOT/scripts/lib/deps.sh"

extra=()
json=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --smoke) extra+=(--recap_smoke); shift ;;
    --json)
      [[ $# -ge 2 ]] || { echo "scripts/bench.sh: --json needs a FILE" >&2; exit 2; }
      json=$2; shift 2 ;;
    --json=*) json=${1#--json=}; shift ;;
    --) shift; extra+=("$@"); break ;;
    -h|--help) sed -n '2,37p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scripts/bench.sh: unknown argument '$1' (try --help)" >&2; exit 2 ;;
  esac
done

if [[ -n $json && $json != /* ]]; then json=$CALLER_PWD/$json; fi

BUILD=${RECAP_BENCH_BUILD:-build-bench}  # relative to the repository, or absolute
if [[ $BUILD == /* ]]; then BUILD=$(realpath -m --relative-to="$ROOT" "$BUILD"); fi
BENCHES=(recap_bench_core recap_bench_sqlite recap_bench_import recap_bench_offline recap_bench_sessions)

recap_ensure_packages "${RECAP_DEBIAN_PACKAGES[@]}" || exit 2

gen=(); [[ -f $BUILD/CMakeCache.txt ]] || gen=(-G Ninja)
echo "==> configure $BUILD (Release, RECAP_BUILD_BENCH=ON)"
cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DRECAP_BUILD_BENCH=ON \
  -DRECAP_BUILD_TESTS=OFF -DRECAP_BUILD_EXAMPLES=OFF -DRECAP_INSTALL=OFF >/dev/null || exit 2
# The PostgreSQL comparison, when the postgres component is part of the build.
COMPARISONS=()
if grep -q '^RECAP_BUILD_POSTGRES:BOOL=ON$' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  COMPARISONS=(recap_bench_postgres)
fi
# What a host pays its summarizer with and without the cheap tier and the input budget (issue
# 19): counts, no budget; its figures join the comparisons.
COMPARISONS+=(recap_bench_tiers)
# Prepare's latency per turn with a 2 s summarizer, blocking against background (issue 20).
COMPARISONS+=(recap_bench_background)
# The request body per turn and the C API's Prepare (issue 22).
COMPARISONS+=(recap_bench_reach)
# What the ledger costs a compaction (issue 37).
COMPARISONS+=(recap_bench_ledger)
# Recall against a scan of the same rows, per store; the index's cost on append (issue 38).
COMPARISONS+=(recap_bench_recall)
# `recap prepare` per turn against `recap --help` + `cat` of its output (issue 39); it runs the
# command, which is built with it.
COMPARISONS+=(recap_bench_command)
# What `recap proxy` adds to the time to first byte, 100 concurrent conversations through it, and
# the bytes the upstream receives with and without it; built when the proxy is (cpp-httplib and a
# static http component), with the command it runs.
if [[ -d $BUILD/bench/CMakeFiles/recap_bench_proxy.dir ]]; then
  COMPARISONS+=(recap_bench_proxy)
fi
SOAK=()
if grep -q '^RECAP_BUILD_HTTP:BOOL=ON$' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  SOAK=(recap_bench_soak)
fi
PYTHON_MODULE=()
if grep -q '^RECAP_BUILD_PYTHON:BOOL=ON$' "$BUILD/CMakeCache.txt" 2>/dev/null &&
    grep -q 'recap_python_c' "$BUILD/build.ninja" 2>/dev/null; then
  PYTHON_MODULE=(recap_python_c)
fi
echo "==> build ${BENCHES[*]} ${COMPARISONS[*]} ${SOAK[*]} ${PYTHON_MODULE[*]}"
cmake --build "$BUILD" -j "${RECAP_BENCH_JOBS:-$(recap_jobs)}" \
  --target "${BENCHES[@]}" "${COMPARISONS[@]}" "${SOAK[@]}" "${PYTHON_MODULE[@]}" || exit 2

status=0
parts=()
for bench in "${BENCHES[@]}"; do
  echo
  echo "==> $bench ${extra[*]}"
  part=()
  if [[ -n $json ]]; then
    parts+=("$ROOT/$BUILD/$bench.budgets.json")
    rm -f "${parts[-1]}"
    part=(--recap_json="${parts[-1]}")
  fi
  "$BUILD/bench/$bench" --recap_dir="$ROOT/$BUILD" "${part[@]}" "${extra[@]}"
  rc=$?
  if [[ $rc -gt $status ]]; then status=$rc; fi
done

# Comparisons, no budget: after the budget tables, which stay as they are. Exit 2 (an operation
# failed) counts; there is no 1.
comparison_parts=()
for bench in "${COMPARISONS[@]}"; do
  echo
  echo "==> $bench ${extra[*]}"
  part=()
  if [[ -n $json ]]; then
    comparison_parts+=("$ROOT/$BUILD/$bench.comparisons.json")
    rm -f "${comparison_parts[-1]}"
    part=(--recap_json="${comparison_parts[-1]}")
  fi
  "$BUILD/bench/$bench" --recap_dir="$ROOT/$BUILD" "${part[@]}" "${extra[@]}"
  rc=$?
  if [[ $rc -ne 0 && $rc -gt $status ]]; then status=2; fi
done

# The Python module's prepare beside the C call it makes (issue 22), when the module is built:
# on W1 as recap_bench_reach writes it.
if [[ -f $BUILD/python/recap/_recap_c.so ]]; then
  python=$(sed -n 's/^RECAP_PYTHON_EXECUTABLE:FILEPATH=//p' "$BUILD/CMakeCache.txt")
  [[ -n $python ]] || python=$( [[ -x /usr/bin/python3 ]] && echo /usr/bin/python3 || echo python3)
  echo
  echo "==> bench/bench_python.py (with $python)"
  py_part=()
  if [[ -n $json ]]; then
    comparison_parts+=("$ROOT/$BUILD/bench_python.comparisons.json")
    rm -f "${comparison_parts[-1]}"
    py_part=(--json "${comparison_parts[-1]}")
  fi
  smoke_flag=(); [[ " ${extra[*]} " == *" --recap_smoke "* ]] && smoke_flag=(--smoke)
  if "$BUILD/bench/recap_bench_reach" --recap_w1_json="$ROOT/$BUILD/w1.json" "${extra[@]}" &&
      PYTHONPATH="$ROOT/$BUILD/python" "$python" bench/bench_python.py --w1 "$ROOT/$BUILD/w1.json" \
        "${smoke_flag[@]}" "${py_part[@]}"; then
    :
  else
    status=2
  fi
fi

# Each executable writes {"budgets": [ ... ]} (or {"comparisons": [ ... ]}) with one object a
# line; the merged file is their object lines joined by commas, under the same keys.
merge_lines() {  # merge_lines FILE...: the objects of FILE..., joined by commas
  local part line first=1
  for part in "$@"; do
    [[ -f $part ]] || { echo "scripts/bench.sh: $part was not written" >&2; status=2; continue; }
    while IFS= read -r line; do
      [[ $line == '  {"id": '* ]] || continue
      line=${line%,}
      if [[ $first -eq 0 ]]; then printf ',\n'; fi
      printf '%s' "$line"
      first=0
    done <"$part"
  done
}
# The chaos soak (issue 17): its checks hold after every turn or it exits 1.
if grep -q '^RECAP_BUILD_HTTP:BOOL=ON$' "$BUILD/CMakeCache.txt" 2>/dev/null; then
  echo
  soak_args=(--recap_dir="$ROOT/$BUILD")
  for arg in "${extra[@]}"; do [[ $arg == --recap_smoke ]] && soak_args+=(--recap_smoke); done
  echo "==> recap_bench_soak ${soak_args[*]}"
  "$BUILD/bench/recap_bench_soak" "${soak_args[@]}"
  rc=$?
  if [[ $rc -gt $status ]]; then status=$rc; fi
fi

if [[ -n $json ]]; then
  {
    echo '{"budgets": ['
    merge_lines "${parts[@]}"
    printf '\n],\n"comparisons": [\n'
    merge_lines "${comparison_parts[@]}"
    printf '\n]}\n'
  } >"$json" || status=2
  echo
  echo "scripts/bench.sh: budgets written to $json"
fi

echo
case $status in
  0) echo "scripts/bench.sh: PASSED: every budget met" ;;
  1) echo "scripts/bench.sh: FAILED: a budget was missed (see the table above)" ;;
  *) echo "scripts/bench.sh: FAILED: a benchmark could not run (exit $status)" ;;
esac
exit "$status"
