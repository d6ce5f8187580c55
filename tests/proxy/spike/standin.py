#!/usr/bin/env python3
"""Stand-in model server for the recap-proxy spike.

Usage: standin.py PORT LOGFILE [--tools] [--minimal]

Logs every request (method, path, headers with secrets redacted, body, and a
short "shape" summary) as one JSON line to LOGFILE, and answers:
  POST /v1/messages               Anthropic Messages (SSE or JSON)
  POST /v1/messages/count_tokens  {"input_tokens": N}
  POST /v1/chat/completions       OpenAI Chat Completions (SSE or JSON)
  POST /v1/responses              OpenAI Responses (SSE or JSON)
  GET  /v1/models                 OpenAI or Anthropic style list
(the same paths without the /v1 prefix are accepted too, and logged as such).

--tools   : if the request offers tools and contains no tool result yet,
            answer with a tool call (read hello.txt / run `cat hello.txt`);
            once a tool result is present, answer with text.
--truncate: omit the terminal stream event (message_stop / data: [DONE] /
            response.completed) to see how clients react.
--completed-only: Responses streams carry only response.completed (with output).
--minimal : drop optional stream events (Responses: no created/added/deltas;
            Chat: no role chunk / usage chunk; Anthropic: no ping).
"""
import json, sys, time, threading, gzip, itertools, os
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler

PORT = int(sys.argv[1])
LOG = sys.argv[2]
TOOLS = "--tools" in sys.argv
MINIMAL = "--minimal" in sys.argv
TRUNCATE = "--truncate" in sys.argv
COMPLETED_ONLY = "--completed-only" in sys.argv  # Responses: send only response.completed  # omit the terminal event (message_stop / [DONE] / response.completed)
HELLO = os.environ.get("HELLO_PATH", "hello.txt")
TEXT = "Hello from the stand-in."
_lock = threading.Lock()
_ids = itertools.count(1)

SECRET_WORDS = ("authorization", "key", "token", "secret", "cookie", "auth")


def redact(headers):
    out = {}
    for k, v in headers.items():
        if any(w in k.lower() for w in SECRET_WORDS):
            scheme = v.split(" ", 1)[0] + " " if " " in v else ""
            v = scheme + "<redacted>"  # keep "Bearer " so the auth scheme is visible
        out[k] = v
    return out


def tool_list(body):
    """[(name, parameters-schema, kind)] across the three API shapes."""
    res = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if "function" in t and isinstance(t["function"], dict):  # chat completions
            f = t["function"]
            res.append((f.get("name"), f.get("parameters") or {}, "chat"))
        elif "input_schema" in t:  # anthropic
            res.append((t.get("name"), t.get("input_schema") or {}, "anthropic"))
        else:  # responses: {type:function,name,parameters} or other types
            res.append((t.get("name") or t.get("type"), t.get("parameters") or {}, t.get("type")))
    return res


def has_tool_result(body):
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "tool":
            return True
        c = m.get("content")
        if isinstance(c, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in c):
            return True
    inp = body.get("input")
    if isinstance(inp, list):
        for it in inp:
            if isinstance(it, dict) and str(it.get("type", "")).endswith("_output"):
                return True
    return False


def pick_tool(body):
    """Choose a tool and arguments that read hello.txt, or None."""
    tools = tool_list(body)
    by = {n: (p, k) for n, p, k in tools if n}
    for name in ("Read", "read", "read_file"):
        if name in by:
            props = (by[name][0] or {}).get("properties", {})
            key = next((k for k in ("file_path", "filePath", "path") if k in props), "file_path")
            return name, {key: HELLO}
    for name in ("shell", "shell_command", "exec_command", "bash", "Bash", "local_shell"):
        if name in by:
            props = (by[name][0] or {}).get("properties", {})
            if "cmd" in props:
                return name, {"cmd": "cat hello.txt"}
            c = props.get("command", {})
            if c.get("type") == "array":
                return name, {"command": ["bash", "-lc", "cat hello.txt"]}
            return name, {"command": "cat hello.txt"}
    return None


def summarize(path, body):
    if not isinstance(body, dict):
        return None
    s = {"top_keys": sorted(body.keys()), "stream": body.get("stream"), "model": body.get("model")}
    if "messages" in body:
        s["n_messages"] = len(body["messages"])
        s["roles"] = [m.get("role") for m in body["messages"] if isinstance(m, dict)]
    if "input" in body:
        inp = body["input"]
        s["n_input_items"] = len(inp) if isinstance(inp, list) else "str"
        if isinstance(inp, list):
            s["input_types"] = [(i.get("type"), i.get("role")) for i in inp if isinstance(i, dict)]
    sysp = body.get("system")
    if sysp is None and isinstance(body.get("messages"), list):
        sysp = [m.get("content") for m in body["messages"] if isinstance(m, dict) and m.get("role") in ("system", "developer")]
    if sysp is not None:
        s["system_chars"] = len(json.dumps(sysp))
    if "instructions" in body:
        s["instructions_chars"] = len(body.get("instructions") or "")
    s["tools"] = [n for n, _, _ in tool_list(body)]
    s["has_tool_result"] = has_tool_result(body)
    return s


def sse(handler, event, data):
    chunk = ""
    if event:
        chunk += f"event: {event}\n"
    chunk += "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"
    handler.wfile.write(chunk.encode())
    handler.wfile.flush()


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def read_body(self):
        raw = b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                ln = int(self.rfile.readline().strip().split(b";")[0], 16)
                if ln == 0:
                    self.rfile.readline()
                    break
                raw += self.rfile.read(ln)
                self.rfile.readline()
        else:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
        enc = self.headers.get("Content-Encoding", "").lower()
        if enc == "gzip":
            raw = gzip.decompress(raw)
        elif enc == "zstd":
            try:
                import zstandard
                raw = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
            except Exception:
                return raw, None
        try:
            return raw, json.loads(raw) if raw else None
        except Exception:
            return raw, None

    def handle_any(self):
        raw, body = self.read_body()
        p = self.path.split("?")[0]
        norm = p[3:] if p.startswith("/v1/") else p
        rec = {"t": time.strftime("%H:%M:%S"), "method": self.command, "path": self.path,
               "headers": redact(self.headers), "body_bytes": len(raw),
               "shape": summarize(p, body),
               "body": body if body is not None else raw[:2000].decode("utf-8", "replace")}
        reply = None
        try:
            if self.command == "POST" and norm == "/messages":
                reply = self.anthropic(body or {})
            elif self.command == "POST" and norm == "/messages/count_tokens":
                reply = self.json(200, {"input_tokens": max(1, len(raw) // 4)})
            elif self.command == "POST" and norm == "/chat/completions":
                reply = self.chat(body or {})
            elif self.command == "POST" and norm == "/responses":
                reply = self.responses_api(body or {})
            elif self.command == "GET" and norm == "/models":
                if "anthropic-version" in self.headers:
                    reply = self.json(200, {"data": [{"type": "model", "id": "m", "display_name": "m",
                                                      "created_at": "2025-01-01T00:00:00Z"}],
                                            "has_more": False, "first_id": "m", "last_id": "m"})
                else:
                    reply = self.json(200, {"object": "list", "data": [
                        {"id": "m", "object": "model", "created": 0, "owned_by": "standin"}]})
            else:
                reply = self.json(404, {"error": {"type": "not_found", "message": "standin: no route " + self.path}})
        except (BrokenPipeError, ConnectionResetError) as e:
            reply = "client closed: %r" % e
        rec["reply"] = reply
        with _lock, open(LOG, "a") as f:
            f.write(json.dumps(rec) + "\n")

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = handle_any

    def json(self, code, obj):
        b = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
        return {"status": code, "json": obj}

    def start_sse(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def decide(self, body):
        if TOOLS and not has_tool_result(body):
            return pick_tool(body)
        return None

    # ---------------- Anthropic ----------------
    def anthropic(self, body):
        n = next(_ids)
        tool = self.decide(body)
        model = body.get("model", "m")
        mid = f"msg_standin_{n}"
        if tool:
            name, args = tool
            content = [{"type": "tool_use", "id": f"toolu_standin_{n}", "name": name, "input": args}]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": TEXT}]
            stop = "end_turn"
        usage = {"input_tokens": 10, "output_tokens": 5}
        if not body.get("stream"):
            return self.json(200, {"id": mid, "type": "message", "role": "assistant", "model": model,
                                   "content": content, "stop_reason": stop, "stop_sequence": None,
                                   "usage": usage})
        self.start_sse()
        ev = []
        def e(name, data):
            data = dict(type=name, **data)
            sse(self, name, data)
            ev.append(name)
        e("message_start", {"message": {"id": mid, "type": "message", "role": "assistant", "model": model,
                                        "content": [], "stop_reason": None, "stop_sequence": None,
                                        "usage": {"input_tokens": 10, "output_tokens": 1}}})
        if not MINIMAL:
            e("ping", {})
        c = content[0]
        if c["type"] == "text":
            e("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
            e("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": TEXT}})
        else:
            e("content_block_start", {"index": 0, "content_block": {"type": "tool_use", "id": c["id"],
                                                                     "name": c["name"], "input": {}}})
            e("content_block_delta", {"index": 0, "delta": {"type": "input_json_delta",
                                                             "partial_json": json.dumps(c["input"])}})
        e("content_block_stop", {"index": 0})
        e("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 5}})
        if not TRUNCATE:
            e("message_stop", {})
        return {"status": 200, "sse": ev, "content": content}

    # ---------------- Chat Completions ----------------
    def chat(self, body):
        n = next(_ids)
        tool = self.decide(body)
        model = body.get("model", "m")
        cid = f"chatcmpl-standin-{n}"
        created = int(time.time())
        if not body.get("stream"):
            msg = {"role": "assistant", "content": None if tool else TEXT}
            if tool:
                msg["tool_calls"] = [{"id": f"call_standin_{n}", "type": "function",
                                      "function": {"name": tool[0], "arguments": json.dumps(tool[1])}}]
            return self.json(200, {"id": cid, "object": "chat.completion", "created": created, "model": model,
                                   "choices": [{"index": 0, "message": msg,
                                                "finish_reason": "tool_calls" if tool else "stop"}],
                                   "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
        self.start_sse()
        sent = []
        def ch(delta, finish=None, usage=None):
            obj = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                   "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if usage:
                obj["usage"] = usage
            sse(self, None, obj)
            sent.append({"delta": delta, "finish": finish, "usage": bool(usage)})
        if not MINIMAL:
            ch({"role": "assistant", "content": ""})
        if tool:
            ch({"tool_calls": [{"index": 0, "id": f"call_standin_{n}", "type": "function",
                                "function": {"name": tool[0], "arguments": ""}}]})
            ch({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(tool[1])}}]})
            ch({}, "tool_calls")
        else:
            ch({"content": TEXT})
            ch({}, "stop")
        if not MINIMAL:
            ch(None, usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
        if not TRUNCATE:
            sse(self, None, "[DONE]")
            sent.append("[DONE]")
        return {"status": 200, "sse": sent}

    # ---------------- Responses ----------------
    def responses_api(self, body):
        n = next(_ids)
        tool = self.decide(body)
        model = body.get("model", "m")
        rid = f"resp_standin_{n}"
        created = int(time.time())
        if tool:
            item = {"type": "function_call", "id": f"fc_standin_{n}", "call_id": f"call_standin_{n}",
                    "name": tool[0], "arguments": json.dumps(tool[1]), "status": "completed"}
        else:
            item = {"type": "message", "id": f"msg_standin_{n}", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": TEXT, "annotations": []}]}
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
        def resp(status, output):
            return {"id": rid, "object": "response", "created_at": created, "status": status, "model": model,
                    "output": output, "usage": usage if status == "completed" else None,
                    "error": None, "incomplete_details": None}
        if not body.get("stream"):
            return self.json(200, resp("completed", [item]))
        self.start_sse()
        seq = itertools.count(0)
        ev = []
        def e(name, data):
            data = dict(type=name, sequence_number=next(seq), **data)
            sse(self, name, data)
            ev.append(name)
        if not MINIMAL:
            e("response.created", {"response": resp("in_progress", [])})
            e("response.in_progress", {"response": resp("in_progress", [])})
            added = dict(item, status="in_progress")
            if tool:
                added["arguments"] = ""
            else:
                added["content"] = []
            e("response.output_item.added", {"output_index": 0, "item": added})
            if tool:
                e("response.function_call_arguments.delta", {"item_id": item["id"], "output_index": 0,
                                                             "delta": item["arguments"]})
                e("response.function_call_arguments.done", {"item_id": item["id"], "output_index": 0,
                                                            "arguments": item["arguments"]})
            else:
                part = {"type": "output_text", "text": "", "annotations": []}
                e("response.content_part.added", {"item_id": item["id"], "output_index": 0,
                                                  "content_index": 0, "part": part})
                e("response.output_text.delta", {"item_id": item["id"], "output_index": 0,
                                                 "content_index": 0, "delta": TEXT})
                e("response.output_text.done", {"item_id": item["id"], "output_index": 0,
                                                "content_index": 0, "text": TEXT})
                e("response.content_part.done", {"item_id": item["id"], "output_index": 0,
                                                 "content_index": 0, "part": dict(part, text=TEXT)})
        if not COMPLETED_ONLY:
            e("response.output_item.done", {"output_index": 0, "item": item})
        if not TRUNCATE:
            e("response.completed", {"response": resp("completed", [item])})
        return {"status": 200, "sse": ev, "item_type": item["type"]}


if __name__ == "__main__":
    srv = ThreadingHTTPServer(("127.0.0.1", PORT), H)
    srv.daemon_threads = True
    print(f"standin on 127.0.0.1:{PORT} log={LOG} tools={TOOLS} minimal={MINIMAL}", flush=True)
    srv.serve_forever()
