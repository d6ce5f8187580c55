#!/usr/bin/env bash
# run_agent.sh AGENT RECAP_BINARY WORKDIR NPM_DIR: a real agent (claude-code, codex or opencode)
# works through recap proxy on a task long enough to be compacted.
#
#  1. installs the agent into NPM_DIR/AGENT (npm, pinned as in src/proxy/clients.md,
#     --ignore-scripts: the native binary comes as a platform package and is run directly)
#     when missing; exit 77 (ctest's SKIP) when node, npm or the registry is unavailable;
#  2. writes WORKDIR/project/part1.txt .. partN.txt (about 10 KB each, each with a marker line)
#     and starts standin.py --tool-rounds N (port 0, log WORKDIR/upstream.jsonl) and
#     `RECAP_BINARY proxy --listen 127.0.0.1:0 --db WORKDIR/proxy.db --config WORKDIR/recap.json`,
#     limits.maxContextChars per agent (below) so that the conversation passes its trigger
#     after about four files;
#  3. runs the agent in WORKDIR/project (HOME and config under WORKDIR/home, telemetry, updates
#     and side traffic off, stdin closed, `timeout` 240 s); the stand-in has it read the files
#     one by one with its own tool (Claude Code Read, Codex exec_command, OpenCode read),
#     then answers "answer K: all N files read";
#  4. checks: the agent exited 0 and printed that answer; check_log.py --expect-summarizer
#     --expect-shrink (every request valid, a compaction happened); one proxy session's full
#     history (`recap export --history`) holds every file's marker and the answer; the
#     agent's key is nowhere in the proxy's output or database.
# Everything it started is killed on exit; the whole run is bounded to 300 s. Overrides:
# AGENT_ROUNDS (files to read, default 8), AGENT_MAX_CONTEXT_CHARS (default per agent),
# PROXY_ARGS, STANDIN_ARGS (split on spaces).
# Exit: 0 passed, 1 failed (the reason and the last lines of the logs are printed), 2 usage,
# 77 skipped, 124 out of time.
set -u
if [ -z "${RUN_AGENT_BOUNDED:-}" ]; then
  RUN_AGENT_BOUNDED=1 exec timeout -k 5 300 bash "$0" "$@"
fi
here=$(cd "$(dirname "$0")" && pwd)
proxy_tests=$(dirname "$here")
if [ $# -ne 4 ]; then
  echo "usage: run_agent.sh claude-code|codex|opencode RECAP_BINARY WORKDIR NPM_DIR" >&2
  exit 2
fi
agent=$1 recap=$2 work=$3 npm=$4
# The system prompt and tools each agent sends (about 75 K characters for Claude Code, 38 K for
# Codex, 31 K for OpenCode) count against limits.maxContextChars. Compaction triggers at 0.85 of
# it and starts in the background at 0.7 of that (0.6 of the limit), and leaves the fixed part,
# the checkpoint and the last two rounds (a file each, 10-12 K): each limit puts that well below
# 0.6 of it, so a background compaction starts after about four files and then every few, not
# at every request.
case $agent in
  claude-code) pkg=@anthropic-ai/claude-code version=2.1.197 limit=200000 ;;
  codex) pkg=@openai/codex version=0.171.0 limit=120000 ;;
  opencode) pkg=opencode-ai version=1.18.33 limit=120000 ;;
  *) echo "run_agent: unknown agent '$agent' (claude-code, codex or opencode)" >&2; exit 2 ;;
esac
rounds=${AGENT_ROUNDS:-8}
limit=${AGENT_MAX_CONTEXT_CHARS:-$limit}
mkdir -p "$work" && work=$(cd "$work" && pwd) || exit 1
mkdir -p "$npm" && npm=$(cd "$npm" && pwd) || exit 1
rm -rf "$work"/upstream.jsonl "$work"/proxy.db* "$work"/*.out "$work"/*.err "${work:?}"/project "${work:?}"/home "${work:?}"/tmp

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
}
trap cleanup EXIT
trap 'echo "run_agent: stopped by a signal (the 300 s bound?)" >&2; exit 124' TERM INT
show_logs() {
  for f in agent.out agent.err standin.err proxy.out proxy.err; do
    [ -s "$work/$f" ] && { echo "--- last lines of $work/$f" >&2; tail -n 30 "$work/$f" >&2; }
  done
}
fail() {
  echo "run_agent: FAIL ($agent): $*" >&2
  show_logs
  exit 1
}

# ---- 1. the agent, installed once into NPM_DIR/AGENT
dir=$npm/$agent
native() { # prints the agent's executable when it is installed at the pinned version
  local pj="$dir/node_modules/$pkg/package.json" c
  [ -f "$pj" ] && [ "$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$pj" | head -1)" = "$version" ] || return 1
  case $agent in
    claude-code) set -- "$dir"/node_modules/@anthropic-ai/claude-code-*/claude ;;
    codex) set -- "$dir/node_modules/.bin/codex" ;; # a Node wrapper that finds the platform binary
    opencode) # e.g. opencode-linux-x64, then opencode-linux-x64-baseline (no AVX2 needed)
      local first=() last=()
      for c in "$dir"/node_modules/opencode-*-*/bin/opencode; do
        if [[ $c == *baseline* ]]; then last+=("$c"); else first+=("$c"); fi
      done
      set -- "${first[@]}" "${last[@]}" ;;
  esac
  for c in "$@"; do # the first one this machine can run
    [ -x "$c" ] && timeout 30 "$c" --version 2>/dev/null | grep -qF "$version" && { echo "$c"; return 0; }
  done
  return 1
}
command -v python3 >/dev/null || { echo "python3 missing" >&2; exit 77; }
if ! bin=$(native); then
  command -v node >/dev/null || { echo "node missing: cannot run $agent" >&2; exit 77; }
  command -v npm >/dev/null || { echo "npm missing: cannot install $pkg" >&2; exit 77; }
  mkdir -p "$dir" || exit 1
  exec 9>"$dir/.install.lock"
  command -v flock >/dev/null && flock -w 300 9 # two test runs installing at once
  if ! bin=$(native); then
    if ! out=$(timeout 30 npm ping --fetch-retries=0 --fetch-timeout=15000 2>&1); then
      why=$(printf '%s\n' "$out" | grep -m1 -E 'npm error (code|errno|request)' || true)
      echo "npm unreachable: ${why:-npm ping failed or timed out after 30 s}" >&2
      exit 77
    fi
    [ -f "$dir/package.json" ] || echo '{"private": true}' >"$dir/package.json"
    log=$dir/npm-install.log
    if ! timeout 300 npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts \
      "$pkg@$version" >"$log" 2>&1; then
      net=$(grep -m1 -iE 'ENOTFOUND|ETIMEDOUT|ECONNREFUSED|ECONNRESET|EAI_AGAIN|network' "$log")
      [ -n "$net" ] && { echo "npm unreachable: $net" >&2; exit 77; }
      echo "npm install of $pkg@$version failed (see $log):" >&2
      tail -5 "$log" >&2
      exit 1
    fi
    bin=$(native) || { echo "run_agent: $pkg@$version installed in $dir, but no runnable binary of it" >&2; exit 1; }
  fi
  exec 9>&-
fi
echo "run_agent: $agent $version at $bin"

# ---- 2. the files, the stand-in and the proxy
proj=$work/project home=$work/home
mkdir -p "$proj" "$home" || exit 1
python3 - "$proj" "$rounds" <<'EOF' || fail "could not write the files"
import random, sys
proj, n = sys.argv[1], int(sys.argv[2])
rng = random.Random()
words = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike".split()
for k in range(1, n + 1):
    marker = f"recap-agent-marker part {k} of {n}: {rng.getrandbits(64):016x}"
    lines = [marker] + [f"{k}.{i}: " + " ".join(rng.choice(words) for _ in range(14)) for i in range(1, 121)]
    with open(f"{proj}/part{k}.txt", "w") as f:
        f.write("\n".join(lines + [marker]) + "\n")
    with open(f"{proj}/../markers.txt", "a" if k > 1 else "w") as f:
        f.write(marker + "\n")
EOF
echo "{\"limits\": {\"maxContextChars\": $limit}}" >"$work/recap.json"

wait_url() { # PID FILE...: prints the URL of the first "listening on http://HOST:PORT" in FILEs
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
python3 "$proxy_tests/standin.py" --log "$work/upstream.jsonl" --port 0 --tool-rounds "$rounds" \
  --read-files "$proj/part{}.txt" ${STANDIN_ARGS:-} >"$work/standin.out" 2>"$work/standin.err" &
pids+=($!)
upstream=$(wait_url "$!" "$work/standin.out") || fail "the stand-in did not say it was listening within 20 s"
[ -x "$recap" ] || fail "no recap binary at $recap"
# shellcheck disable=SC2086
"$recap" proxy --upstream "$upstream" --listen 127.0.0.1:0 --db "$work/proxy.db" \
  --config "$work/recap.json" ${PROXY_ARGS:-} >"$work/proxy.out" 2>"$work/proxy.err" &
pids+=($!)
base=$(wait_url "$!" "$work/proxy.err" "$work/proxy.out") || fail "recap proxy did not say it was listening within 20 s"
echo "run_agent: stand-in at $upstream, proxy at $base, maxContextChars $limit, $rounds files"

# ---- 3. the agent
key="sk-recap-agent-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
prompt="Read the files part1.txt to part$rounds.txt in this folder, one at a time and in order, then say that you are done."
common=(env -i PATH="$PATH" HOME="$home" USER="${USER:-tester}" LANG=C.UTF-8 TERM=dumb
  XDG_CONFIG_HOME="$home/.config" XDG_DATA_HOME="$home/.local/share" XDG_STATE_HOME="$home/.local/state"
  XDG_CACHE_HOME="$home/.cache" TMPDIR="$work/tmp" npm_config_registry=http://127.0.0.1:9/
  NO_UPDATE_NOTIFIER=1 DO_NOT_TRACK=1)
mkdir -p "$work/tmp"
case $agent in
  claude-code)
    cmd=("${common[@]}" ANTHROPIC_BASE_URL="$base" ANTHROPIC_API_KEY="$key" DISABLE_TELEMETRY=1
      DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
      "$bin" -p "$prompt" --model m --allowedTools Read) ;;
  codex)
    mkdir -p "$home/codex" # CODEX_HOME must exist
    cmd=("${common[@]}" CODEX_HOME="$home/codex" OPENAI_API_KEY="$key"
      "$bin" exec --skip-git-repo-check -c analytics.enabled=false -c check_for_update_on_startup=false
      -c 'model_provider="recap"'
      -c "model_providers.recap={name=\"recap\",base_url=\"$base/v1\",wire_api=\"responses\",env_key=\"OPENAI_API_KEY\"}"
      -m m "$prompt") ;;
  opencode)
    mkdir -p "$home/.config/opencode"
    cat >"$home/.config/opencode/opencode.json" <<EOF
{ "\$schema": "https://opencode.ai/config.json", "autoupdate": false, "share": "disabled",
  "provider": { "recap": { "npm": "@ai-sdk/openai-compatible", "name": "recap",
      "options": { "baseURL": "$base/v1", "apiKey": "$key" }, "models": { "m": { "name": "m" } } } } }
EOF
    cmd=("${common[@]}" OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_SHARE=1
      OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_DEFAULT_PLUGINS=1
      OPENCODE_DISABLE_CLAUDE_CODE=1 "$bin" run -m recap/m "$prompt") ;;
esac
start=$(date +%s.%N)
(cd "$proj" && exec timeout -k 5 240 "${cmd[@]}") </dev/null >"$work/agent.out" 2>"$work/agent.err" &
wait $!
rc=$?
secs=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
echo "run_agent: $agent exited $rc after $secs s"

# ---- 4. the checks
[ "$rc" = 124 ] && fail "$agent did not finish within 240 s"
[ "$rc" = 0 ] || fail "$agent exited $rc"
grep -qF "all $rounds files read" "$work/agent.out" ||
  fail "$agent did not print the stand-in's final answer (\"all $rounds files read\")"
python3 "$proxy_tests/check_log.py" "$work/upstream.jsonl" --expect-summarizer --expect-shrink ||
  fail "check_log.py: the upstream got an invalid request, or no compaction"
# The proxy may still be storing the last reply when the agent has it: try for up to 5 s.
for ((i = 0; i < 10; i++)); do
  out=$(python3 - "$recap" "$work/proxy.db" "$work/markers.txt" "all $rounds files read" <<'EOF' 2>&1
import json, subprocess, sys
recap, db, markers, answer = sys.argv[1:]
want = [m for m in open(markers).read().splitlines() if m]
def run(*a):
    p = subprocess.run([recap, *a, "--db", db, "--json"], capture_output=True, text=True, timeout=60)
    if p.returncode:
        sys.exit(f"`recap {' '.join(a)}` failed ({p.returncode}): {p.stderr.strip()[:300]}")
    return p.stdout
ids = [s["session"] for s in json.loads(run("sessions", "list")).get("sessions") or []]
best = (-1, None, want + [answer], 0, 0)
for sid in ids:
    doc = json.loads(run("export", "--session", sid, "--format", "recap", "--history"))
    hist = doc.get("history") or []
    text = json.dumps([e for e in hist if not e.get("summary")])
    have = [m for m in want if m in text]
    if answer in text:
        have.append(answer)
    comp = sum(1 for e in hist if e.get("state") == "compacted")
    best = max(best, (len(have), sid, [m for m in want + [answer] if m not in have], len(hist), comp), key=lambda b: b[0])
n, sid, missing = best[0], best[1], best[2]
if missing:
    sys.exit(f"no session's history holds the whole conversation: {sid!r} has {n} of {len(want) + 1} "
             f"(markers, final answer); missing {missing[:3]} ({len(ids)} sessions)")
print(f"session {sid} holds all {len(want)} files' markers and the final answer "
      f"({best[3]} history entries, {best[4]} compacted; {len(ids)} sessions)")
EOF
  ) && break
  sleep 0.5
done
echo "run_agent: $out"
[ "$i" -lt 10 ] || fail "the proxy's sessions: $out"
for f in "$work"/proxy.out "$work"/proxy.err "$work"/proxy.db*; do
  [ -e "$f" ] && grep -aqF "$key" "$f" && fail "the agent's key is in $f"
done
python3 - "$work/upstream.jsonl" "$work/proxy.err" <<'EOF'
import collections, json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
kinds = collections.Counter(r.get("kind") for r in recs)
compacted = sum(1 for l in open(sys.argv[2]) if ", compacted" in l)
print(f"run_agent: upstream got {len(recs)} requests ({dict(kinds)}); proxy lines saying compacted: {compacted}")
EOF
echo "run_agent: passed ($agent, $secs s)"
