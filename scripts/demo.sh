#!/usr/bin/env bash
# Builds recap's demo (Release) and runs it on a bundled real transcript: its size, where a
# compaction would cut with keepTurns 2, what the tail reducer does at a forcing limit, and
# then the whole session replayed as a host runs it — messages appended to a SQLite session
# file, Compactor::Prepare before every model request, the offline summarizer writing the
# checkpoints (no network, no API key) — with the sizes before and after, the checkpoint and
# the events.
#
#   scripts/demo.sh                 the largest bundled Claude Code session
#   scripts/demo.sh FILE [--run N]  another transcript (Claude Code .jsonl, tau-bench .json
#                                   with --run N, or an OpenAI chat messages array)
#   ... --db PATH                   keep the session file at PATH (default: a temporary file)
#   ... --max-chars N               limits.maxContextChars of the replay
#
# Installs the missing Debian packages first (as root; otherwise prints the command).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$(pwd)
# shellcheck source-path=SCRIPTDIR source=lib/deps.sh
source "$ROOT/scripts/lib/deps.sh"

recap_ensure_packages "${RECAP_DEBIAN_PACKAGES[@]}"

DATA="$ROOT/tests/data"
DEFAULT="$DATA/Users-dain-workspace-claude-code-log-sample__37f83ec9-f2ea-42a9-925e-0d5c105cb6e8.jsonl"

generator=()
[[ -f build-demo/CMakeCache.txt ]] || generator=(-G Ninja)
cmake -S . -B build-demo "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DRECAP_BUILD_TESTS=OFF \
  -DRECAP_BUILD_EXAMPLES=ON >/dev/null
cmake --build build-demo -j "$(recap_jobs)" --target recap_demo

echo
if [[ $# -eq 0 ]]; then
  set -- "$DEFAULT"
fi
exec build-demo/examples/recap_demo "$@"
