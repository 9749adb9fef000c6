"""Collection time for 10,000 cases: the plugin against plain ``pytest.mark.parametrize``.

Both collect the same generated JSONL data in the same run: the plugin through
``pytest_collect_file`` (parse, validate with pydantic, one item per case × policy, markers),
the peer through a test module that reads the file with ``json.loads`` and parametrises one
test over the rows.  Prints both wall times (best of N runs of ``pytest --collect-only -q``)
and their ratio; goal ≤ 1.5×.

Run: ``.venv/bin/python bench/collection.py [--cases 10000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import emit  # bench/results.py: this folder is on sys.path

FAMILY = """\
name: bench
tools:
  - name: get_weather
    parameters: {type: object, properties: {city: {type: string}, unit: {type: string, enum: [c, f]}},
                 required: [city]}
    annotations: {readOnlyHint: true}
"""

PEER = """\
import json, pathlib, pytest
ROWS = [json.loads(l) for l in pathlib.Path(__file__).with_name("cases.jsonl").read_text().splitlines() if l]

@pytest.mark.parametrize("case", ROWS, ids=[r["id"] for r in ROWS])
def test_case(case):
    pass
"""


def make_cases(n: int) -> str:
    lines = []
    for i in range(n):
        bucket = ("first", "middle", "last")[i % 3]
        step = {"first": 0, "middle": 1, "last": 2}[bucket]
        label = ({"valid_actions": [{"tool": None}], "forbidden_actions": ["get_weather"]} if i % 3 == 2 else
                 {"valid_actions": [{"tool": "get_weather", "args": {"city": f"city-{i}"}}]})
        lines.append(json.dumps({
            "id": f"c{i:05d}", "placement": {"step": step, "run_length": 3, "bucket": bucket},
            "messages": [{"role": "user", "content": f"What's the weather in city-{i}?"},
                         {"role": "assistant", "tool_calls": [{"id": f"k{i}", "type": "function", "function": {
                             "name": "get_weather", "arguments": json.dumps({"city": f"city-{i}"})}}]},
                         {"role": "tool", "tool_call_id": f"k{i}", "content": "sunny"}],
            "label": label, "recorded": {"tool_calls": []}, "source": "generated"}))
    return "\n".join(lines) + "\n"


def collect_seconds(root: Path, target: str, repeat: int) -> tuple[float, int]:
    best = float("inf")
    count = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                              target], cwd=root, capture_output=True, text=True)
        best = min(best, time.perf_counter() - t0)
        if out.returncode != 0:
            raise SystemExit(f"collection of {target} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
        count = sum(1 for line in out.stdout.splitlines() if "::" in line)
    return best, count


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pytest.ini").write_text("[pytest]\n")
        data = make_cases(args.cases)
        fam = root / "cases" / "bench"
        fam.mkdir(parents=True)
        (fam / "family.yaml").write_text(FAMILY)
        (fam / "cases.jsonl").write_text(data)
        peer = root / "peer"
        peer.mkdir()
        (peer / "cases.jsonl").write_text(data)
        (peer / "test_peer.py").write_text(PEER)
        ours, n_ours = collect_seconds(root, "cases", args.repeat)
        theirs, n_peer = collect_seconds(root, "peer", args.repeat)
    assert n_ours == n_peer == args.cases, (n_ours, n_peer)
    print(f"cases: {args.cases} (best of {args.repeat} runs of pytest --collect-only)")
    print(f"pytest-tooleffect collection: {ours:.2f} s")
    print(f"plain pytest.mark.parametrize over the same JSONL: {theirs:.2f} s")
    print(f"ratio (ours / parametrize): {ours / theirs:.2f}x  (goal <= 1.5x)")
    emit(f"collection of {args.cases} cases", "plain pytest.mark.parametrize over the same JSONL", ours / theirs,
         "<= 1.5", f"{ours:.2f} s against {theirs:.2f} s")


if __name__ == "__main__":
    main()
