#!/usr/bin/env bash
# ctest demo.issue42: scripts/demo.sh, run over this build tree (RECAP_DEMO_BUILD_DIR: it builds
# nothing), shows recap's main job first and says what its sizes count.
#
#   check_demo.sh SOURCE_DIR BUILD_DIR
set -uo pipefail
source_dir=$1
build_dir=$2
out=$(mktemp)
trap 'rm -f "$out"' EXIT

fail=0
expect() {  # expect WHAT PATTERN: PATTERN (grep -E) is in the output
  if ! grep -Eq -- "$2" "$out"; then
    echo "FAIL: $1 (no line matches /$2/)"
    fail=1
  fi
}
line_of() { grep -nE -- "$1" "$out" | head -n 1 | cut -d: -f1; }

RECAP_DEMO_BUILD_DIR="$build_dir" bash "$source_dir/scripts/demo.sh" >"$out" 2>&1
rc=$?
if [[ $rc -ne 0 ]]; then
  cat "$out"
  echo "FAIL: scripts/demo.sh exited with $rc"
  exit 1
fi

expect "the replay's table" '^ +request +messages +without recap +sent +what recap did'
expect "an automatic compaction in the table, with its event's figures" \
  '^ +[0-9]+ +[0-9,]+ +[0-9,]+ +[0-9,]+ +compacted \(auto\): [0-9,]+ messages summarized; the event: [0-9,]+ -> [0-9,]+$'
expect "why the sizes differ from the command's" 'count the messages alone: their figures are smaller by those 69,772'
expect "the instructions counted" 'every request \(69,772 chars: system prompt 5,772, tool definitions 64,000\)'
expect "the checkpoint" '^The checkpoint'
expect "the events" '^Events \('
expect "the command's part" '^== 2\. the same job with the recap command'
expect "the compact table" '^\$ recap compact --session claude-code'

# The main job comes first: the replay's table before the command's first step.
table=$(line_of '^ +request +messages +without recap')
command=$(line_of '^== 2\.')
if [[ -z "$table" || -z "$command" || "$table" -ge "$command" ]]; then
  echo "FAIL: the replay (line ${table:-none}) does not come before the command's part (line ${command:-none})"
  fail=1
fi

# Each row's "sent" is at most its "without recap", and below it after the first compaction.
if ! awk '/^ +request +messages +without recap/ {on = 1; next}
          on && $1 !~ /^[0-9]+$/ {exit}
          on { w = $3; s = $4; gsub(",", "", w); gsub(",", "", s);
               if (s + 0 > w + 0) { print "FAIL: request " $1 " sent " s " > " w; bad = 1 }
               if (seen && s + 0 >= w + 0) { print "FAIL: request " $1 " not smaller after a compaction"; bad = 1 }
               if ($5 == "compacted") seen = 1 }
          END { exit bad }' "$out"; then
  fail=1
fi

if [[ $fail -ne 0 ]]; then
  echo "--- scripts/demo.sh printed:"
  cat "$out"
  exit 1
fi
echo "demo: the replay first, $(grep -cE 'compacted \(auto\)' "$out") automatic compactions shown"
