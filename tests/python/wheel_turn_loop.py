"""A host's per-turn loop on recap as the wheel installs it: run by wheel_in_venv.py with the
virtual environment's interpreter, from a copy outside the source and build trees, in an
environment holding only PATH and HOME. Exits non-zero (an assertion) when anything is off.

    venv/bin/python wheel_turn_loop.py VENV VERSION WORK_DIR
"""

import json
import os
import sys

venv, version, work = os.path.realpath(sys.argv[1]), sys.argv[2], os.path.realpath(sys.argv[3])


def inside(path, folder):
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([path, folder]) == folder


# Nothing but the venv can provide recap.
assert "PYTHONPATH" not in os.environ and "RECAP_C_LIBRARY" not in os.environ, os.environ
assert inside(sys.prefix, venv), (sys.prefix, venv)

import recap  # noqa: E402

assert inside(recap.__file__, venv), recap.__file__
assert inside(recap.library_path, venv), recap.library_path
assert os.path.basename(recap.library_path) == "_recap_c.so", recap.library_path
assert recap.__version__ == version, (recap.__version__, version)

MARK = "wheel-summary-from-python"
calls = []


def summarize(request):
    """The host's summarizer: a Python function, no model. Its checkpoint names the call."""
    calls.append(request)
    text = request["messages"][0]["content"]
    checkpoint = {
        "goal": "%s %d" % (MARK, len(calls)),
        "instructions": [],
        "discoveries": ["read %d chars" % len(text)],
        "accomplished": ["answered %d questions" % text.count("Question ")],
        "currentState": "answering",
        "nextSteps": ["answer the next question"],
        "relevantFiles": [],
    }
    return {"text": json.dumps(checkpoint),
            "usage": {"prompt_tokens": len(text) // 4, "completion_tokens": 60}}


def words(tag, turn):
    return " ".join("%s%d-w%d" % (tag, turn, k) for k in range(70))


events = []
window = 2000
config = {"provider": {"contextWindow": window}, "compaction": {"keepTurns": 1}}
store = "sqlite:" + os.path.join(work, "sessions.db")
session = "wheel-session"
compacted_turns = []
with recap.Compactor(config=config, store=store, summarizer=recap.Summarizer(
        summarize, name="python-summarizer"), on_event=events.append) as compactor:
    for turn in range(14):
        compactor.append(session, {"role": "user", "content": "Question %d: %s" % (
            turn, words("q", turn))})
        # Right before the model request: what recap says to send.
        prepared = compactor.prepare(session)
        sent = json.loads(bytes(prepared.messages_bytes))
        assert sent == prepared.messages, turn
        assert sent[-1]["content"].startswith("Question %d:" % turn), sent[-1]
        assert prepared.after_tokens <= window, (turn, prepared.after_tokens)
        if prepared.compactions:
            compacted_turns.append(turn)
            # The checkpoint the host now sends is the one the Python summarizer just wrote.
            assert "%s %d" % (MARK, len(calls)) in prepared.messages_json, (
                len(calls), prepared.messages_json[:400])
        compactor.append(session, {"role": "assistant", "content": "Answer %d: %s" % (
            turn, words("a", turn))})
    # The other components the wheel's library holds: the HTTP summarizers (nothing is
    # connected until a compaction calls it).
    recap.HttpProvider("openai_chat", "http://127.0.0.1:9/v1", "model")

completed = [e for e in events if e["type"] == "compaction_completed"]
failed = [e for e in events if e["type"] == "compaction_failed"]
assert calls and compacted_turns and completed and not failed, (
    len(calls), compacted_turns, [e["type"] for e in events])
assert len(completed) == len(calls), (len(completed), len(calls))
assert all(e["checkpoint"]["writer"] == "python-summarizer" and e["checkpoint"]["structured"]
           for e in completed), completed
assert sum(e["usage"]["completion_tokens"] for e in completed) == 60 * len(calls), completed

# The session is in the SQLite file: a new Compactor reads it back.
with recap.Compactor(config=config, store=store, summarizer=summarize) as again:
    reread = again.prepare(session)
    assert MARK in reread.messages_json and reread.messages[-1]["content"].startswith(
        "Answer 13:"), reread.messages_json[:400]

# The process loaded no other recap library than the venv's.
with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
    loaded = {line.split(None, 5)[5].strip() for line in maps if len(line.split(None, 5)) == 6}
recap_files = sorted(p for p in loaded if "recap" in os.path.basename(p))
assert recap_files and all(inside(p, venv) for p in recap_files), recap_files

print("recap %s from %s" % (recap.__version__, recap.__file__))
print("library %s" % recap.library_path)
print("14 turns; compacted before turns %s by %d calls of the Python summarizer" % (
    ", ".join(str(t + 1) for t in compacted_turns), len(calls)))
