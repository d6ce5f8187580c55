#!/usr/bin/env bash
# npm_deps.sh DIR: makes sure DIR/node_modules holds the SDKs that sdk/clients.mjs uses, at the
# pinned versions, installing them (npm install --prefix DIR) only when missing.
# Exit 0: ready. Exit 77 (ctest's SKIP) with one line on stderr when node or npm is missing or
# the registry cannot be reached. Exit 1 when the install itself fails.
# Pins: openai 6.49.0 is the newest 6.x; openai 7 needs Node >= 22 (this machine has Node 20).
set -u
OPENAI_VERSION=6.49.0
ANTHROPIC_VERSION=1.17.0
dir=${1:?usage: npm_deps.sh DIR}

installed() { # NAME VERSION: the package is in DIR at that version
  local pj="$dir/node_modules/$1/package.json"
  [ -f "$pj" ] && [ "$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$pj" | head -1)" = "$2" ]
}
ready() { installed openai "$OPENAI_VERSION" && installed @anthropic-ai/sdk "$ANTHROPIC_VERSION"; }

ready && exit 0
command -v node >/dev/null || { echo "node missing: cannot run the SDK clients" >&2; exit 77; }
command -v npm >/dev/null || { echo "npm missing: cannot install openai and @anthropic-ai/sdk" >&2; exit 77; }
mkdir -p "$dir" || exit 1
exec 9>"$dir/.npm_deps.lock"
command -v flock >/dev/null && flock -w 300 9 # two test runs installing at once
ready && exit 0
if ! out=$(timeout 30 npm ping --fetch-retries=0 --fetch-timeout=15000 2>&1); then
  why=$(printf '%s\n' "$out" | grep -m1 -E 'npm error (code|errno|request)' || true)
  echo "npm unreachable: ${why:-npm ping failed or timed out after 30 s}" >&2
  exit 77
fi
log="$dir/npm-install.log"
if ! timeout 300 npm install --prefix "$dir" --no-audit --no-fund --ignore-scripts \
  "openai@$OPENAI_VERSION" "@anthropic-ai/sdk@$ANTHROPIC_VERSION" >"$log" 2>&1; then
  if grep -qiE 'ENOTFOUND|ETIMEDOUT|ECONNREFUSED|ECONNRESET|EAI_AGAIN|network' "$log"; then
    echo "npm unreachable: $(grep -m1 -iE 'ENOTFOUND|ETIMEDOUT|ECONNREFUSED|ECONNRESET|EAI_AGAIN|network' "$log")" >&2
    exit 77
  fi
  echo "npm install failed (see $log):" >&2
  tail -5 "$log" >&2
  exit 1
fi
ready || { echo "npm install did not leave the pinned versions in $dir/node_modules" >&2; exit 1; }
