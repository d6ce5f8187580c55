#!/usr/bin/env bash
# recap's demo: builds the `recap` command (Release, build-demo/) and walks through its main job
# on two bundled real transcripts, with its embedded defaults — a SQLite session file and the
# offline summarizer (no network, no API key):
#
#   1. import a Claude Code session and a tau-bench run into a fresh database
#   2. `recap plan`: where a compaction would cut and what it would free
#   3. `recap compact`: the before/after table, the checkpoint and the events
#   4. `recap export`: what a model would now receive (and `--history`: nothing was lost)
#
#   scripts/demo.sh                 the walkthrough
#   scripts/demo.sh --replay        then also replay the Claude Code session the way a host runs
#                                   it: every message appended, Compactor::Prepare before every
#                                   model request (examples/demo.cc)
#   scripts/demo.sh --keep DIR      keep the database and the exported files in DIR
#                                   (default: a temporary folder, removed at the end)
#
# Installs the missing Debian packages first (as root; otherwise prints the command).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
# shellcheck source-path=SCRIPTDIR source=lib/deps.sh
source "$ROOT/scripts/lib/deps.sh"

replay=0
keep=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --replay) replay=1 ;;
    --keep)
      [[ $# -ge 2 ]] || { echo "scripts/demo.sh: --keep needs a folder" >&2; exit 2; }
      keep="$2"
      shift
      ;;
    -h | --help)
      sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "scripts/demo.sh: unknown argument '$1' (try --help)" >&2
      exit 2
      ;;
  esac
  shift
done

# Only what the demo builds needs (scripts/test.sh installs the rest).
recap_ensure_packages "${RECAP_DEMO_PACKAGES[@]}"

DATA="$ROOT/tests/data"
CLAUDE="$DATA/Users-dain-workspace-claude-code-log-sample__37f83ec9-f2ea-42a9-925e-0d5c105cb6e8.jsonl"
TAU="$DATA/tau-bench_gpt-4o-airline.json"

generator=()
[[ -f build-demo/CMakeCache.txt ]] || generator=(-G Ninja)
echo "building the recap command (build-demo/, Release; a few minutes the first time) ..."
mkdir -p build-demo
build_log="build-demo/build.log"
if ! cmake -S . -B build-demo "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DRECAP_BUILD_TESTS=OFF -DRECAP_BUILD_EXAMPLES=ON -DRECAP_BUILD_CLI=ON \
    -DRECAP_BUILD_SQLITE=ON -DRECAP_BUILD_HTTP=OFF -DRECAP_BUILD_POSTGRES=OFF \
    -DRECAP_BUILD_C=OFF -DRECAP_BUILD_PYTHON=OFF >"$build_log" 2>&1; then
  cat "$build_log" >&2
  echo "scripts/demo.sh: configuring the build failed (above; also in $build_log)" >&2
  exit 1
fi
targets=(--target recap_cli)
[[ $replay -eq 1 ]] && targets+=(--target recap_demo)
# Progress as the build goes: Ninja's "[done/total]" on one line on a terminal, every tenth
# step otherwise; the whole output goes to the log, and is shown if the build fails.
set +e
cmake --build build-demo -j "$(recap_jobs)" "${targets[@]}" 2>&1 | tee -a "$build_log" |
  while IFS= read -r line; do
    if [[ "$line" =~ ^\[([0-9]+)/([0-9]+)\] ]]; then
      done_steps=${BASH_REMATCH[1]}
      total=${BASH_REMATCH[2]}
      if [[ -t 1 ]]; then
        printf '\r  compiling: %s of %s steps' "$done_steps" "$total"
      elif ((done_steps % 10 == 0 || done_steps == total)); then
        printf '  compiling: %s of %s steps\n' "$done_steps" "$total"
      fi
    fi
  done
status=${PIPESTATUS[0]}
set -e
[[ -t 1 ]] && printf '\n'
if [[ $status -ne 0 ]]; then
  tail -n 40 "$build_log" >&2
  echo "scripts/demo.sh: the build failed (the end of its output is above; all of it in $build_log)" >&2
  exit 1
fi
RECAP="$ROOT/build-demo/src/cli/recap"

if [[ -n "$keep" ]]; then
  mkdir -p "$keep"
  WORK=$(cd "$keep" && pwd)
  rm -f "$WORK/demo.db" "$WORK/demo.db-wal" "$WORK/demo.db-shm"
else
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/recap-demo.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
fi
DB="$WORK/demo.db"

if [[ -t 1 ]]; then
  step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
else
  step() { printf '\n== %s\n' "$*"; }
fi
show() {  # prints the command as a user would type it, then runs it
  local shown=("recap")
  local a
  for a in "$@"; do
    case "$a" in
      "$DB") shown+=("demo.db") ;;
      "$DATA"/*) shown+=("tests/data/${a#"$DATA"/}") ;;
      *" "*) shown+=("\"$a\"") ;;
      *) shown+=("$a") ;;
    esac
  done
  printf '$ %s\n' "${shown[*]}"
  "$RECAP" "$@"
}

step "1. import two real transcripts into a fresh database"
show import --format claude-code "$CLAUDE" --session claude-code --db "$DB"
echo
show import --format openai-chat "$TAU" --run 0 --session tau-bench --db "$DB"
echo
show sessions list --db "$DB"

step "2. plan: where a compaction would cut, and what it would free (changes nothing)"
show plan --session claude-code --db "$DB"

step "3. compact the Claude Code session (offline summarizer, keepTurns 2)"
show compact --session claude-code --db "$DB" --focus "the files changed and what is left to do"

step "   and the tau-bench run, keeping only its last turn"
show compact --session tau-bench --db "$DB" --keep-turns 1

step "4. export what a model would now receive"
EXPORT="$WORK/claude-code.anthropic.json"
printf '$ recap export --session claude-code --format anthropic --db demo.db > %s\n' \
  "$(basename "$EXPORT")"
"$RECAP" export --session claude-code --format anthropic --db "$DB" >"$EXPORT"
echo "$(wc -c <"$EXPORT") bytes; its first lines (the checkpoint comes first, as a user message):"
head -n 14 "$EXPORT" | cut -c 1-110
echo "  ..."
echo
show stats --session claude-code --db "$DB"
echo
HISTORY="$WORK/claude-code.history.json"
printf '$ recap export --session claude-code --format recap --history --db demo.db > %s\n' \
  "$(basename "$HISTORY")"
"$RECAP" export --session claude-code --format recap --history --db "$DB" >"$HISTORY"
compacted=$(grep -c '"state": "compacted"' "$HISTORY" || true)
active=$(grep -c '"state": "active"' "$HISTORY" || true)
echo "the history keeps every message: $compacted compacted (summarized) + $active active entries"

if [[ $replay -eq 1 ]]; then
  step "5. the same session as a host runs it: append each message, Prepare before each request"
  "$ROOT/build-demo/examples/recap_demo" "$CLAUDE"
fi

echo
if [[ -n "$keep" ]]; then
  echo "The database and the exported files are in $WORK."
else
  echo "Done. \`scripts/demo.sh --keep DIR\` keeps the database and the exports."
fi
if [[ $replay -eq 0 ]]; then
  echo "\`scripts/demo.sh --replay\` also replays the session turn by turn, as a host would."
fi
