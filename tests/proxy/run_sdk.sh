#!/usr/bin/env bash
# run_sdk.sh [--direct] RECAP_BINARY WORKDIR NPM_DIR: the SDK clients through recap proxy.
#
#  1. npm_deps.sh NPM_DIR (exit 77, ctest's SKIP, when npm or the registry is unavailable);
#  2. starts standin.py (port 0, log WORKDIR/upstream.jsonl) and
#     `RECAP_BINARY proxy --upstream URL --listen 127.0.0.1:0 --db WORKDIR/proxy.db`, waiting
#     at most 20 s for each one's "listening on http://..." line;
#  3. runs sdk/clients.mjs against the proxy (manifest WORKDIR/manifest.json);
#  4. check_log.py on what the upstream received;
#  5. check_sessions.py: the proxy's database holds every conversation, unmixed.
# --direct runs the clients against the stand-in itself (no proxy, no step 5; RECAP_BINARY is
# not used and may be "-"). Everything it started is killed on exit; the whole run is bounded to
# 300 s. Extra arguments, split on spaces, come from STANDIN_ARGS, PROXY_ARGS, CLIENT_ARGS,
# CHECK_LOG_ARGS and CHECK_SESSIONS_ARGS (e.g. PROXY_ARGS="--config c.json"
# CHECK_LOG_ARGS="--expect-summarizer --expect-shrink" CLIENT_ARGS="--file-chars 20000").
# Exit: 0 passed, 1 failed (the reason and the servers' last stderr lines are printed), 2 usage,
# 77 skipped, 124 out of time.
set -u
if [ -z "${RUN_SDK_BOUNDED:-}" ]; then
  RUN_SDK_BOUNDED=1 exec timeout -k 5 300 bash "$0" "$@"
fi
here=$(cd "$(dirname "$0")" && pwd)
direct=0
if [ "${1:-}" = --direct ]; then direct=1; shift; fi
if [ $# -ne 3 ]; then
  echo "usage: run_sdk.sh [--direct] RECAP_BINARY WORKDIR NPM_DIR" >&2
  exit 2
fi
recap=$1 work=$2 npm=$3
mkdir -p "$work" && work=$(cd "$work" && pwd) || exit 1
rm -f "$work"/upstream.jsonl "$work"/proxy.db* "$work"/manifest.json "$work"/*.out "$work"/*.err

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
}
trap cleanup EXIT
trap 'echo "run_sdk: stopped by a signal (the 300 s bound?)" >&2; exit 124' TERM INT
show_logs() {
  for f in standin.err proxy.out proxy.err; do
    [ -s "$work/$f" ] && { echo "--- last lines of $work/$f" >&2; tail -n 30 "$work/$f" >&2; }
  done
}
fail() {
  echo "run_sdk: FAIL: $*" >&2
  show_logs
  exit 1
}

"$here/npm_deps.sh" "$npm" || exit $? # 77: skip
command -v python3 >/dev/null || { echo "python3 missing" >&2; exit 77; }

# wait_url PID FILE...: prints the URL of the first "listening on http://HOST:PORT" in FILEs
wait_url() {
  local pid=$1 i line
  shift
  for ((i = 0; i < 200; i++)); do
    line=$(cat "$@" 2>/dev/null | grep -m1 -oE 'listening on https?://[^ /]+')
    if [ -n "$line" ]; then
      echo "${line#listening on }"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# shellcheck disable=SC2086 # the *_ARGS are lists of words
python3 "$here/standin.py" --log "$work/upstream.jsonl" --port 0 ${STANDIN_ARGS:-} \
  >"$work/standin.out" 2>"$work/standin.err" &
pids+=($!)
upstream=$(wait_url "$!" "$work/standin.out") || fail "the stand-in did not say it was listening within 20 s"
echo "run_sdk: stand-in at $upstream"
base=$upstream
if [ "$direct" = 0 ]; then
  [ -x "$recap" ] || fail "no recap binary at $recap"
  # shellcheck disable=SC2086
  "$recap" proxy --upstream "$upstream" --listen 127.0.0.1:0 --db "$work/proxy.db" ${PROXY_ARGS:-} \
    >"$work/proxy.out" 2>"$work/proxy.err" &
  pids+=($!)
  base=$(wait_url "$!" "$work/proxy.err" "$work/proxy.out") ||
    fail "recap proxy did not say it was listening within 20 s"
  echo "run_sdk: proxy at $base"
fi

# shellcheck disable=SC2086
node "$here/sdk/clients.mjs" "$base" --npm "$npm" --manifest "$work/manifest.json" ${CLIENT_ARGS:-} &
wait $! || fail "the SDK clients failed (above)"
# shellcheck disable=SC2086
python3 "$here/check_log.py" "$work/upstream.jsonl" ${CHECK_LOG_ARGS:-} || fail "check_log.py: the upstream got an invalid request"
if [ "$direct" = 0 ]; then
  # The proxy may still be storing the last reply when the client has it: try for up to 5 s.
  for ((i = 0; i < 10; i++)); do
    # shellcheck disable=SC2086
    out=$(python3 "$here/check_sessions.py" "$recap" "$work/proxy.db" "$work/manifest.json" ${CHECK_SESSIONS_ARGS:-} 2>&1) && break
    sleep 0.5
  done
  echo "$out"
  [ "$i" -lt 10 ] || fail "check_sessions.py: the proxy's sessions do not hold the conversations"
fi
echo "run_sdk: passed$([ "$direct" = 1 ] && echo ' (direct: no proxy, no session checks)')"
