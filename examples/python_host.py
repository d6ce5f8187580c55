#!/usr/bin/env python3
"""A Python agent host on recap, replaying a real conversation turn by turn.

It reads one run of tau-bench's airline transcripts (tests/data/tau-bench_gpt-4o-airline.json,
OpenAI chat messages) and plays it as the host would have lived it: each message is appended
to the session as it happens, and before each assistant message — where the host would call
its model — prepare() says what to send. The window is made small (--window, in tokens) so
that recap has to compact; the summarizer is a Python function of the host's own, here a few
lines that write a checkpoint from the request without any model or network.

    PYTHONPATH=build/python python3 examples/python_host.py [TRANSCRIPT] [--run N]
        [--window TOKENS] [--store sqlite:PATH]

It prints one line per model turn and, at the end, the compactions. tests/python runs it.
"""

import argparse
import json
import os
import re
import sys

import recap

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TRANSCRIPT = os.path.join(HERE, "..", "tests", "data", "tau-bench_gpt-4o-airline.json")


def summarize(request):
    """The host's summarizer: recap asks for a checkpoint of the conversation in
    request["messages"][0]["content"] (messages as "[role]" and their text); a real host sends
    the request to its model. This one keeps what the user asked, the tools used and where the
    assistant left off, in recap's checkpoint schema (request["json_schema"])."""
    text = request["messages"][0]["content"]
    parts = re.split(r"^\[(user|assistant|tool)\]\n", text, flags=re.M)
    said = [(parts[i], parts[i + 1].strip()) for i in range(1, len(parts) - 1, 2)]
    asked = [words for role, words in said if role == "user"]
    answers = [words for role, words in said
               if role == "assistant" and not words.startswith("[tool call")]
    tools = sorted(set(re.findall(r"^\[tool call [^:\]]+: ([\w.-]+)\]", text, flags=re.M)))
    checkpoint = {
        "goal": asked[0][:300] if asked else "help the user",
        "instructions": [words[:200] for words in asked[1:]],
        "discoveries": [],
        "accomplished": ["used the tools " + ", ".join(tools)] if tools else [],
        "currentState": answers[-1][:400] if answers else "",
        "nextSteps": ["answer the user's last message"],
        "relevantFiles": [],
    }
    return {"text": json.dumps(checkpoint),
            "usage": {"prompt_tokens": len(text) // 4, "completion_tokens": 0}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transcript", nargs="?", default=DEFAULT_TRANSCRIPT)
    parser.add_argument("--run", type=int, default=3, help="which tau-bench run (default 3)")
    parser.add_argument("--window", type=int, default=5000,
                        help="the model's context window in tokens (default 5000)")
    parser.add_argument("--store", default=None, help='e.g. "sqlite:/tmp/host.db"')
    args = parser.parse_args()

    with open(args.transcript, encoding="utf-8") as f:
        messages = json.load(f)[args.run]["traj"]

    events = []
    config = {"provider": {"contextWindow": args.window}, "compaction": {"keepTurns": 1}}
    session = "tau-bench-run-%d" % args.run
    with recap.Compactor(config=config, store=args.store, summarizer=summarize,
                         on_event=events.append) as compactor:
        turn = 0
        largest = 0
        prepared = None
        for message in messages:
            if message["role"] == "assistant":
                # The model's turn: what recap says to send is what the host sends.
                turn += 1
                prepared = compactor.prepare(session)
                largest = max(largest, prepared.after_tokens)
                print("turn %2d: %2d messages, %6d chars (%5d tokens) -> %6d chars "
                      "(%5d tokens)%s" % (
                          turn, len(prepared.messages), prepared.before_chars,
                          prepared.before_tokens, prepared.after_chars, prepared.after_tokens,
                          "  compacted: " + ",".join(prepared.compactions)
                          if prepared.compactions else ""))
            # The assistant's reply, a tool's result, the user's next words: appended as they
            # happen.
            compactor.append(session, message)
        final = compactor.prepare(session)

    completed = [e for e in events if e["type"] == "compaction_completed"]
    failed = [e for e in events if e["type"] == "compaction_failed"]
    print("messages replayed: %d, model turns: %d" % (len(messages), turn))
    for e in completed:
        print("compaction (%s): %d messages summarized, %d -> %d chars, writer %s" % (
            e["reason"], e["summarized"]["messages"], e["before"]["chars"], e["after"]["chars"],
            e["checkpoint"]["writer"]))
    print("compactions: %d, failed: %d" % (len(completed), len(failed)))
    print("final: %d messages, %d tokens of a %d-token window (largest prepared: %d tokens)"
          % (len(final.messages), final.after_tokens, args.window, largest))
    return 0 if completed and not failed and final.after_tokens <= args.window else 1


if __name__ == "__main__":
    sys.exit(main())
