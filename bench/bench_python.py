#!/usr/bin/env python3
"""Issues 22 and 39: Prepare with nothing to do from Python, beside the C API it drives and
the floor of any body assembled in memory.

Sessions of W1 (bench/w1_workload.h, written by `recap_bench_reach --recap_w1_json=FILE`):
its first 2,000 messages and all 20,000. Before each timed turn one user message is appended
(not timed). Timed, interleaved in a shuffled order each round:

  kept copy  ctypes.memmove of the body's bytes (a bytes object) into one bytearray kept from
             turn to turn, its pages faulted in before the first turn: one memcpy of the body
             into memory already mapped, called from Python (a ctypes call, about a
             microsecond, around it) — the floor every other column is set against
  C API      recap_prepare(..., "openai-chat", ...) called through ctypes on the module's own
             library, and recap_free: the text in new memory each turn
  C API kept recap_prepare_to(..., "openai-chat", ...) through ctypes into one recap_buffer
             kept from turn to turn
  + bytes    recap_prepare, then its text copied into a new bytes object (ctypes.string_at:
             strlen, then the copy), and recap_free: what the module did before issue 39
  module     recap.Compactor.prepare(session, format="openai-chat").messages_bytes: the call
             into one of the Compactor's kept buffers, the figures parsed, the messages a
             read-only memoryview of the buffer (neither copied, scanned, parsed nor
             decoded): the fast path
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

    kept = lib.recap_buffer_new()
    floor = bytearray()

    def c_api():
        out = ctypes.c_void_p()
        err = ctypes.c_void_p()
        if lib.recap_prepare(raw, b"w1", b"openai-chat", None, ctypes.byref(out),
                             ctypes.byref(err)):
            raise RuntimeError("recap_prepare failed")
        lib.recap_free(out)

    def c_api_kept():
        err = ctypes.c_void_p()
        if lib.recap_prepare_to(raw, b"w1", b"openai-chat", None, kept, ctypes.byref(err)):
            raise RuntimeError("recap_prepare_to failed")

    def c_api_bytes():
        out = ctypes.c_void_p()
        err = ctypes.c_void_p()
        if lib.recap_prepare(raw, b"w1", b"openai-chat", None, ctypes.byref(out),
                             ctypes.byref(err)):
            raise RuntimeError("recap_prepare failed")
        try:
            return len(ctypes.string_at(out.value))
        finally:
            lib.recap_free(out)

    body = bytes(compactor.prepare(session, format="openai-chat").messages_bytes)
    floor.extend(b" " * (len(body) + len(body) // 4 + (1 << 20)))  # every page written once
    floor_address = ctypes.addressof(ctypes.c_char.from_buffer(floor))

    def kept_copy():
        ctypes.memmove(floor_address, body, len(body))

    def module():
        return len(compactor.prepare(session, format="openai-chat").messages_bytes)

    def decoded():
        return len(compactor.prepare(session, format="openai-chat").messages_json)

    def parsed():
        return len(compactor.prepare(session, format="openai-chat").messages)

    figures = {"kept copy": kept_copy, "C API": c_api, "C API kept": c_api_kept,
               "+ bytes": c_api_bytes, "module": module, "+ str": decoded, "+ parse": parsed}
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
    lib.recap_buffer_free(kept)
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
    lib.recap_prepare_to.argtypes = [vp, ctypes.c_char_p, ctypes.c_char_p, vp, vp,
                                     ctypes.POINTER(vp)]
    lib.recap_buffer_new.restype = vp
    lib.recap_buffer_new.argtypes = []
    lib.recap_buffer_free.argtypes = [vp]
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
    print("  %9s %11s %10s %10s %10s %10s %10s %10s %10s %12s %12s" % (
        "messages", "body bytes", "kept copy", "C API", "C API kept", "+ bytes", "module",
        "+ str", "+ parse", "C kept/floor", "module/floor"))
    for count, body_bytes, m in rows:
        print("  %9d %11s %10s %10s %10s %10s %10s %10s %10s %11.2fx %11.2fx" % (
            count, format(body_bytes, ","), shown(m["kept copy"]), shown(m["C API"]),
            shown(m["C API kept"]), shown(m["+ bytes"]), shown(m["module"]), shown(m["+ str"]),
            shown(m["+ parse"]), m["C API kept"] / m["kept copy"],
            m["module"] / m["kept copy"]))
    if args.json:
        with open(args.json, "w") as f:
            f.write('{"comparisons": [\n')
            f.write(",\n".join(
                '  {"id": "python/W1 %d", "messages": %d, "body_bytes": %d, "kept_copy_s": %g, '
                '"c_api_s": %g, "c_api_kept_s": %g, "c_api_bytes_s": %g, "module_s": %g, '
                '"str_s": %g, "parse_s": %g}' % (
                    count, count, body_bytes, m["kept copy"], m["C API"], m["C API kept"],
                    m["+ bytes"], m["module"], m["+ str"], m["+ parse"])
                for count, body_bytes, m in rows))
            f.write("\n]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
