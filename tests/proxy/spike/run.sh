#!/bin/bash
# run.sh NAME PORT "STANDIN-FLAGS" -- command...   (cwd = scratch/NAME/work)
SPIKE=${SPIKE:-$(pwd)}  # the folder the agents are installed in (cc/, codex/, oc/, sdk/)
NAME=$1; PORT=$2; FLAGS=$3; shift 4
S=$SPIKE/scratch/$NAME; mkdir -p $S/home $S/work $S/codexhome logs
echo "The secret word is PINEAPPLE." > $S/work/hello.txt
LOG=$SPIKE/logs/$NAME.jsonl; rm -f $LOG
HELLO_PATH=$S/work/hello.txt python3 $SPIKE/standin.py $PORT $LOG $FLAGS > logs/$NAME.standin.out 2>&1 &
SP=$!; sleep 0.5
cd $S/work; start=$(date +%s.%N)
timeout -k 5 60 env HOME=$S/home "$@" > $SPIKE/logs/$NAME.out 2> $SPIKE/logs/$NAME.err < /dev/null
rc=$?; end=$(date +%s.%N)
kill $SP; wait $SP 2>/dev/null
echo "rc=$rc secs=$(echo "$end - $start" | bc)"
