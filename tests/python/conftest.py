"""Shared helpers of the Python module's tests (tests/python, run by ctest with label
`python`; PYTHONPATH names the build's package)."""

import os

import pytest

import recap

# A window small enough that a few turns fill it, and one turn kept after a checkpoint.
SMALL = {"provider": {"contextWindow": 2000}, "compaction": {"keepTurns": 1}}


def chat_turns(turns, chars=600, tag="t"):
    """`turns` user/assistant exchanges in OpenAI chat form, each message about `chars`
    long and different from the others."""
    messages = []
    for i in range(turns):
        words = " ".join("%s%d-w%d" % (tag, i, k) for k in range(chars // 8))
        messages.append({"role": "user", "content": "Question %d: %s" % (i, words)})
        messages.append({"role": "assistant", "content": "Answer %d: %s" % (i, words)})
    return messages


def checkpoint_text(request):
    """What a summarizer of the tests answers: a checkpoint naming the request's size."""
    content = request["messages"][0]["content"]
    return ('{"goal": "answer the questions", "instructions": [], "discoveries": [], '
            '"accomplished": ["read %d chars"], "currentState": "answered", "nextSteps": [], '
            '"relevantFiles": []}' % len(content))


@pytest.fixture
def data_dir():
    path = os.environ.get("RECAP_TEST_DATA_DIR")
    if not path:
        path = os.path.join(os.path.dirname(__file__), "..", "data")
    return path


@pytest.fixture
def compactor():
    with recap.Compactor() as c:
        yield c
