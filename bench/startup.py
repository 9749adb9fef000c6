"""Start-up: how long before the first model request leaves and the first decision is scored.

A scratch project holds the shipped τ-airline cases copied to N decisions.  Four runs, as a user
runs them (``pytest cases -q``), each timed from the moment the process is started:

* **replay** (offline): the first scored decision, against plain pytest running N trivial
  parametrised tests in the same run (its first passed test): the floor;
* **live** and **live -n 2**: every decision asked of ``openai/bench`` on the scripted
  fixed-latency server of :mod:`pytest_tooleffect.servers.scripted` (``--delay`` seconds per answer):
  the first request's arrival at the server (a ``time.monotonic()`` reading, the same clock the
  run's own conftest reads) after the end of collection (the earliest collecting process under
  xdist), against the 2 s limit; and the first scored decision.

A bare ``python -c "import litellm"`` is timed right before each live run: litellm's import alone
costs seconds (more than the 2 s limit on a loaded machine), so each live run is also held against
it: the first request after the process started over the bare import (target ≤ 1.1: start-up,
collection and the rest of the plugin's work hidden behind the import, not added to it).

Run: ``.venv/bin/python bench/startup.py [--cases 1000] [--delay 0.2]`` (``make bench`` runs it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from replay_scale import scaffold as copy_family  # noqa: E402 - this folder is on sys.path
from results import emit  # noqa: E402 - bench/results.py: this folder is on sys.path

from pytest_tooleffect.servers.scripted import Reply, ScriptedServer  # noqa: E402

FAMILY = REPO / "cases" / "tau-airline"
LIMIT_S = 2.0
TIMINGS = """
import json, time
import pytest

from pytest_tooleffect import wire

T = {}

def pytest_configure(config):
    T["configure"] = time.monotonic()

def pytest_collection_finish(session):
    T["collected"] = time.monotonic()

def pytest_runtest_logreport(report):
    scored = getattr(report, wire.REPORT_RECORD, None) is not None or (report.when == "call" and report.passed)
    if scored and "first_scored" not in T:
        T["first_scored"] = time.monotonic()

def pytest_unconfigure(config):
    name = getattr(config, "workerinput", {}).get("workerid", "main")
    with open(config.rootpath / f"timings-{name}.json", "w") as fh:
        json.dump(T, fh)
"""
FLOOR = """\
import pytest

@pytest.mark.parametrize("i", range({n}))
def test_decision(i):
    pass
"""


def run(cmd: list[str], cwd: Path) -> tuple[float, dict[str, dict[str, float]], str]:
    """Start ``cmd``; its start time (monotonic), the timings each process wrote, its output tail."""
    for old in cwd.glob("timings-*.json"):
        old.unlink()
    env = {**os.environ, "PYTEST_ADDOPTS": "-p no:langsmith_plugin"}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode cached between runs, as on a user's machine
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
    timings = {p.stem.removeprefix("timings-"): json.loads(p.read_text()) for p in cwd.glob("timings-*.json")}
    return t0, timings, proc.stdout[-300:]


def scaffold(root: Path, n: int) -> None:
    copy_family(root)  # the family without its cases, and its oracle rules
    fam = root / "cases" / "tau-airline"
    cases = [json.loads(line) for line in (FAMILY / "cases.jsonl").read_text().splitlines() if line.strip()]
    cases = [c for c in cases if c.get("label") and c.get("recorded")]
    with open(fam / "cases.jsonl", "w") as fh:
        for i in range(n):
            fh.write(json.dumps({**cases[i % len(cases)], "id": f"d{i:06d}"}) + "\n")
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "conftest.py").write_text(TIMINGS)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--delay", type=float, default=0.2, help="seconds the scripted server takes per answer")
    ap.add_argument("--concurrency", type=int, default=32)
    args = ap.parse_args()
    n = args.cases
    tmp = Path(tempfile.mkdtemp(prefix="tooleffect-startup-"))
    try:
        root = tmp / "project"
        scaffold(root, n)
        floor = tmp / "floor"
        floor.mkdir()
        (floor / "pytest.ini").write_text("[pytest]\n")
        (floor / "conftest.py").write_text(TIMINGS)
        (floor / "test_floor.py").write_text(FLOOR.format(n=n))
        base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=no", "-rN"]
        t0, ft, _ = run([*base, "test_floor.py"], floor)
        floor_first = ft["main"]["first_scored"] - t0
        t0, rt, _ = run([*base, "cases", "--tooleffect-no-summary"], root)
        replay_first = rt["main"]["first_scored"] - t0
        live = {}
        reply = Reply(text="Is there anything else I can help you with?", delay_s=args.delay)
        for label, extra in (("live", []), ("live -n 2", ["-n", "2"])):
            t_imp = time.monotonic()
            subprocess.run([sys.executable, "-c", "import litellm"], check=True,
                           env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
            import_s = time.monotonic() - t_imp
            with ScriptedServer([reply]) as srv:
                t0, lt, _ = run([*base, "cases", "--tooleffect-no-summary", "--tooleffect-model=openai/bench",
                                 f"--tooleffect-api-base={srv.base_url}", "--tooleffect-retries=0",
                                 f"--tooleffect-concurrency={args.concurrency}", "--tooleffect-report=report.json",
                                 *extra], root)
                if len(srv.requests) != n:
                    report = json.loads((root / "report.json").read_text())
                    errors = [e for b in report["blocks"] for e in b["errors"]]
                    raise SystemExit(f"{label}: {len(srv.requests)} requests served of {n}; report status "
                                     f"{report['status']}, errors: {json.dumps(errors)[:2000]}")
                first_request = min(r["_received"] for r in srv.requests)
            runners = {k: v for k, v in lt.items() if "collected" in v and (k != "main" or not extra)}
            collected = min(v["collected"] for v in runners.values())
            live[label] = {"first_request": first_request - t0, "after_collection": first_request - collected,
                           "collected": collected - t0, "first_scored": lt["main"]["first_scored"] - t0,
                           "import": import_s}
        print(f"{n} cases")
        print(f"replay: first scored decision {replay_first:.2f} s after start; plain pytest's first result "
              f"{floor_first:.2f} s: {replay_first / floor_first:.2f}x")
        emit(f"replay, {n} decisions: time to the first scored decision",
             f"plain pytest, {n} trivial tests: time to the first result", replay_first / floor_first, "<= 2",
             f"{replay_first:.2f} s against {floor_first:.2f} s")
        for label, t in live.items():
            print(f"{label}: collection ends {t['collected']:.2f} s, first request {t['first_request']:.2f} s "
                  f"({t['after_collection']:+.2f} s after collection), first scored decision "
                  f"{t['first_scored']:.2f} s after start; bare `import litellm` just before: {t['import']:.2f} s")
            emit(f"{label}, {n} decisions: first request after collection ends", f"limit {LIMIT_S:.0f} s",
                 max(t["after_collection"], 0.0) / LIMIT_S, "<= 1",
                 f"{t['after_collection']:.2f} s; first request {t['first_request']:.2f} s and first scored "
                 f"decision {t['first_scored']:.2f} s after start")
            emit(f"{label}, {n} decisions: first request after start", "a bare `import litellm` (just before)",
                 t["first_request"] / t["import"], "<= 1.1",
                 f"{t['first_request']:.2f} s against {t['import']:.2f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
