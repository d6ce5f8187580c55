#!/bin/sh
# A chat host's turn loop in the shell, over `recap append` and `recap prepare`: each line of
# standard input is the user's message, sent to an OpenAI chat-completions model with the
# conversation so far (compacted by recap when it grows too large); the model's reply is printed.
# docs/cli.md shows this file; tests/cli/test_cli_loop.cc runs it with a stand-in model.
set -eu
recap=${RECAP:-recap}
session=${SESSION:-demo}
db=${DB:-./recap.db}
config=${CONFIG:-} # recap's JSON configuration (docs/configuration.md), if any
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Reads the messages to send on stdin, prints the model's reply message.
ask_model() {
  jq '{model: "gpt-4o-mini", messages: .}' |
    curl -sS --fail-with-body https://api.openai.com/v1/chat/completions \
      -H "Authorization: Bearer $OPENAI_API_KEY" -H 'Content-Type: application/json' \
      --data-binary @- |
    jq '.choices[0].message'
}
# ASK_MODEL names a command to ask instead (a stand-in, a proxy of your own).
if [ -n "${ASK_MODEL:-}" ]; then ask_model() { "$ASK_MODEL"; }; fi

while IFS= read -r line; do
  # 1. The user's message joins the session (the first append creates it).
  jq -n --arg text "$line" '{role: "user", content: $text}' |
    "$recap" append --session "$session" --format openai-chat --db "$db" - >/dev/null
  # 2. What to send: the session, compacted first when it is over its trigger.
  "$recap" prepare --session "$session" --format openai-chat --db "$db" \
    ${config:+--config "$config"} >"$tmp/request.json"
  # 3. The model's reply joins the session as it came (tool calls and their results, if the
  #    host runs tools, are appended the same way before the next prepare).
  ask_model <"$tmp/request.json" >"$tmp/reply.json"
  "$recap" append --session "$session" --format openai-chat --db "$db" "$tmp/reply.json" \
    >/dev/null
  jq -r '.content // empty' "$tmp/reply.json"
done
