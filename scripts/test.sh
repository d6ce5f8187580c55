#!/usr/bin/env bash
# Builds recap and runs its whole test suite, as CI does (.ci/run calls this).
#
#   scripts/test.sh                  install missing Debian packages, check formatting
#                                    (scripts/check_format.sh), then
#                                      build/       Release (-O3) with the benchmarks, ctest;
#                                                   then the quick budgets alone (ctest label
#                                                   `budgets`: bench/quick_budgets.py, about
#                                                   a minute; scripts/bench.sh is the full run)
#                                      build-asan/  AddressSanitizer + UBSan, ctest
#                                      build-tsan/  ThreadSanitizer: the store, plugin,
#                                                   compactor, fault-sweep and proxy tests
#                                                   (`recap proxy` serving HTTP), and the
#                                                   C API's and codecs' threads tests
#   scripts/test.sh --no-sanitize    only build/ (quicker, for local runs)
#
# Environment: RECAP_SEED=N is passed to the property tests (replays a failure's seed).
# RECAP_QUICK_BUDGETS=0 skips the quick budgets (timings: on a machine busy with other work they
# can fail; CI runs them).
# Exits 0 only when every step passed; the last line is a one-line summary.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
ROOT=$(pwd)
# shellcheck source-path=SCRIPTDIR source=lib/deps.sh
source "$ROOT/scripts/lib/deps.sh"

sanitize=1
for arg in "$@"; do
  case "$arg" in
    --no-sanitize) sanitize=0 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scripts/test.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

start=$(date +%s)
jobs=$(recap_jobs)
results=()
failed=0

if [[ -n "${RECAP_SEED:-}" ]]; then
  export RECAP_SEED
  echo "recap: RECAP_SEED=$RECAP_SEED"
fi

step() {  # step NAME COMMAND...: runs a step, records its result
  local name=$1; shift
  local t0=$SECONDS
  echo
  echo "==> $name: $*"
  if "$@"; then
    results+=("$name ok ($((SECONDS - t0))s)")
    return 0
  fi
  results+=("$name FAILED ($((SECONDS - t0))s)")
  failed=1
  return 1
}

# run_ctest DIR ARGS...: ctest in DIR; a failure's test names are kept for the summary, so the
# last lines of the output say which tests failed even when the log above them is long.
failed_tests=()
failure_tails=$(mktemp)
trap 'rm -f "$failure_tails"' EXIT
run_ctest() {
  local dir=$1; shift
  rm -f "$dir/Testing/Temporary/LastTestsFailed.log"
  if ctest --test-dir "$dir" "$@"; then
    return 0
  fi
  local line name
  if [[ -f "$dir/Testing/Temporary/LastTestsFailed.log" ]]; then
    while IFS= read -r line; do
      name=${line#*:}
      failed_tests+=("$dir: $name")
      # The end of the test's output, from ctest's log, for the summary.
      awk -v name="$name" -v dir="$dir" '
        $0 ~ /^[0-9]+\/[0-9]+ Test: / { sub(/^[0-9]+\/[0-9]+ Test: /, ""); mine = ($0 == name) }
        mine && inside && /<end of output>$/ {
          sub(/<end of output>$/, ""); if ($0 != "") out[n++] = $0; inside = 0; mine = 0 }
        mine && inside { out[n++] = $0 }
        mine && /^Output:$/ { inside = 1; n = 0; getline }  # skips the dashed line
        END { if (n > 0) { print "--- " dir ": " name " (last lines of its output)";
                           for (i = (n > 30 ? n - 30 : 0); i < n; i++) print "    " substr(out[i], 1, 400) } }
      ' "$dir/Testing/Temporary/LastTest.log" >> "$failure_tails"
    done < "$dir/Testing/Temporary/LastTestsFailed.log"
  fi
  return 1
}

summary() {
  local status=$1
  local took=$(( $(date +%s) - start ))
  echo
  if [[ ${#failed_tests[@]} -gt 0 ]]; then
    echo "scripts/test.sh: tests that failed (their output is above, after 'Start' with the name):"
    printf '  %s\n' "${failed_tests[@]}"
    cat "$failure_tails"
  fi
  local IFS=';'
  local line="${results[*]}"
  line=${line//;/, }
  if [[ $status -eq 0 ]]; then
    echo "scripts/test.sh: PASSED in ${took}s: $line"
  else
    echo "scripts/test.sh: FAILED in ${took}s: $line"
  fi
  exit "$status"
}

step deps recap_ensure_packages "${RECAP_DEBIAN_PACKAGES[@]}" || summary 1

# --- formatting: every C++ file as .clang-format says (quick; a failure does not stop the build)
step format scripts/check_format.sh || true

# Ninja for a new build tree; an existing one keeps its generator (CMake refuses to switch).
gen_build=(); [[ -f build/CMakeCache.txt ]] || gen_build=(-G Ninja)
gen_asan=(); [[ -f build-asan/CMakeCache.txt ]] || gen_asan=(-G Ninja)
gen_tsan=(); [[ -f build-tsan/CMakeCache.txt ]] || gen_tsan=(-G Ninja)

# --- build/ ------------------------------------------------------------------------------------
# CMake's Release flags (-O3, no debug info), as scripts/bench.sh and a user's Release build
# have them: the quick budgets measure the code that the full benchmarks measure (at -O2 the
# compiler leaves R11.2's plain pass unvectorized, and the ratio means nothing). The sanitizer
# builds below keep -g for readable stack traces.
# The benchmarks are built too: the quick budgets run them (the `bench.*_smoke` entries, tiny
# runs of every benchmark, stay scripts/bench.sh's).
if step configure cmake -S . -B build "${gen_build[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O3 -DNDEBUG" -DRECAP_BUILD_BENCH=ON \
    -DRECAP_BUILD_TESTS=ON -DRECAP_BUILD_EXAMPLES=ON; then
  if step build cmake --build build -j "$jobs"; then
    step ctest run_ctest build --output-on-failure -j2 -LE '^(bench|budgets)$' || true
    # Timings, so alone: after the other tests, before the sanitizer builds.
    if [[ ${RECAP_QUICK_BUDGETS:-1} == 0 ]]; then
      echo; echo "==> budgets: skipped (RECAP_QUICK_BUDGETS=0)"
      results+=("budgets skipped")
    else
      step budgets run_ctest build --output-on-failure -L '^budgets$' || true
    fi
  fi
fi

# --- build-asan/ -------------------------------------------------------------------------------
if [[ $sanitize -eq 1 ]]; then
  # -Og keeps the sanitized tests fast enough; -g1 (line tables) keeps stack traces readable
  # with file and line, and halves the compile time of -O1 -g.
  # The examples run in build/ (each is a ctest entry there); what they call, the sanitized
  # tests call too, so the sanitizer build leaves them out (a minute of a fresh build).
  if step asan-configure cmake -S . -B build-asan "${gen_asan[@]}" -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_CXX_FLAGS_DEBUG="-Og -g1" -DRECAP_SANITIZE=ON -DRECAP_BUILD_TESTS=ON \
      -DRECAP_BUILD_EXAMPLES=OFF; then
    if step asan-build cmake --build build-asan -j "$jobs"; then
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        step asan-ctest run_ctest build-asan --output-on-failure -j2 || true
    fi
  fi
  # ThreadSanitizer only where threads are: plugin hooks run under a timeout on a worker thread
  # that may be abandoned, the stores are shared between threads, and `recap proxy` serves
  # connections on a pool of threads, each with an upstream exchange on a thread of its own.
  if step tsan-configure cmake -S . -B build-tsan "${gen_tsan[@]}" -DCMAKE_BUILD_TYPE=Debug \
      -DCMAKE_CXX_FLAGS_DEBUG="-Og -g1" -DRECAP_SANITIZE_THREAD=ON -DRECAP_BUILD_TESTS=ON \
      -DRECAP_BUILD_EXAMPLES=OFF; then
    if step tsan-build cmake --build build-tsan -j "$jobs" --target store_tests plugins_tests compactor_tests background_tests fault_tests capi_tests codecs_tests proxy_tests recap_cli; then
      TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
        step tsan-ctest run_ctest build-tsan --output-on-failure -j2 -L 'store|plugins|compactor|fault|proxy' || true
      # The C API's callbacks, and the encoded forms messages keep (recap/codec.h), from several
      # threads at once (the other tests of those labels run no threads).
      TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
        step tsan-threads run_ctest build-tsan --output-on-failure -R '(capi|codecs)\..*threads' || true
    fi
  fi
else
  results+=("sanitizers skipped (--no-sanitize)")
fi

summary "$failed"
