"""The Python module's per-turn calls, formats, errors, events and stores."""

import json
import os
import shutil
import subprocess
import sys

import pytest

import recap
from conftest import SMALL, chat_turns


def test_library_loads_and_names_its_version():
    assert os.path.exists(recap.library_path)
    assert recap.__version__.count(".") == 2


# --- round trips --------------------------------------------------------------------------

CHAT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": None,
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 2}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "4"},
    {"role": "assistant", "content": "4."},
]

ANTHROPIC = [
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": [
        {"type": "text", "text": "Let me add."},
        {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 2, "b": 2}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "4"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "4."}]},
]

RESPONSES = [
    {"role": "user", "content": "What is 2+2?"},
    {"type": "function_call", "call_id": "call_1", "name": "add",
     "arguments": "{\"a\": 2, \"b\": 2}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "4"},
    {"type": "message", "role": "assistant",
     "content": [{"type": "output_text", "text": "4.", "annotations": []}]},
]


def test_openai_chat_round_trip(compactor):
    version = compactor.append("s", CHAT[:2])
    assert compactor.append("s", CHAT[2]) > version
    compactor.append("s", json.dumps(CHAT[3:]))  # JSON text is taken as it is
    prepared = compactor.prepare("s")
    assert prepared.messages == CHAT
    assert json.loads(prepared.messages_json) == CHAT
    # The fast path: the same JSON as UTF-8 bytes, for a request body, read in place (a
    # read-only memoryview: bytes-like, no .decode).
    assert isinstance(prepared.messages_bytes, memoryview)
    assert prepared.messages_bytes.readonly
    assert bytes(prepared.messages_bytes).decode("utf-8") == prepared.messages_json
    assert b"{" + prepared.messages_bytes + b"}" == b"{%s}" % prepared.messages_bytes
    assert prepared.system is None
    assert prepared.compactions == []
    assert prepared.after_chars == prepared.before_chars > 0
    assert prepared.version == compactor.append("s", {"role": "user", "content": "x"}) - 1


def test_anthropic_round_trip_and_system(compactor):
    compactor.append("s", ANTHROPIC, format="anthropic")
    prepared = compactor.prepare("s", format="anthropic")
    assert prepared.messages == ANTHROPIC
    assert prepared.system is None
    # A leading system message comes out as `system`, outside the messages.
    compactor.append("t", {"role": "system", "content": "Be \"brief\"\\ please."})
    compactor.append("t", ANTHROPIC, format="anthropic")
    prepared = compactor.prepare("t", format="anthropic")
    assert prepared.system == "Be \"brief\"\\ please."
    assert prepared.messages == ANTHROPIC
    assert prepared.version > 0 and "version" in prepared.figures


def test_openai_responses_round_trip(compactor):
    compactor.append("s", RESPONSES, format="openai-responses")
    items = compactor.prepare("s", format="openai-responses").messages
    assert [i.get("type", "message") for i in items] == [
        "message", "function_call", "function_call_output", "message"]
    assert items[1]["call_id"] == "call_1" and items[2]["output"] == "4"
    assert items[3]["content"][0]["text"] == "4."


def test_recap_format_and_across_formats(compactor):
    compactor.append("s", CHAT)
    native = compactor.prepare("s", format="recap").messages
    assert [m["role"] for m in native] == ["system", "user", "assistant", "tool", "assistant"]
    compactor.append("copy", native, format="recap")
    assert compactor.prepare("copy").messages == CHAT
    # Appended in chat form, prepared for Anthropic: the tool result is a user block.
    anthropic = compactor.prepare("s", format="anthropic")
    assert anthropic.system == "You are terse."
    assert anthropic.messages[2]["content"][0]["type"] == "tool_result"


def test_every_figure_is_an_attribute(compactor):
    compactor.append("s", CHAT)
    prepared = compactor.prepare("s", instructions_chars=100, tool_catalog_chars=50,
                                 context_window=128000)
    for name in ("version", "before_chars", "after_chars", "before_tokens", "after_tokens",
                 "compactions", "reduced_messages", "summarized_messages", "summarizer_calls",
                 "summarizer_usage", "cleared_tool_result_messages", "provider_retired_messages",
                 "background_started", "background_swapped", "background_discarded",
                 "background_in_flight", "background_wait_ms", "waited_for_summarizer",
                 "window_tokens", "window_source", "fallback_window_tokens", "trigger_rule"):
        assert getattr(prepared, name) == prepared.figures[name]
    assert prepared.window_tokens == 128000
    assert "version=" in repr(prepared)


def test_plan_compact_recover_and_reports():
    with recap.Compactor(config=SMALL, summarizer="offline") as c:
        c.append("s", chat_turns(8))
        plan = c.plan("s")
        assert plan["trigger"] is True and plan["reason"] == "auto"
        assert plan["cut"]["skip"] == "none"
        outcome = c.compact("s", focus="the questions")
        assert outcome["compacted"] is True and outcome["writer"] == "offline"
        assert outcome["checkpoint"]["goal"]
        assert c.compact("s")["compacted"] is False  # nothing left to summarize
        # A call without a result: recovered only when acknowledged.
        c.append("s", {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_9", "type": "function",
             "function": {"name": "deploy", "arguments": "{}"}}]})
        with pytest.raises(recap.FailedPrecondition) as e:
            c.recover("s")
        assert "call_9" in str(e.value)
        recovered = c.recover("s", acknowledge=True)
        assert recovered["recovered"][0]["call_id"] == "call_9"
        c.report_prompt_tokens("s", 1234)
        c.report_overflow("s", rejected_tokens=1500)
        c.report_overflow("s")
        assert "overflow" in c.prepare("s").compactions


# --- errors --------------------------------------------------------------------------------


def test_bad_format_is_invalid_argument(compactor):
    with pytest.raises(recap.InvalidArgument) as e:
        compactor.append("s", CHAT, format="xml")
    assert e.value.code == "invalid_argument" and e.value.number == 1
    assert 'unknown format "xml"' in str(e.value)
    assert isinstance(e.value, recap.Error) and isinstance(e.value, ValueError)
    with pytest.raises(recap.InvalidArgument, match="unknown format"):
        compactor.prepare("s", format="openai")


def test_bad_message_names_its_json_path(compactor):
    compactor.append("s", CHAT[:2])
    bad = [{"role": "user", "content": "fine"}, {"role": "robot", "content": "x"}]
    with pytest.raises(recap.InvalidArgument) as e:
        compactor.append("s", bad)
    message = str(e.value)
    assert "`messages[1].role` is \"robot\"" in message, message
    assert "nothing was appended" in message
    assert compactor.prepare("s").messages == CHAT[:2]  # all or nothing
    with pytest.raises(recap.InvalidArgument):
        compactor.append("s", "[{\"role\": \"user\", \"content\": ")  # JSON cut short


def test_bad_config_key_is_named():
    with pytest.raises(recap.InvalidArgument) as e:
        recap.Compactor(config={"compaction": {"keepturns": 1}})
    assert "compaction.keepturns" in str(e.value)
    assert 'Did you mean "compaction.keepTurns"' in str(e.value)
    with pytest.raises(recap.InvalidArgument):
        recap.Compactor(config="{not json")


def test_context_budget_exceeded():
    config = {"limits": {"maxContextChars": 4000}}
    with recap.Compactor(config=config) as c:
        c.append("s", {"role": "user", "content": "hello"})
        with pytest.raises(recap.ContextBudgetExceeded) as e:
            c.prepare("s", instructions_chars=10000)
        assert e.value.code == "context_budget_exceeded"
        assert len(str(e.value)) > 40  # recap's message, which says what the host can do


def test_arguments_python_checks(compactor):
    with pytest.raises(recap.InvalidArgument, match="NUL"):
        compactor.append("a\0b", CHAT)
    with pytest.raises(recap.InvalidArgument, match="must be a str"):
        compactor.append(42, CHAT)
    with pytest.raises(recap.InvalidArgument, match="JSON-serializable"):
        compactor.append("s", {"role": "user", "content": object()})
    with pytest.raises(recap.InvalidArgument, match="JSON-serializable"):
        compactor.append("s", {"role": "user", "content": float("nan")})
    with pytest.raises(recap.InvalidArgument, match="whole number"):
        compactor.prepare("s", instructions_chars=-1)
    with pytest.raises(recap.InvalidArgument, match="whole number"):
        compactor.prepare("s", tool_catalog_chars=1.5)
    with pytest.raises(recap.InvalidArgument, match="no summarizer"):
        recap.Compactor(summarizer="gpt")
    with pytest.raises(recap.InvalidArgument, match="no kind of store"):
        recap.Compactor(store="redis://localhost")


def test_closed_compactor_refuses_calls():
    c = recap.Compactor()
    c.append("s", CHAT)
    c.close()
    c.close()  # twice is fine
    assert c.closed
    with pytest.raises(recap.FailedPrecondition, match="closed"):
        c.prepare("s")
    with pytest.raises(recap.FailedPrecondition, match="closed"):
        c.append("s", CHAT)


def test_http_provider_checks_options_and_hides_key():
    try:
        provider = recap.HttpProvider("openai_chat", "http://127.0.0.1:9/v1", "m",
                                      api_key="sk-secret-123", extra_headers={"X-Key": "hdr"})
    except recap.FailedPrecondition:
        pytest.skip("this recap has no HTTP component")
    assert "sk-secret-123" not in repr(provider) and "hdr" not in repr(provider)
    with pytest.raises(recap.InvalidArgument, match="unknown option"):
        recap.HttpProvider("openai_chat", "http://127.0.0.1:9/v1", "m", api_kee="x")
    with pytest.raises(recap.InvalidArgument) as e:
        recap.HttpProvider("smoke_signals", "http://127.0.0.1:9/v1", "m", api_key="sk-secret-123")
    assert "sk-secret-123" not in str(e.value)
    # A compactor with it: the summarizer is not reached here (nothing to compact).
    with recap.Compactor(summarizer=provider) as c:
        c.append("s", CHAT)
        assert c.prepare("s").messages == CHAT


# --- events and stores ----------------------------------------------------------------------


def test_events_go_to_the_callable():
    events = []
    with recap.Compactor(config=SMALL, summarizer="offline", on_event=events.append) as c:
        c.append("s", chat_turns(8))
        prepared = c.prepare("s")
    assert prepared.compactions == ["auto"]
    types = [e["type"] for e in events]
    assert "compaction_started" in types and "compaction_completed" in types
    completed = events[types.index("compaction_completed")]
    assert completed["session"] == "s" and completed["checkpoint"]["writer"] == "offline"


def test_an_event_callable_that_raises_is_logged_not_fatal(caplog):
    def explode(event):
        raise RuntimeError("sink down")

    with recap.Compactor(config=SMALL, summarizer="offline", on_event=explode) as c:
        c.append("s", chat_turns(8))
        assert c.prepare("s").compactions == ["auto"]
    assert any("event callable raised" in r.getMessage() for r in caplog.records)


def test_sqlite_store_reopened_by_a_second_compactor(tmp_path):
    where = "sqlite:" + str(tmp_path / "sessions.db")
    try:
        first = recap.Compactor(store=where)
    except recap.FailedPrecondition:
        pytest.skip("this recap has no SQLite component")
    with first:
        first.append("s", CHAT)
        version = first.prepare("s").version
    assert (tmp_path / "sessions.db").exists()
    with recap.Compactor(store=where) as second:
        prepared = second.prepare("s")
        assert prepared.messages == CHAT and prepared.version == version


def test_library_exports_only_the_c_api():
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not found")
    table = subprocess.run([nm, "-D", "--defined-only", recap.library_path],
                           capture_output=True, text=True, check=True).stdout
    names = [line.split()[-1] for line in table.splitlines() if line.strip()]
    assert "recap_prepare" in names and "recap_reply_text" in names
    assert "recap_prepare_to" in names and "recap_buffer_messages" in names
    leaks = [n for n in names if not n.startswith("recap_") and n not in ("_init", "_fini")]
    assert leaks == []


def test_the_installed_package_works_on_its_own(tmp_path):
    build, cmake = os.environ.get("RECAP_BUILD_DIR"), os.environ.get("RECAP_CMAKE")
    if not build or not cmake:
        pytest.skip("run by ctest, which names the build tree")
    subprocess.run([cmake, "--install", build, "--component", "python", "--prefix",
                    str(tmp_path)], check=True, capture_output=True)
    installed = [p for p in tmp_path.rglob("__init__.py") if p.parent.name == "recap"]
    assert len(installed) == 1
    package_dir = installed[0].parent
    assert (package_dir / "_recap_c.so").exists()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RECAP_C_LIBRARY")}
    env["PYTHONPATH"] = str(package_dir.parent)
    script = ("import recap; c = recap.Compactor(); "
              "c.append('s', {'role': 'user', 'content': 'hi'}); "
              "print(recap.library_path); print(c.prepare('s').messages_json)")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, check=True, cwd=str(tmp_path))
    path, messages = done.stdout.splitlines()
    assert path.startswith(str(tmp_path)) and messages == '[{"role":"user","content":"hi"}]'


def _import_error_of(package_dir, tmp_path):
    """What `import recap` says from a copy of the package at package_dir."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RECAP_C_LIBRARY")}
    env["PYTHONPATH"] = str(package_dir.parent)
    done = subprocess.run([sys.executable, "-c", "import recap"], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True)
    assert done.returncode == 1, (done.returncode, done.stderr)  # no crash: an ImportError
    return done.stderr.strip().splitlines()[-1]


def test_a_library_that_does_not_load_says_why(tmp_path):
    # A copy of the package whose _recap_c.so is, in turn: cut short (which the loader would
    # map and the process die of at its first call), not a library, and one that needs a
    # system library the machine lacks (its NEEDED entry renamed in place).
    package = tmp_path / "copy" / "recap"
    shutil.copytree(os.path.dirname(recap.__file__), str(package),
                    ignore=shutil.ignore_patterns("__pycache__"))
    library = package / "_recap_c.so"
    whole = library.read_bytes()

    library.write_bytes(whole[:len(whole) // 3])
    said = _import_error_of(package, tmp_path)
    assert said.startswith("ImportError: recap: its C library ") and "is cut short" in said

    library.write_bytes(b"not a shared library\n")
    said = _import_error_of(package, tmp_path)
    assert "does not load" in said and "damaged or was built for another machine" in said

    assert whole.count(b"\0libstdc++.so.6\0") == 1
    library.write_bytes(whole.replace(b"\0libstdc++.so.6\0", b"\0libstdc+x.so.6\0"))
    said = _import_error_of(package, tmp_path)
    assert ("It needs the system library libstdc+x.so.6, which is not installed" in said
            and "`ldd %s`" % library in said), said


def test_messages_json_is_cut_out_whatever_the_text_holds(compactor):
    # Texts that look like the members around the messages must not mislead the cut.
    tricky = ['],"system":"x","version":1}', ',"version":', '"\\\\', '\\"],"system":"',
              'h\u00e9llo \u2603 \U0001F600']
    compactor.append("s", {"role": "system", "content": tricky[0] + tricky[3]})
    for text in tricky:
        compactor.append("s", [{"role": "user", "content": text},
                               {"role": "assistant", "content": text}])
    chat = compactor.prepare("s")
    assert [m["content"] for m in chat.messages][1:] == [t for t in tricky for _ in (0, 1)]
    anthropic = compactor.prepare("s", format="anthropic")
    assert anthropic.system == tricky[0] + tricky[3]
    assert [m["content"] for m in anthropic.messages] == [t for t in tricky for _ in (0, 1)]
    assert anthropic.figures["version"] == chat.version
    assert json.loads(bytes(anthropic.messages_bytes)) == anthropic.messages


def test_prepared_says_when_the_request_is_over_the_known_window():
    # Issue 35 (8): the host learns that what it is about to send exceeds the model's window.
    with recap.Compactor(config={"provider": {"contextWindow": 8000}}) as c:
        c.append("s", [{"role": "user", "content": "hello"}])
        assert c.prepare("s", tool_catalog_chars=40000).over_window is True
        assert c.prepare("s", tool_catalog_chars=4000).over_window is False


def test_prepared_names_a_tool_result_sent_without_its_call():
    # Issue 35's rough edge: the model API refuses such a request; the host is told which.
    with recap.Compactor() as c:
        c.append("s", [{"role": "user", "content": "hello"},
                       {"role": "tool", "tool_call_id": "call_never", "content": "out"}])
        assert c.prepare("s").orphan_results == ["call_never"]
        c.append("t", [{"role": "user", "content": "hello"}])
        assert c.prepare("t").orphan_results == []


def test_the_command_lines_reserved_sessions_and_non_utf8_ids_are_refused():
    # Issue 35 (6): Python could append to the instructions the command line keeps for
    # session "victim", and `recap prepare --session victim` sent them.
    with recap.Compactor() as c:
        for session in ("recap-cli.instructions:victim", "recap-cli.x"):
            with pytest.raises(recap.InvalidArgument, match="reserved"):
                c.append(session, [{"role": "system", "content": "exfiltrate"}])
        c.append("recap-cli-x", [{"role": "user", "content": "anyone's name"}])


def test_errors_speak_python_not_the_c_api():
    # Issue 35's rough edge: messages named C functions ("recap_append: …").
    with recap.Compactor() as c:
        for call in (lambda: c.append("s", "[not json"), lambda: c.append("s", []),
                     lambda: c.prepare("s", format="nope")):
            with pytest.raises(recap.Error) as e:
                call()
            assert "recap_" not in str(e.value) and "_json`" not in str(e.value), str(e.value)
    with pytest.raises(recap.InvalidArgument) as e:
        recap.Compactor(config={"compaction": {"keepTurns": -1}})
    assert "recap_" not in str(e.value)


def test_prepare_of_a_session_never_written_is_not_found():
    # Issue 35's rough edge: a typo in the session id sent an empty conversation.
    with recap.Compactor() as c:
        with pytest.raises(recap.NotFound, match="append its first messages"):
            c.prepare("nobody")
