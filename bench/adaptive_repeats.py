"""Adaptive repeats live: trials run against k* trials everywhere, on a population of stable and flaky
cases served by the scripted model server on 127.0.0.1 (litellm's real HTTP path).

``--cases`` cases of a one-tool family (two in three need ``read_thread``, the rest no call).  Each case
has its own pass probability π: a share ``--flaky`` of them π drawn from ``--pis`` (each trial passes
with that probability, from a seeded generator per case), the rest always right (π = 1) or, one in
five, always wrong (π = 0).  One run with ``--tooleffect-repeats adaptive`` at the default design
(alpha 0.05, tolerance 0.1: k* = 29) prints:

- the trials run (the server's requests) over the trials k* everywhere would run (cases × k*),
  against the expectation of the rule (:func:`~pytest_tooleffect.ci.adaptive_repeats.expected_trials`
  summed over the cases' π);
- how many flaky cases (0 < π < 1) were called flaky, and how many stable cases were called stable.

    python bench/adaptive_repeats.py [--cases 60] [--flaky 0.25] [--seed 45] [-n 0]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from results import emit  # bench/results.py: this folder is on sys.path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pytest_tooleffect.ci.adaptive_repeats import RepeatDesign, expected_trials, trials_to_stable  # noqa: E402
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer  # noqa: E402

FAMILY = """\
name: demo
system_prompt: You answer support threads.
tools:
  - name: read_thread
    parameters: {type: object, properties: {thread_id: {type: string}}, required: [thread_id]}
    annotations: {readOnlyHint: true}
"""
READ = {"tool": "read_thread", "args": {"thread_id": "th-1"}}
NULL = {"tool": None, "reason": "nothing to do"}
MARK = re.compile(r"\[case-(\d+)\]")


def single(n: int) -> bool:
    return n % 3 != 0


def write_family(root: Path, count: int) -> None:
    fam = root / "cases" / "demo"
    fam.mkdir(parents=True)
    (fam / "family.yaml").write_text(FAMILY)
    lines = [json.dumps({"id": f"case-{n:04d}", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
                         "messages": [{"role": "user", "content": f"[case-{n}] please help"}],
                         "label": {"valid_actions": [READ if single(n) else NULL]}, "source": "authored"})
             for n in range(count)]
    (fam / "cases.jsonl").write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cases", type=int, default=60)
    parser.add_argument("--flaky", type=float, default=0.25, help="share of cases with 0 < π < 1")
    parser.add_argument("--pis", type=float, nargs="+", default=[0.5, 0.7, 0.9, 0.95])
    parser.add_argument("--seed", type=int, default=45)
    parser.add_argument("-n", dest="workers", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    numbers = list(range(args.cases))
    flaky = set(rng.sample(numbers, round(args.flaky * args.cases)))
    pi = {n: rng.choice(args.pis) if n in flaky else (0.0 if rng.random() < 0.2 else 1.0) for n in numbers}
    draws = {n: random.Random(f"{args.seed}:{n}") for n in numbers}
    sent: Counter[int] = Counter()
    lock = threading.Lock()

    def answer(body: Mapping[str, Any]) -> Reply:
        found = MARK.search(json.dumps(body.get("messages") or []))
        n = int(found[1]) if found else 0
        with lock:
            sent[n] += 1
            right = draws[n].random() < pi[n]
        calls = single(n) == right
        return Reply(tool_calls=[("read_thread", '{"thread_id": "th-1"}')]) if calls else Reply(text="Done.")

    design = RepeatDesign()
    k_star = trials_to_stable(design)
    with tempfile.TemporaryDirectory() as tmp, ScriptedServer(answer) as srv:
        root = Path(tmp)
        write_family(root, args.cases)
        (root / "pyproject.toml").write_text("[tool.tooleffect.repeats]\nalpha = 0.05\ntolerance = 0.1\n")
        command = [sys.executable, "-m", "pytest", "cases/", "-q", "-p", "no:cacheprovider", "-p",
                   "no:langsmith_plugin", "--tooleffect-model=openai/bench", f"--tooleffect-api-base={srv.base_url}",
                   "--tooleffect-repeats=adaptive", "--tooleffect-report=report.json", "--tooleffect-records=",
                   "-n", str(args.workers)]
        env = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout's plugin
        done = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False, env=env)
        report = json.loads((root / "report.json").read_text())
    tail = [line for line in done.stdout.splitlines() if line.startswith("demo/")]
    print("\n".join(tail))
    ada = report["blocks"][0]["repeats"]["adaptive"]
    steps = {int(c["case_id"][5:]): c["step"] for c in ada["cases"]}
    run = sum(sent.values())
    full = args.cases * k_star
    expected = sum(expected_trials(design, p) for p in pi.values())
    flaky_found = sum(steps[n] == "flaky" for n in flaky)
    stable_found = sum(steps[n] == "stable" for n in numbers if n not in flaky)
    print(f"cases {args.cases} ({len(flaky)} with 0 < π < 1), k* {k_star}: {run} trials run against {full} at k* "
          f"everywhere ({run / full:.3f}); the rule expects {expected:.1f}; flaky called flaky {flaky_found}/"
          f"{len(flaky)}, stable called stable {stable_found}/{args.cases - len(flaky)}")
    emit(f"adaptive repeats, {args.cases} cases, {len(flaky)} flaky, -n {args.workers}: trials run",
         f"k* = {k_star} trials everywhere ({full})", run / full, "<= 1",
         f"{run} trials run; expected {expected:.1f}; report trials_run {ada['trials_run']}, "
         f"saved {ada['trials_saved']}")
    return 0 if ada["trials_run"] == run else 1


if __name__ == "__main__":
    raise SystemExit(main())
