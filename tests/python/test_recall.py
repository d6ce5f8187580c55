"""Getting it back (SPEC R18) from Python: recall, the recall tool and its answers, uncompact."""

import json

import pytest

import recap
from conftest import chat_turns

# No automatic compaction: prepare shows the transcript as it is, and compact() is the only one.
MANUAL = {"compaction": {"keepTurns": 1, "auto": False}}

FACT = [
    {"role": "user", "content": "Deploy with the key ZEBRA-4471."},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "d1", "type": "function",
         "function": {"name": "read", "arguments": "{\"path\": \"config/prod.yaml\"}"}}]},
    {"role": "tool", "tool_call_id": "d1", "content": "region: eu-west-3\nreplicas: 7"},
    {"role": "assistant", "content": "Read it."},
]


@pytest.fixture
def compacted(tmp_path):
    with recap.Compactor(config=MANUAL, store="sqlite:%s" % (tmp_path / "r.db")) as c:
        c.append("s", FACT + chat_turns(5))
        assert c.compact("s")["compacted"] is True
        yield c


def test_recall_by_words_ids_and_turns(compacted):
    assert "eu-west-3" not in compacted.prepare("s").messages_json
    found = compacted.recall("s", "eu-west-3")
    assert "region: eu-west-3" in found["text"]
    [m] = found["messages"]
    assert m["role"] == "tool" and m["state"] == "summarized" and m["turn"] == 1
    assert m["replaced_by"].startswith("compaction:") and m["clipped"] is False
    assert set(m) == {"id", "seq", "turn", "role", "state", "replaced_by", "text", "clipped",
                      "score"}
    assert found["left_out"] == 0 and found["left_out_ids"] == []

    assert [x["id"] for x in compacted.recall("s", ids=m["id"])["messages"]] == [m["id"]]
    assert [x["id"] for x in compacted.recall("s", ids=[m["id"], "nope"])["messages"]] == [m["id"]]
    assert len(compacted.recall("s", turns=1)["messages"]) == 4
    assert len(compacted.recall("s", turns=(1, 1), max_messages=2)["messages"]) == 2
    small = compacted.recall("s", turns=(1, 5), max_chars=300)
    assert small["left_out"] > 0 and len(small["left_out_ids"]) == small["left_out"]
    # The words within the turns only.
    assert compacted.recall("s", "eu-west-3", turns=(2, 3))["messages"] == []
    # Active messages only when asked.
    assert compacted.recall("s", "ZEBRA-4471")["messages"][0]["state"] == "summarized"
    last = chat_turns(5)[-1]["content"].split()[2]  # a word of the kept turn only
    assert compacted.recall("s", last)["messages"] == []
    assert compacted.recall("s", last, include_active=True)["messages"][0]["state"] == "active"


def test_recall_refuses_what_asks_for_nothing_in_python_words(compacted):
    for kwargs, says in [
            ({}, "recall asks for nothing"),
            ({"query": "  "}, "recall asks for nothing"),
            ({"query": 5}, "query must be a str"),
            ({"ids": [1]}, "ids must be strs"),
            ({"ids": 7}, "ids must be a message id"),
            ({"turns": (5, 2)}, "name no turn"),
            ({"turns": 0}, "name no turn"),
            ({"turns": "1-2"}, "turns must be a turn"),
            ({"turns": (1, 2, 3)}, "turns must be a turn"),
            ({"turns": True}, "turns must be a turn"),
            ({"query": "x", "max_chars": 0}, "`max_chars` must be a whole number from 1"),
            ({"query": "x", "max_chars": "many"}, "`max_chars`"),
            ({"query": "x", "max_messages": -1}, "`max_messages`"),
            ({"query": "x", "include_active": 1}, "`include_active` must be true or false")]:
        with pytest.raises(recap.InvalidArgument) as e:
            compacted.recall("s", **kwargs)
        message = str(e.value)
        assert says in message, (kwargs, message)
        assert "recap_recall" not in message and "query_json" not in message, message


def test_recall_tool_in_each_format():
    chat = recap.recall_tool()
    assert chat["type"] == "function" and chat["function"]["name"] == "recap_recall"
    assert "query" in chat["function"]["parameters"]["properties"]
    assert recap.recall_tool("anthropic")["input_schema"]["type"] == "object"
    assert recap.recall_tool("openai-responses")["name"] == "recap_recall"
    assert recap.recall_tool.__module__ == "recap"
    with pytest.raises(recap.InvalidArgument) as e:
        recap.recall_tool("recap")
    assert "recall_tool" in str(e.value) and "recap_recall_tool" not in str(e.value)
    with pytest.raises(recap.InvalidArgument):
        recap.recall_tool("yaml")


def test_answer_recall_in_each_format_then_append(compacted):
    arguments = json.dumps({"query": "eu-west-3"})
    call = {"id": "k1", "type": "function",
            "function": {"name": "recap_recall", "arguments": arguments}}
    compacted.append("s", {"role": "assistant", "content": None, "tool_calls": [call]})
    answer = compacted.answer_recall("s", call)
    assert answer["role"] == "tool" and answer["tool_call_id"] == "k1"
    assert "region: eu-west-3" in answer["content"]
    compacted.append("s", answer)
    assert compacted.prepare("s").messages[-1] == answer

    block = {"type": "tool_use", "id": "k2", "name": "recap_recall",
             "input": {"query": "eu-west-3"}}
    answer = compacted.answer_recall("s", block, format="anthropic")
    assert answer["role"] == "user" and answer["content"][0]["tool_use_id"] == "k2"
    item = {"type": "function_call", "call_id": "k3", "name": "recap_recall",
            "arguments": arguments}
    answer = compacted.answer_recall("s", json.dumps(item), format="openai-responses")
    assert answer["type"] == "function_call_output" and answer["call_id"] == "k3"
    # The plain form in any format; arguments as a dict too.
    for format in recap.FORMATS:
        answer = compacted.answer_recall(
            "s", {"id": "k4", "name": "recap_recall", "arguments": {"ids": ["nope"]}},
            format=format)
        assert "k4" in json.dumps(answer)
    # Arguments the model got wrong: an error result for the model, not an exception.
    answer = compacted.answer_recall("s", {"id": "k5", "name": "recap_recall",
                                           "arguments": "{}"})
    assert "needs `query`" in answer["content"]
    # Another tool's call, or no call at all, is the host's mistake.
    with pytest.raises(recap.InvalidArgument) as e:
        compacted.answer_recall("s", {"id": "x", "name": "ls", "arguments": "{}"})
    assert "answer_recall answers calls of the recall tool (\"recap_recall\")" in str(e.value)
    assert "recap_answer_recall" not in str(e.value)
    with pytest.raises(recap.InvalidArgument) as e:
        compacted.answer_recall("s", [1, 2])
    assert "call must be a JSON object" in str(e.value)


def test_uncompact_takes_back_each_compaction_in_turn(tmp_path):
    events = []
    with recap.Compactor(config=MANUAL, store="sqlite:%s" % (tmp_path / "u.db"),
                         on_event=events.append) as c:
        c.append("s", FACT)
        nothing = c.uncompact("s")
        assert nothing["undone"] is False and nothing["commit"] == ""
        c.append("s", chat_turns(5))
        original = c.prepare("s").messages
        assert c.compact("s")["compacted"] is True
        later = chat_turns(3, tag="later")
        c.append("s", later)
        between = c.prepare("s").messages
        assert c.compact("s")["compacted"] is True

        outcome = c.uncompact("s")
        assert outcome["undone"] is True and outcome["commit"].startswith("compaction:")
        assert outcome["reason"] == "manual" and outcome["restored_messages"] > 0
        assert outcome["after_chars"] > outcome["before_chars"]
        assert set(outcome) == {"undone", "commit", "reason", "restored_messages",
                                "retired_messages", "before_chars", "after_chars", "version"}
        assert c.prepare("s").messages == between
        assert any(e["type"] == "compaction_undone" for e in events)
        assert c.uncompact("s")["undone"] is True
        assert c.prepare("s").messages == original + later
        assert c.uncompact("s")["undone"] is False
        with pytest.raises(recap.InvalidArgument):
            c.uncompact("recap-cli.instructions:s")
