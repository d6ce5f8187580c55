#!/usr/bin/env bash
# Fuzzes every parser of recap with libFuzzer (Clang, AddressSanitizer, UndefinedBehaviorSanitizer)
# for a fixed time each, and prints one line per target.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     default: 600 seconds, every target
#   scripts/fuzz.sh 60 fuzz_import            one minute on the importers
#   RECAP_FUZZ_JOBS=2 scripts/fuzz.sh         two targets at a time (default: 1)
#
# Builds in build-fuzz/. Each target starts from a copy of its seed corpus (tests/fuzz/corpus/);
# the inputs libFuzzer finds interesting are kept in build-fuzz/fuzz-work/<target>/corpus, and
# an input that crashes, hangs or breaks an invariant is written to
# build-fuzz/fuzz-work/<target>/crash-* (or leak-*, timeout-*). Add such a file to
# tests/fuzz/corpus/<corpus>/ to keep it as a regression test: ctest replays the corpus in every
# build. Exits 1 when a target found something, 2 when something could not run.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
# shellcheck source-path=SCRIPTDIR source=lib/deps.sh
source "$ROOT/scripts/lib/deps.sh"

seconds=600
if [[ $# -gt 0 && "$1" =~ ^[0-9]+$ ]]; then
  seconds=$1
  shift
fi
all_targets=(fuzz_native fuzz_openai_chat fuzz_anthropic fuzz_openai_responses fuzz_checkpoint fuzz_config fuzz_sse
  fuzz_model_list fuzz_import)
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all_targets[@]}")
jobs=${RECAP_FUZZ_JOBS:-1}

recap_ensure_packages "${RECAP_DEBIAN_PACKAGES[@]}" clang libclang-rt-14-dev

generator=()
[[ -f build-fuzz/CMakeCache.txt ]] || generator=(-G Ninja)
flags="-O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all"
cmake -S . -B build-fuzz "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
  "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_C_FLAGS=$flags" \
  -DRECAP_FUZZ_LIBFUZZER=ON -DRECAP_BUILD_TESTS=ON -DRECAP_BUILD_EXAMPLES=OFF \
  -DRECAP_BUILD_SQLITE=ON -DRECAP_BUILD_HTTP=ON -DRECAP_BUILD_CLI=ON >/dev/null
cmake --build build-fuzz -j "$(recap_jobs)" $(printf -- '--target %s ' "${targets[@]}")

corpus_of() {  # the seed corpus folder of a target
  case "$1" in
    fuzz_native) echo native ;;
    fuzz_openai_chat) echo openai_chat ;;
    fuzz_anthropic) echo anthropic ;;
    *) echo "${1#fuzz_}" ;;
  esac
}

run_target() {
  local target=$1 work="$ROOT/build-fuzz/fuzz-work/$1"
  mkdir -p "$work/corpus"
  cp -n "$ROOT/tests/fuzz/corpus/$(corpus_of "$target")"/* "$work/corpus/" 2>/dev/null || true
  local bin
  bin=$(find "$ROOT/build-fuzz/tests/fuzz" -maxdepth 1 -name "$target" -type f | head -n 1)
  if [[ -z "$bin" ]]; then
    echo "$target: not built" >"$work/result"
    return 2
  fi
  local rc=0
  (cd "$work" && "$bin" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$work/" corpus) >"$work/log" 2>&1 || rc=$?
  local execs units
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/log" | grep -o '[0-9]*$' || echo "?")
  units=$(find "$work/corpus" -type f | wc -l)
  local found
  found=$(find "$work" -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  if [[ $rc -eq 0 && $found -eq 0 ]]; then
    printf '%-18s %8ss %14s runs %6s corpus inputs  no finding\n' "$target" "$seconds" "$execs" "$units" >"$work/result"
  else
    printf '%-18s %8ss %14s runs %6s corpus inputs  FOUND %s (exit %s; see %s/log)\n' \
      "$target" "$seconds" "$execs" "$units" "$found" "$rc" "$work" >"$work/result"
    return 1
  fi
}

echo "fuzzing ${#targets[@]} target(s) for ${seconds}s each, $jobs at a time ..."
status=0
running=0
for t in "${targets[@]}"; do
  run_target "$t" &
  running=$((running + 1))
  if [[ $running -ge $jobs ]]; then
    wait -n || status=1
    running=$((running - 1))
  fi
done
while [[ $running -gt 0 ]]; do
  wait -n || status=1
  running=$((running - 1))
done
for t in "${targets[@]}"; do
  cat "$ROOT/build-fuzz/fuzz-work/$t/result" 2>/dev/null || echo "$t: no result"
done
exit $status
