#!/usr/bin/env python3
"""gen_session.py OUT_PREFIX [--messages N] [--chunks K] [--seed S]: a generated agent session
in recap's own JSON (what `recap import --format recap` and `recap append --format recap` read),
split into K files OUT_PREFIX.0.json .. OUT_PREFIX.{K-1}.json of whole turns, about N messages
in all. Each turn: a user message, then assistant messages calling tools (one to three calls
each) with their results, then an assistant answer. Sizes are drawn to look like a coding
agent's (short questions, tool results from a few hundred characters to ~12 KB). Some texts are
hostile to an HTML page (HOSTILE below): the browser test checks they are shown as text.
Prints the HOSTILE strings as one JSON line on stdout (what the page must show as text)."""
import argparse
import json
import random

# What a page that did not escape would run or break on. The browser test looks for each one
# in the page's text and for the elements they would inject.
HOSTILE = [
    "<script>window.__recapInjected = 1</script>",
    "</style><img src=x onerror=\"window.__recapInjected = 2\">",
    "\" onmouseover=\"window.__recapInjected = 3\" data-x=\"",
    "</pre></li></ol><img src=\"data:,x\" id=\"recap-injected\">",
    "</title></svg><iframe srcdoc=\"<b>x</b>\"></iframe>",
    "<!-- an unclosed comment",
    "' onfocus='window.__recapInjected = 4' autofocus x='",
]

WORDS = ("the of and to in is for that with on as this it be are by from file test build "
         "function return value error line call session message compaction token limit "
         "checkpoint summary parse config struct vector string include namespace class "
         "const auto size index turn result tool assistant user").split()
TOOLS = ["Read", "Bash", "Grep", "Edit", "Write", "Glob"]


def words(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def sentence_block(rng, chars):
    out = []
    total = 0
    while total < chars:
        s = words(rng, rng.randint(6, 18)).capitalize() + "."
        out.append(s)
        total += len(s) + 1
    return " ".join(out)


def code_block(rng, chars):
    lines = []
    total = 0
    n = 1
    while total < chars:
        indent = "  " * rng.randint(0, 3)
        line = f"{n:5d}\t{indent}{rng.choice(['auto', 'const', 'if (', 'return', 'for ('])} " \
               f"{words(rng, rng.randint(2, 8))};"
        lines.append(line)
        total += len(line) + 1
        n += 1
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("prefix")
    ap.add_argument("--messages", type=int, default=20000)
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--seed", type=int, default=41)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    turns = []  # each a list of messages
    count = 0
    call_no = 0
    hostile_left = list(HOSTILE)
    while count < a.messages:
        t = []
        text = sentence_block(rng, rng.randint(40, 400))
        # Hostile texts early (every one of them lands in a user message, a tool call, a
        # tool result and an answer somewhere) and now and then later.
        hostile = None
        if hostile_left and len(turns) % 3 == 0:
            hostile = hostile_left.pop(0)
        elif rng.random() < 0.01:
            hostile = rng.choice(HOSTILE)
        if hostile:
            text += " " + hostile
        t.append({"role": "user", "parts": [{"type": "text", "text": text}]})
        for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 4, 6])):
            calls = []
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                call_no += 1
                name = rng.choice(TOOLS)
                args = {"path": f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}.cc"}
                if name == "Bash":
                    args = {"command": f"grep -rn {rng.choice(WORDS)} src | head -{rng.randint(5, 80)}"}
                if hostile and rng.random() < 0.5:
                    args["note"] = hostile
                calls.append({"type": "tool_call", "id": f"call_{call_no}", "name": name,
                              "arguments": json.dumps(args)})
            parts = []
            if rng.random() < 0.6:
                parts.append({"type": "text", "text": sentence_block(rng, rng.randint(30, 300))})
            t.append({"role": "assistant", "parts": parts + calls})
            for c in calls:
                size = int(min(12000, rng.lognormvariate(7.0, 1.0)))  # median ~1.1 KB
                body = code_block(rng, size) if rng.random() < 0.6 else sentence_block(rng, size)
                if hostile and rng.random() < 0.5:
                    body = hostile + "\n" + body
                t.append({"role": "tool", "parts": [{"type": "tool_result", "call_id": c["id"],
                                                     "content": [{"type": "text", "text": body}],
                                                     "is_error": rng.random() < 0.05}]})
        answer = sentence_block(rng, rng.randint(80, 1500))
        if hostile:
            answer += "\n" + hostile
        t.append({"role": "assistant", "parts": [{"type": "text", "text": answer}]})
        turns.append(t)
        count += len(t)
    per = -(-len(turns) // a.chunks)
    for k in range(a.chunks):
        msgs = [m for t in turns[k * per:(k + 1) * per] for m in t]
        with open(f"{a.prefix}.{k}.json", "w") as f:
            json.dump({"format": "recap", "version": 1, "instructions": None, "messages": msgs}, f)
    print(json.dumps({"messages": count, "turns": len(turns), "hostile": HOSTILE}))


if __name__ == "__main__":
    main()
