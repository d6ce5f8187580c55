#!/bin/bash
# Re-runs the spike's main cases. Each run: fresh stand-in on its own port, 60 s cap, logs in logs/NAME.jsonl
SPIKE=${SPIKE:-$(pwd)}  # the folder the agents are installed in (cc/, codex/, oc/, sdk/)
cd "$SPIKE"
CLAUDE=$PWD/cc/node_modules/.bin/claude; CODEX=$PWD/codex/node_modules/.bin/codex; OC=$PWD/oc/node_modules/.bin/opencode
CCENV="ANTHROPIC_API_KEY=sk-test-123 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"
OCENV="OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_SHARE=1 OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_DEFAULT_PLUGINS=1 OPENCODE_DISABLE_CLAUDE_CODE=1 npm_config_registry=http://127.0.0.1:9/"

./run.sh cc-tool 18081 "--tools" -- env ANTHROPIC_BASE_URL=http://127.0.0.1:18081 $CCENV $CLAUDE -p "read hello.txt and say what it says" --model m --allowedTools Read
./run.sh codex-tool 18082 "--tools" -- env CODEX_HOME=$PWD/scratch/codex-tool/codexhome OPENAI_API_KEY=sk-test-123 $CODEX exec --skip-git-repo-check \
  -c analytics.enabled=false -c check_for_update_on_startup=false -c 'model_provider="local"' \
  -c 'model_providers.local={name="local",base_url="http://127.0.0.1:18082/v1",wire_api="responses",env_key="OPENAI_API_KEY"}' \
  -m m "read hello.txt and say what it says"
./oc-config.sh oc-tool 18083
./run.sh oc-tool 18083 "--tools" -- env $OCENV $OC run -m local/m "read hello.txt and say what it says"
./run.sh sdk 18084 "" -- node $PWD/sdk/test.mjs 18084
