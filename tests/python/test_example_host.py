"""examples/python_host.py replays a real transcript (tau-bench) and compacts it with its own
Python summarizer: run as a host would run it, its output checked."""

import os
import re
import subprocess
import sys

EXAMPLES = os.environ.get("RECAP_EXAMPLES_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..", "examples")


def run_host(*args):
    done = subprocess.run([sys.executable, os.path.join(EXAMPLES, "python_host.py"), *args],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def check(output, window):
    turns = re.findall(r"^turn +\d+: .*-> +\d+ chars \( *(\d+) tokens\)", output, re.M)
    assert len(turns) >= 10, output
    assert all(int(tokens) <= window for tokens in turns), output
    assert re.search(r"^compaction \(auto\): \d+ messages summarized", output, re.M), output
    compactions = int(re.search(r"^compactions: (\d+), failed: 0$", output, re.M).group(1))
    assert compactions >= 1, output
    final = re.search(r"^final: \d+ messages, (\d+) tokens of a (\d+)-token window", output,
                      re.M)
    assert final and int(final.group(1)) <= int(final.group(2)) == window, output
    return compactions


def test_the_example_host_compacts_a_real_transcript():
    data = os.environ.get("RECAP_TEST_DATA_DIR")
    args = [os.path.join(data, "tau-bench_gpt-4o-airline.json")] if data else []
    check(run_host(*args), 5000)


def test_the_example_host_on_a_sqlite_store(tmp_path):
    output = run_host("--run", "9", "--window", "4000",
                      "--store", "sqlite:" + str(tmp_path / "host.db"))
    check(output, 4000)
