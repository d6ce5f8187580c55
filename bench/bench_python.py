#!/usr/bin/env python3
"""Issue 22: Prepare with nothing to do from Python, beside the C API it drives.

Sessions of W1 (bench/w1_workload.h, written by `recap_bench_reach --recap_w1_json=FILE`):
its first 2,000 messages and all 20,000. Before each timed turn one user message is appended
(not timed). Timed, interleaved in a shuffled order each round:

  C API      recap_prepare(..., "openai-chat", ...) called through ctypes on the module's own
             library, and recap_free: the floor under the module
  module     recap.Compactor.prepare(session, format="openai-chat").messages_bytes: the call,
             the result copied out of recap's memory and split into the messages' JSON bytes
             and the figures (the messages are neither parsed nor decoded): the fast path
  + str      the same, then .messages_json (the bytes decoded to str), for reference
  + parse    the same, then .messages (json.loads of the whole body), for reference

Medians of the timed turns; ratios within this run. No budget: comparisons only.

    bench_python.py --w1 FILE [--turns N] [--smoke] [--json FILE]
"""

import argparse
import ctypes
import json
import random
import statistics
import sys
import time

import recap


def build_session(compactor, lib, raw, session, messages):
    """Appends `messages` (recap's own form) to `session` of both compactors."""
    for start in range(0, len(messages), 500):
        batch = messages[start:start + 500]
        compactor.append(session, batch, format="recap")
        text = json.dumps(batch).encode("utf-8")
        error = ctypes.c_void_p()
        if lib.recap_append(raw, session.encode(), b"recap", text, None, ctypes.byref(error)):
            raise RuntimeError("recap_append: " + ctypes.string_at(error.value).decode())


def measure(lib, messages, count, turns, rng):
    compactor = recap.Compactor(config={"limits": {"maxContextChars": 1000000000}})
    raw = ctypes.c_void_p()
    error = ctypes.c_void_p()
    if lib.recap_compactor_new(b'{"limits":{"maxContextChars":1000000000}}', None, None, None,
                               None, ctypes.byref(raw), ctypes.byref(error)):
        raise RuntimeError("recap_compactor_new failed")
    session = "w1"
    build_session(compactor, lib, raw, session, messages[:count])

    def c_api():
        out = ctypes.c_void_p()
        err = ctypes.c_void_p()
        if lib.recap_prepare(raw, b"w1", b"openai-chat", None, ctypes.byref(out),
                             ctypes.byref(err)):
            raise RuntimeError("recap_prepare failed")
        lib.recap_free(out)

    def module():
        return len(compactor.prepare(session, format="openai-chat").messages_bytes)

    def decoded():
        return len(compactor.prepare(session, format="openai-chat").messages_json)

    def parsed():
        return len(compactor.prepare(session, format="openai-chat").messages)

    figures = {"C API": c_api, "module": module, "+ str": decoded, "+ parse": parsed}
    for f in figures.values():  # first calls load and encode the session
        f()
    times = {name: [] for name in figures}
    k = 0
    for _ in range(turns):
        order = list(figures)
        rng.shuffle(order)
        for name in order:
            k += 1
            user = {"role": "user", "content": "turn %d %s" % (k, "x" * 500)}
            compactor.append(session, user)
            text = json.dumps([user]).encode("utf-8")
            lib.recap_append(raw, b"w1", b"openai-chat", text, None, None)
            t0 = time.perf_counter()
            figures[name]()
            times[name].append(time.perf_counter() - t0)
    body_bytes = len(compactor.prepare(session, format="openai-chat").messages_bytes)
    compactor.close()
    lib.recap_compactor_free(raw)
    return body_bytes, {name: statistics.median(v) for name, v in times.items()}


def shown(seconds):
    return "%.1f µs" % (seconds * 1e6) if seconds < 0.001 else "%.2f ms" % (seconds * 1e3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--w1", required=True, help="W1 as recap_bench_reach writes it")
    parser.add_argument("--turns", type=int, default=None)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--json", default=None, help="also write the figures here")
    args = parser.parse_args()
    turns = args.turns or (4 if args.smoke else 30)

    lib = ctypes.CDLL(recap.library_path)
    vp = ctypes.c_void_p
    lib.recap_compactor_new.argtypes = [ctypes.c_char_p, vp, vp, vp, vp, ctypes.POINTER(vp),
                                        ctypes.POINTER(vp)]
    lib.recap_append.argtypes = [vp, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, vp,
                                 vp]
    lib.recap_prepare.argtypes = [vp, ctypes.c_char_p, ctypes.c_char_p, vp, ctypes.POINTER(vp),
                                  ctypes.POINTER(vp)]
    lib.recap_free.argtypes = [vp]
    lib.recap_compactor_free.argtypes = [vp]

    with open(args.w1, "rb") as f:
        messages = json.load(f)["messages"]
    sizes = [40, len(messages)] if args.smoke else [2000, 20000]
    rng = random.Random(20261205)
    rows = []
    for count in sizes:
        count = min(count, len(messages))
        body_bytes, medians = measure(lib, messages, count, turns, rng)
        rows.append((count, body_bytes, medians))

    print("\nbench_python.py: Prepare with nothing to do from Python (openai-chat), medians of "
          "%d turns, one message appended before each" % turns)
    print("  %9s %12s %12s %12s %12s %12s %14s" % ("messages", "body bytes", "C API", "module",
                                                 "+ str", "+ parse", "module / C API"))
    for count, body_bytes, m in rows:
        print("  %9d %12s %12s %12s %12s %12s %13.2fx" % (
            count, format(body_bytes, ","), shown(m["C API"]), shown(m["module"]),
            shown(m["+ str"]), shown(m["+ parse"]), m["module"] / m["C API"]))
    if args.json:
        with open(args.json, "w") as f:
            f.write('{"comparisons": [\n')
            f.write(",\n".join(
                '  {"id": "python/W1 %d", "messages": %d, "body_bytes": %d, "c_api_s": %g, '
                '"module_s": %g, "str_s": %g, "parse_s": %g}' % (
                    count, count, body_bytes, m["C API"], m["module"], m["+ str"], m["+ parse"])
                for count, body_bytes, m in rows))
            f.write("\n]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
