#!/usr/bin/env bash
# run_browser.sh RECAP_BINARY WORKDIR NPM_DIR: `recap report`'s pages in a real browser (issue 41,
# docs/report.md).
#
#  1. needs Debian's chromium (/usr/bin/chromium, or $RECAP_CHROMIUM), node, npm and python3, and
#     puppeteer-core (pinned below), installed into NPM_DIR/report when missing with
#     --ignore-scripts (no browser is downloaded: the test drives /usr/bin/chromium). Exit 77,
#     ctest's SKIP, with one line saying why, when one is missing or npm's registry cannot be
#     reached;
#  2. builds two sessions with RECAP_BINARY in WORKDIR: "real", the Claude Code sample of
#     tests/data imported, compacted, a turn with hostile texts appended, compacted again (two
#     compactions, the second folding the first), its `compact --json` events kept as
#     WORKDIR/real.events.jsonl; and "generated", ~20,000 messages from gen_session.py appended
#     in four parts, each part compacted (four compactions);
#  3. writes each one's page with `recap report` (sizes printed) and what the page must show
#     with expect.py from `recap export --history`;
#  4. runs browser_test.mjs on both pages: the checks, the load time of the 20,000-message page,
#     screenshots in WORKDIR/artifacts/*.png.
# The whole run is bounded to 300 s; the browser is closed and its profile removed on exit.
# Exit: 0 passed, 1 failed (the reason is printed), 2 usage, 77 skipped, 124 out of time.
set -u
if [ -z "${RUN_BROWSER_BOUNDED:-}" ]; then
  RUN_BROWSER_BOUNDED=1 exec timeout -k 5 300 bash "$0" "$@"
fi
PUPPETEER_VERSION=24.43.1 # the newest 24.x; puppeteer-core 25 needs Node >= 22.12 (Debian 12 has 20)
here=$(cd "$(dirname "$0")" && pwd)
data=$(cd "$here/../data" && pwd)
if [ $# -ne 3 ]; then
  echo "usage: run_browser.sh RECAP_BINARY WORKDIR NPM_DIR" >&2
  exit 2
fi
recap=$1 work=$2 npm=$3
chromium=${RECAP_CHROMIUM:-/usr/bin/chromium}
mkdir -p "$work" && work=$(cd "$work" && pwd) || exit 1

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
}
trap cleanup EXIT
trap 'echo "run_browser: stopped by a signal (the 300 s bound?)" >&2; exit 124' TERM INT
fail() {
  echo "run_browser: FAIL: $*" >&2
  exit 1
}
skip() {
  echo "run_browser: SKIP: $*" >&2
  exit 77
}

# 1. The browser and the tools.
[ -x "$chromium" ] || skip "no chromium at $chromium (apt-get install --no-install-recommends chromium)"
command -v node >/dev/null || skip "node missing: cannot run puppeteer-core"
command -v python3 >/dev/null || skip "python3 missing: cannot generate the sessions"
[ -x "$recap" ] || fail "no recap binary at $recap"
dir=$npm/report
installed() {
  local pj="$dir/node_modules/puppeteer-core/package.json"
  [ -f "$pj" ] && [ "$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$pj" | head -1)" = "$PUPPETEER_VERSION" ]
}
if ! installed; then
  command -v npm >/dev/null || skip "npm missing: cannot install puppeteer-core"
  mkdir -p "$dir" || exit 1
  exec 9>"$dir/.npm_deps.lock"
  command -v flock >/dev/null && flock -w 300 9
  if ! installed; then
    if ! out=$(timeout 30 npm ping --fetch-retries=0 --fetch-timeout=15000 2>&1); then
      why=$(printf '%s\n' "$out" | grep -m1 -E 'npm error (code|errno|request)' || true)
      skip "npm unreachable: ${why:-npm ping failed or timed out after 30 s}"
    fi
    log="$dir/npm-install.log"
    if ! PUPPETEER_SKIP_DOWNLOAD=1 timeout 300 npm install --prefix "$dir" --no-audit --no-fund \
      --ignore-scripts "puppeteer-core@$PUPPETEER_VERSION" >"$log" 2>&1; then
      net=$(grep -m1 -iE 'ENOTFOUND|ETIMEDOUT|ECONNREFUSED|ECONNRESET|EAI_AGAIN|network' "$log")
      [ -n "$net" ] && skip "npm unreachable: $net"
      tail -5 "$log" >&2
      fail "npm install puppeteer-core@$PUPPETEER_VERSION failed (see $log)"
    fi
    installed || fail "npm install did not leave puppeteer-core $PUPPETEER_VERSION in $dir/node_modules"
  fi
  exec 9>&-
fi

# 2. The sessions.
rm -rf "$work/artifacts" "$work"/*.db* "$work"/*.html "$work"/*.json "$work"/*.jsonl "$work"/*.err
mkdir -p "$work/artifacts"
# run NAME CMD...: runs a recap command, its stderr to WORKDIR/NAME.err, failing with it shown.
run() {
  local name=$1
  shift
  local rc=0
  "$@" 2>"$work/$name.err" || rc=$?
  [ "$rc" = 0 ] || { tail -n 20 "$work/$name.err" >&2; fail "$name: ${*:1:2} ... exited $rc"; }
}
db=$work/real.db
run real-import "$recap" import --format claude-code --session real --db "$db" \
  "$data/Users-dain-workspace-claude-code-log-sample__37f83ec9-f2ea-42a9-925e-0d5c105cb6e8.jsonl" >/dev/null
run real-compact1 "$recap" compact --session real --db "$db" --json >"$work/real.compact1.jsonl"
hostile=$(python3 -c 'import json, sys; sys.path.insert(0, sys.argv[1]); import gen_session; print(json.dumps(gen_session.HOSTILE))' "$here") ||
  fail "cannot read gen_session.HOSTILE"
python3 - "$hostile" >"$work/real.turn.json" <<'EOF' || fail "cannot write the appended turn"
import json, sys
h = json.loads(sys.argv[1])
print(json.dumps([
    {"role": "user", "content": "Check how the page shows these: " + " ".join(h)},
    {"role": "assistant", "content": "Reading the test data.", "tool_calls": [
        {"id": "call_hostile", "type": "function",
         "function": {"name": "Read", "arguments": json.dumps({"path": h[1]})}}]},
    {"role": "tool", "tool_call_id": "call_hostile", "content": "\n".join(h)},
    {"role": "assistant", "content": "They are shown as text:\n" + "\n".join(h)},
]))
EOF
run real-append "$recap" append --session real --db "$db" --format openai-chat "$work/real.turn.json" >/dev/null
run real-compact2 "$recap" compact --session real --db "$db" --json >"$work/real.compact2.jsonl"
# The events: the JSON lines `compact --json` printed, without its closing result object.
python3 - "$work/real.compact1.jsonl" "$work/real.compact2.jsonl" >"$work/real.events.jsonl" <<'EOF' ||
import json, sys
for f in sys.argv[1:]:
    for line in open(f):
        e = json.loads(line)
        if e.get("type") != "result" and "session" in e:
            print(json.dumps(e))
EOF
  fail "cannot gather the events"
grep -q '"compaction_completed"' "$work/real.events.jsonl" || fail "recap compact --json printed no compaction_completed event"

gdb=$work/generated.db
python3 "$here/gen_session.py" "$work/generated" --messages 20000 --chunks 4 >"$work/generated.meta.json" ||
  fail "gen_session.py failed"
for k in 0 1 2 3; do
  run gen-append$k "$recap" append --session generated --db "$gdb" --format recap "$work/generated.$k.json" >/dev/null
  run gen-compact$k "$recap" compact --session generated --db "$gdb" --json >/dev/null
done

# 3. The pages, and what they must show.
for s in real generated; do
  sdb=$work/$s.db
  events=()
  [ "$s" = real ] && events=(--events "$work/real.events.jsonl")
  run "$s-report" "$recap" report --session "$s" --db "$sdb" "${events[@]}" -o "$work/$s.html"
  echo "run_browser: $(cat "$work/$s-report.err")"
  run "$s-export" "$recap" export --session "$s" --db "$sdb" --format recap --history --json >"$work/$s.history.json"
  python3 "$here/expect.py" "$work/$s.history.json" ${events[1]:+"${events[1]}"} --hostile "$hostile" \
    >"$work/$s.expect.json" || fail "expect.py failed on $s"
done

# 4. The browser.
node "$here/browser_test.mjs" --npm "$dir" --chromium "$chromium" --artifacts "$work/artifacts" \
  "real=$work/real.html,$work/real.expect.json" \
  "generated=$work/generated.html,$work/generated.expect.json" &
pids+=($!)
wait $! || fail "browser_test.mjs (above)"
pids=()
echo "run_browser: passed; screenshots in $work/artifacts: $(cd "$work/artifacts" && printf '%s ' *.png)"
