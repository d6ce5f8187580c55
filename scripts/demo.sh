#!/usr/bin/env bash
# recap's demo: builds what it shows (Release, build-demo/: the core, the SQLite store, the
# `recap` command and examples/demo.cc) with its embedded defaults — a SQLite session file and
# the offline summarizer (no network, no API key) — and runs, over bundled real transcripts:
#
#   1. recap's main job: a real Claude Code session replayed turn by turn as a host runs it —
#      every message appended, Prepare before every model request, automatic compaction where
#      the request reaches the trigger; each request's size without recap and as sent, the
#      checkpoint and the events (examples/demo.cc)
#   2. the same job from the shell with the `recap` command: import a Claude Code session and
#      a tau-bench run, `recap plan`, `recap compact` (before/after, the checkpoint, the events)
#      and `recap export` (what a model receives now; `--history`: nothing was lost)
#
#   scripts/demo.sh                 both
#   scripts/demo.sh --replay        the replay (1) only
#   scripts/demo.sh --keep DIR      keep the databases and the exported files in DIR
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
      sed -n '2,19p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
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

# RECAP_DEMO_BUILD_DIR: a build tree that already holds recap_demo and the command (the
# suite's test of this script uses its own); nothing is configured or built then.
if [[ -n "${RECAP_DEMO_BUILD_DIR:-}" ]]; then
  BUILD=$(cd "$RECAP_DEMO_BUILD_DIR" && pwd)
else
  BUILD="$ROOT/build-demo"
  generator=()
  [[ -f build-demo/CMakeCache.txt ]] || generator=(-G Ninja)
  echo "building recap (build-demo/, Release; a few minutes the first time) ..."
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
  targets=(--target recap_demo)
  [[ $replay -eq 1 ]] || targets+=(--target recap_cli)
  recap_build_with_progress build-demo "$build_log" "${targets[@]}" || exit 1
fi
RECAP="$BUILD/src/cli/recap"

if [[ -n "$keep" ]]; then
  mkdir -p "$keep"
  WORK=$(cd "$keep" && pwd)
  rm -f "$WORK"/demo.db "$WORK"/demo.db-wal "$WORK"/demo.db-shm "$WORK"/demo-replay.db*
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

# Claude Code sends its system prompt and tool definitions with every request, and its session
# files record neither: the replay adds what Claude Code 2.1.197 sent (src/proxy/clients.md: a
# system prompt of 74 + 62 + 5,636 characters and 24 tools of about 64 KB).
step "1. recap's main job: a real Claude Code session, replayed as a host runs it"
echo "$ build-demo/examples/recap_demo tests/data/${CLAUDE#"$DATA"/} \\"
echo "      --instructions-chars 5772 --tools-chars 64000 --db demo-replay.db"
"$BUILD/examples/recap_demo" "$CLAUDE" --instructions-chars 5772 --tools-chars 64000 \
  --db "$WORK/demo-replay.db"

if [[ $replay -eq 0 ]]; then
  step "2. the same job with the recap command: import two real transcripts"
  show import --format claude-code "$CLAUDE" --session claude-code --db "$DB"
  echo
  show import --format openai-chat "$TAU" --run 0 --session tau-bench --db "$DB"
  echo
  show sessions list --db "$DB"

  step "3. plan: where a compaction would cut, and what it would free (changes nothing)"
  show plan --session claude-code --db "$DB"

  step "4. compact the Claude Code session (offline summarizer, keepTurns 2)"
  show compact --session claude-code --db "$DB" --focus "the files changed and what is left to do"

  step "   and the tau-bench run, keeping only its last turn"
  show compact --session tau-bench --db "$DB" --keep-turns 1

  step "5. export what a model would now receive"
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
  echo "(the figures of steps 3-5 count the messages alone: the command knows no host's"
  echo " instructions, which step 1 counted)"
fi

echo
if [[ -n "$keep" ]]; then
  echo "The databases and the exported files are in $WORK."
else
  echo "Done. \`scripts/demo.sh --keep DIR\` keeps the databases and the exports."
fi
if [[ $replay -eq 1 ]]; then
  echo "\`scripts/demo.sh\` without --replay also runs the same job with the recap command."
fi
