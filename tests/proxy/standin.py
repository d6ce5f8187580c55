#!/usr/bin/env python3
"""A scripted model for recap proxy's tests: the upstream the proxy talks to.

Usage: standin.py --log LOG.jsonl [--port 0] [--fault MODE]... [--context-window N]
                  [--no-validate] [--no-auth] [--tls CERT KEY] [--tool-rounds N [--read-files TEMPLATE]]
Prints "listening on http://127.0.0.1:PORT" on stdout once it listens.

Serves, as the real APIs do (streamed with chunked SSE, or one JSON body):
  POST /v1/messages[?beta=true]   Anthropic Messages
  POST /v1/chat/completions       OpenAI chat completions
  POST /v1/responses              OpenAI Responses (keeps stored responses for previous_response_id)
  POST /v1/messages/count_tokens, GET /v1/models[/ID] (one model, with its context_window)
Script: a request that offers tools and whose last message is not a tool result gets a short
text and a call of its first tool (its required properties filled: strings "hello.txt");
otherwise the text "answer N (re: <the last user text>)", N counting model replies.
--tool-rounds N (for real agents): a request that offers a file-reading tool (read/Read with a
path property, else a shell tool such as exec_command: `cat PATH`) gets a call reading
TEMPLATE with {} = K+1 (default "part{}.txt"; give agents an absolute path), where K is the
highest file number the request's tool calls already name, until K = N; then the text
"answer N: all N files read". Counting from the calls the request holds, not from state kept
here, survives compactions that keep the newest round. A request
whose system prompt or instructions is recap's summarizer prompt ("You write checkpoints")
gets a checkpoint as JSON text and is logged as kind "summarizer".
An invalid request (check_log.request_problem: an unpaired tool call, ...) gets a 400, and one
without x-api-key or Authorization a 401, unless --no-validate / --no-auth.

Faults, from --fault or a request's x-standin-fault header (comma-separated), each optionally
scoped "model:" or "summarizer:" (--fault without a scope hits model and summarizer requests;
a header's fault hits the request that carries it):
  status:NNN       answer NNN with the format's error body
  once-status:NNN  the same, for the first request it applies to only
  cut              stop half-way through the reply (stream or body) and close the connection
  slow:MS          sleep MS before each stream event (before a JSON body)
Log: one JSON line per request, written before the reply is sent: {t, method, path, format,
kind (model|summarizer|other), stream, has_credential, credential (sha256 prefix, never the
value), conv (x-standin-conv header), headers (secret-looking values redacted), model,
n_messages, n_context, faults, status, reply, reply_id, reply_output (responses), body}.
"""
import argparse, hashlib, itertools, json, os, re, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_log import request_problem, responses_items  # noqa: E402

SUMMARIZER_MARK = "You write checkpoints"
MODEL_ID = "standin-model"
SECRET = re.compile(r"key|auth|token|secret|cookie|password", re.I)
A_ERR = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
         404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error", 529: "overloaded_error"}
ARGS = None
LOCK = threading.Lock()
ANSWERS = itertools.count(1)
IDS = itertools.count(1)
STORED = {}   # response id -> the items of its context and its output (previous_response_id)
FIRED = set()  # once-status faults already used


def texts(content, kinds=("text", "input_text", "output_text")):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") in kinds)
    return ""


def system_text(fmt, body):
    if fmt == "anthropic":
        return texts(body.get("system"))
    out = [body.get("instructions") or ""] if fmt == "responses" else []
    for m in (body.get("messages") if fmt == "chat" else body.get("input")) or []:
        if isinstance(m, dict) and m.get("role") in ("system", "developer"):
            out.append(texts(m.get("content")))
    return "\n".join(out)


def tools_of(fmt, body):
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if fmt == "anthropic" and "input_schema" in t:
            yield t["name"], t["input_schema"]
        if fmt == "chat" and t.get("type") == "function":
            yield t["function"]["name"], t["function"].get("parameters") or {}
        if fmt == "responses" and t.get("type") == "function":
            yield t["name"], t.get("parameters") or {}


def first_tool(fmt, body):
    return next(tools_of(fmt, body), None)


def read_call(fmt, body, path):
    """(name, arguments) of a call that reads `path` with one of the request's tools, or None."""
    shell = None
    for name, schema in tools_of(fmt, body):
        props = schema.get("properties") or {}
        if name.lower() in ("read", "read_file"):
            for k in ("file_path", "filePath", "path"):
                if k in props:
                    return name, {k: path}
        elif name in ("exec_command", "shell", "bash") and not shell:
            if "cmd" in props:
                shell = name, {"cmd": f"cat '{path}'"}
            elif "command" in props:
                array = (props["command"] or {}).get("type") == "array"
                shell = name, {"command": ["cat", path] if array else f"cat '{path}'"}
    return shell


def calls_text(fmt, items):
    """The arguments of every tool call in a request's context, as one string."""
    out = []
    for m in items:
        if not isinstance(m, dict):
            continue
        if fmt == "anthropic" and m.get("role") == "assistant" and isinstance(m.get("content"), list):
            out += [json.dumps(b.get("input")) for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
        elif fmt == "chat" and m.get("role") == "assistant":
            out += [str((c.get("function") or {}).get("arguments")) for c in m.get("tool_calls") or [] if isinstance(c, dict)]
        elif fmt == "responses" and m.get("type") in ("function_call", "local_shell_call"):
            out.append(str(m.get("arguments") or json.dumps(m.get("action"))))
    return "\n".join(out)


def fill(schema):
    props, out = schema.get("properties") or {}, {}
    for k in schema.get("required") or []:
        p = props.get(k) or {}
        t = p.get("type")
        t = next((x for x in t if x != "null"), None) if isinstance(t, list) else t
        if p.get("enum"):
            out[k] = p["enum"][0]
        else:
            out[k] = {"integer": 1, "number": 1, "boolean": True, "array": [], "object": None}.get(t, "hello.txt")
            if t == "object":
                out[k] = fill(p)
    return out


def last_is_tool_result(fmt, items):
    if not items or not isinstance(items[-1], dict):
        return False
    last = items[-1]
    if fmt == "chat":
        return last.get("role") == "tool"
    if fmt == "anthropic":
        c = last.get("content")
        return isinstance(c, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in c)
    return str(last.get("type", "")).endswith("_output")


def last_user_text(items):
    for m in reversed(items):
        if isinstance(m, dict) and m.get("role") == "user" and texts(m.get("content")).strip():
            return texts(m.get("content")).strip()
    return ""


def error_body(fmt, status, message, param=None, code=None):
    if fmt == "anthropic":
        return {"type": "error", "error": {"type": A_ERR.get(status, "api_error"), "message": message}}
    kind = "server_error" if status >= 500 else "rate_limit_exceeded" if status == 429 else "invalid_request_error"
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def checkpoint_text(n):
    return json.dumps({"goal": f"stand-in checkpoint {n}", "instructions": [], "discoveries": [],
                       "accomplished": [f"summarized by the stand-in ({n})"], "currentState": "carrying on",
                       "nextSteps": [], "relevantFiles": [{"path": "hello.txt", "why": "read by the tool"}]})


def split(s, parts=2):
    k = max(1, len(s) // parts)
    return [s[i:i + k] for i in range(0, len(s), k)] or [""]


# ---- the three formats: (JSON body, [(event, data)]) for a reply of text and maybe a tool call
def anthropic_reply(model, text, call, n_in):
    blocks = [{"type": "text", "text": text}]
    if call:
        blocks.append({"type": "tool_use", "id": f"toolu_standin_{call[0]}", "name": call[1], "input": call[2]})
    stop = "tool_use" if call else "end_turn"
    usage = {"input_tokens": n_in, "output_tokens": 12, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    msg = {"id": f"msg_standin_{next(IDS)}", "type": "message", "role": "assistant", "model": model,
           "content": blocks, "stop_reason": stop, "stop_sequence": None, "usage": usage}
    ev = [("message_start", {"message": dict(msg, content=[], stop_reason=None, usage=dict(usage, output_tokens=1))}),
          ("ping", {})]
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            ev.append(("content_block_start", {"index": i, "content_block": {"type": "text", "text": ""}}))
            ev += [("content_block_delta", {"index": i, "delta": {"type": "text_delta", "text": p}}) for p in split(text)]
        else:
            ev.append(("content_block_start", {"index": i, "content_block": dict(b, input={})}))
            ev += [("content_block_delta", {"index": i, "delta": {"type": "input_json_delta", "partial_json": p}})
                   for p in split(json.dumps(b["input"]))]
        ev.append(("content_block_stop", {"index": i}))
    ev += [("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 12}}),
           ("message_stop", {})]
    return msg, [(e, dict(type=e, **d)) for e, d in ev]


def chat_reply(model, text, call, n_in, include_usage):
    cid, created = f"chatcmpl-standin-{next(IDS)}", int(time.time())
    usage = {"prompt_tokens": n_in, "completion_tokens": 12, "total_tokens": n_in + 12}
    msg = {"role": "assistant", "content": text, "refusal": None, "annotations": []}
    if call:
        msg["tool_calls"] = [{"id": f"call_standin_{call[0]}", "type": "function",
                              "function": {"name": call[1], "arguments": json.dumps(call[2])}}]
    finish = "tool_calls" if call else "stop"
    body = {"id": cid, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": finish}],
            "usage": usage, "system_fingerprint": "fp_standin"}

    def chunk(delta, fin=None, use=False):
        c = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
             "system_fingerprint": "fp_standin",
             "choices": [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": fin}]}
        if include_usage:
            c["usage"] = usage if use else None
        return (None, c)
    ev = [chunk({"role": "assistant", "content": "", "refusal": None})] + [chunk({"content": p}) for p in split(text)]
    if call:
        tc = msg["tool_calls"][0]
        ev.append(chunk({"tool_calls": [{"index": 0, "id": tc["id"], "type": "function",
                                         "function": {"name": call[1], "arguments": ""}}]}))
        ev += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in split(tc["function"]["arguments"])]
    ev.append(chunk({}, finish))
    if include_usage:
        ev.append(chunk(None, use=True))
    return body, ev + [(None, "[DONE]")]


def responses_reply(model, text, call, n_in, req):
    rid, n = f"resp_standin_{next(IDS)}", next(IDS)
    items = [{"type": "message", "id": f"msg_standin_{n}", "status": "completed", "role": "assistant",
              "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}]
    if call:
        items.append({"type": "function_call", "id": f"fc_standin_{n}", "call_id": f"call_standin_{call[0]}",
                      "name": call[1], "arguments": json.dumps(call[2]), "status": "completed"})
    usage = {"input_tokens": n_in, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 12,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": n_in + 12}

    def resp(status, output):
        return {"id": rid, "object": "response", "created_at": int(time.time()), "status": status, "model": model,
                "output": output, "usage": usage if status == "completed" else None, "error": None,
                "incomplete_details": None, "instructions": req.get("instructions"),
                "previous_response_id": req.get("previous_response_id"), "store": req.get("store", True),
                "tools": req.get("tools") or [], "tool_choice": "auto", "parallel_tool_calls": True,
                "text": {"format": {"type": "text"}}, "metadata": {}}
    ev = [("response.created", {"response": resp("in_progress", [])}),
          ("response.in_progress", {"response": resp("in_progress", [])})]
    for i, it in enumerate(items):
        ref = {"item_id": it["id"], "output_index": i}
        if it["type"] == "message":
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            ev += [("response.output_item.added", {"output_index": i, "item": dict(it, status="in_progress", content=[])}),
                   ("response.content_part.added", dict(ref, content_index=0, part=part))]
            ev += [("response.output_text.delta", dict(ref, content_index=0, delta=p, logprobs=[])) for p in split(text)]
            ev += [("response.output_text.done", dict(ref, content_index=0, text=text, logprobs=[])),
                   ("response.content_part.done", dict(ref, content_index=0, part=dict(part, text=text)))]
        else:
            ev.append(("response.output_item.added", {"output_index": i, "item": dict(it, status="in_progress", arguments="")}))
            ev += [("response.function_call_arguments.delta", dict(ref, delta=p)) for p in split(it["arguments"])]
            ev.append(("response.function_call_arguments.done", dict(ref, arguments=it["arguments"])))
        ev.append(("response.output_item.done", {"output_index": i, "item": it}))
    ev.append(("response.completed", {"response": resp("completed", items)}))
    return resp("completed", items), [(e, dict(type=e, sequence_number=k, **d)) for k, (e, d) in enumerate(ev)]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def handle_any(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = b""
            while (size := int(self.rfile.readline().split(b";")[0], 16)) > 0:
                raw += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
        else:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = self.path.split("?")[0]
        route = path[3:] if path.startswith("/v1/") else path
        fmt = {"/messages": "anthropic", "/chat/completions": "chat", "/responses": "responses"}.get(route)
        if self.command != "POST" or not isinstance(body, dict):
            fmt = None
        cred = self.headers.get("x-api-key") or self.headers.get("authorization") or ""
        rec = {"t": round(time.time(), 3), "method": self.command, "path": self.path, "format": fmt,
               "kind": "other", "stream": bool(fmt and body.get("stream")), "has_credential": bool(cred.strip()),
               "credential": hashlib.sha256(cred.encode()).hexdigest()[:8] if cred.strip() else None,
               "conv": self.headers.get("x-standin-conv"),
               "headers": {k.lower(): ("<redacted>" if SECRET.search(k) else v) for k, v in self.headers.items()},
               "model": body.get("model") if isinstance(body, dict) else None}
        ctx = None
        if fmt:
            rec["kind"] = "summarizer" if SUMMARIZER_MARK in system_text(fmt, body) else "model"
            items = (responses_items(body) if fmt == "responses" else body.get("messages")) or []
            rec["n_messages"] = len(items) if isinstance(items, list) else 0
            ctx = items if isinstance(items, list) else []
        faults = [f.strip() for f in ARGS.fault if fmt] + \
                 [f.strip() for f in (self.headers.get("x-standin-fault") or "").split(",") if f.strip()]
        status, message, plan, json_body, events, why = 200, None, {}, None, None, {}
        for f in faults:
            m = re.fullmatch(r"(?:(model|summarizer):)?(status|once-status|slow|cut)(?::(\d+))?", f)
            if not m or (m[1] and m[1] != rec["kind"]):
                continue
            with LOCK:
                if m[2] == "once-status" and f in FIRED:
                    continue
                FIRED.add(f)
            plan[m[2]] = int(m[3] or 0)
            rec.setdefault("faults", []).append(f)
        if fmt == "responses" and body.get("previous_response_id"):
            with LOCK:
                prior = STORED.get(body["previous_response_id"])
            if prior is None:
                status, message = 400, f"Previous response with id '{body['previous_response_id']}' not found."
                why = {"param": "previous_response_id", "code": "previous_response_not_found"}
            else:
                ctx = prior + ctx
        if ctx is not None:
            rec["n_context"] = len(ctx)
        if status == 200 and path.startswith("/v1/") and not cred.strip() and not ARGS.no_auth:
            status, message = 401, "standin: no x-api-key or Authorization header"
        if status == 200 and fmt and not ARGS.no_validate:
            problem = request_problem(fmt, body, rec["headers"], ctx if fmt == "responses" else None)
            if problem:
                status, message = 400, "standin: " + problem
        for k in ("status", "once-status"):
            if status == 200 and plan.get(k):
                status, message = plan[k], f"standin: fault {k}:{plan[k]}"
        if status != 200:
            json_body = error_body(fmt or ("anthropic" if "anthropic-version" in self.headers else "chat"), status, message, **why)
        elif fmt:
            model, n_in = body.get("model", MODEL_ID), max(1, len(raw) // 4)
            with LOCK:
                num = next(ANSWERS)
            tool = first_tool(fmt, body)
            pattern = re.escape(ARGS.read_files).replace(r"\{\}", r"(\d+)")
            done = max(map(int, re.findall(pattern, calls_text(fmt, ctx))), default=0)
            reader = ARGS.tool_rounds and rec["kind"] == "model" and \
                read_call(fmt, body, ARGS.read_files.replace("{}", str(done + 1)))
            if rec["kind"] == "summarizer":
                text, call = checkpoint_text(num), None
            elif reader and done < ARGS.tool_rounds:
                text, call = f"I will read file {done + 1} of {ARGS.tool_rounds}.", (num, *reader)
            elif reader:
                text, call = f"answer {num}: all {ARGS.tool_rounds} files read", None
            elif tool and not last_is_tool_result(fmt, ctx):
                text, call = f"I will call {tool[0]}.", (num, tool[0], fill(tool[1]))
            else:
                text, call = f"answer {num} (re: {last_user_text(ctx)[:80]})", None
            rec["reply"] = {"text": text, "tool": call and {"name": call[1], "arguments": call[2]}}
            if fmt == "anthropic":
                json_body, events = anthropic_reply(model, text, call, n_in)
            elif fmt == "chat":
                json_body, events = chat_reply(model, text, call, n_in, bool((body.get("stream_options") or {}).get("include_usage")))
            else:
                json_body, events = responses_reply(model, text, call, n_in, body)
                rec["reply_id"], rec["reply_output"] = json_body["id"], json_body["output"]
                if body.get("store", True) is not False and "cut" not in plan:
                    with LOCK:
                        STORED[json_body["id"]] = ctx + json_body["output"]
        elif self.command == "POST" and route == "/messages/count_tokens":
            json_body = {"input_tokens": max(1, len(raw) // 4)}
        elif self.command == "GET" and (route == "/models" or route.startswith("/models/")):
            entry = {"id": MODEL_ID, "context_window": ARGS.context_window, "context_length": ARGS.context_window}
            if "anthropic-version" in self.headers:
                entry.update(type="model", display_name=MODEL_ID, created_at="2025-01-01T00:00:00Z")
                listing = {"data": [entry], "has_more": False, "first_id": MODEL_ID, "last_id": MODEL_ID}
            else:
                entry.update(object="model", created=0, owned_by="standin")
                listing = {"object": "list", "data": [entry]}
            json_body = listing if route == "/models" else entry
        else:
            status = 404
            json_body = error_body("anthropic" if "anthropic-version" in self.headers else "chat", 404,
                                   f"standin: no route {self.command} {self.path}")
        rec.update(status=status, body=body if body is not None else raw[:2000].decode("utf-8", "replace"))
        with LOCK, open(ARGS.log, "a") as f:
            f.write(json.dumps(rec) + "\n")
        try:
            if status == 200 and events and rec["stream"]:
                self.send_stream(events, plan)
            else:
                self.send_json(status, json_body, plan)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = handle_any

    def send_json(self, status, obj, plan):
        data = json.dumps(obj).encode()
        if plan.get("slow"):
            time.sleep(plan["slow"] / 1000)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", f"req_standin_{next(IDS)}")
        if status in (429, 503, 529):
            self.send_header("retry-after", "7")
        self.end_headers()
        if self.command == "HEAD":
            return
        if "cut" in plan:
            self.wfile.write(data[:len(data) // 2])
            return self.cut()
        self.wfile.write(data)

    def send_stream(self, events, plan):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("request-id", f"req_standin_{next(IDS)}")
        self.end_headers()
        for i, (name, data) in enumerate(events):
            if "cut" in plan and i == len(events) // 2:
                return self.cut()
            if plan.get("slow"):
                time.sleep(plan["slow"] / 1000)
            text = (f"event: {name}\n" if name else "") + "data: " + (data if isinstance(data, str) else json.dumps(data)) + "\n\n"
            chunk = text.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def cut(self):
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(2)  # no terminating chunk / short body: the reply was cut


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--log", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--fault", action="append", default=[])
    ap.add_argument("--context-window", type=int, default=200000)
    ap.add_argument("--no-validate", action="store_true")
    ap.add_argument("--no-auth", action="store_true")
    ap.add_argument("--tool-rounds", type=int, default=0)
    ap.add_argument("--read-files", default="part{}.txt")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"),
                    help="serve HTTPS with this certificate and key (PEM)")
    ARGS = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    srv.daemon_threads = True
    scheme = "http"
    if ARGS.tls:
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(ARGS.tls[0], ARGS.tls[1])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
        scheme = "https"
    print(f"listening on {scheme}://127.0.0.1:{srv.server_address[1]}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
