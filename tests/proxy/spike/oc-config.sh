#!/bin/bash
# oc-config.sh NAME PORT : writes scratch/NAME/home/.config/opencode/opencode.json
SPIKE=${SPIKE:-$(pwd)}  # the folder the agents are installed in (cc/, codex/, oc/, sdk/)
mkdir -p $SPIKE/scratch/$1/home/.config/opencode
cat > $SPIKE/scratch/$1/home/.config/opencode/opencode.json <<JSON
{
  "\$schema": "https://opencode.ai/config.json",
  "autoupdate": false,
  "share": "disabled",
  "provider": {
    "local": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "local",
      "options": { "baseURL": "http://127.0.0.1:$2/v1", "apiKey": "sk-test-123" },
      "models": { "m": { "name": "m" } }
    }
  }
}
JSON
