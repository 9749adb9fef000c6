"""An agent in CI, end to end, against the local scripted server: the example agent is accepted
as a baseline and gated; a variant of it that over-calls on confirmations regresses and the run
fails, naming the regressed cases, the failed gate and McNemar's p-value; -n 2 says the same."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.options import OPT_AGENT, OPT_BASELINE, OPT_RECORDS, OPT_REPORT, OPT_SANDBOX
from pytest_tooleffect.servers.recorded import replay_index, turn_key
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from tests.conftest import REPO

PLAIN = "examples.agents.plain_litellm:decide"
GATES = """\
[tool.tooleffect.gates."*"]
min_pct.no_tool = { name = 80 }
max_regressions = 0
"""
OVERCALLING = '''
"""The example agent, changed to read the user's profile again whenever the user confirms."""
import json
import re

from examples.agents.plain_litellm import decide as plain_decide

CONFIRMS = re.compile(r"\\b(yes|yeah|ok|okay|sure|thanks|thank you|great|perfect|confirm\\w*)\\b", re.I)


def decide(state):
    last = state.messages[-1]
    if last.get("role") == "user" and CONFIRMS.search(str(last.get("content") or "")):
        call = {"id": "re-read", "type": "function",
                "function": {"name": "get_user_details", "arguments": json.dumps({"user_id": "again"})}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return plain_decide(state)
'''


def _project(root: Path) -> Path:
    shutil.copytree(REPO / "cases" / "tau-airline", root / "cases" / "tau-airline")
    (root / "oracle").mkdir()
    shutil.copy(REPO / "oracle" / "tau-airline.yaml", root / "oracle" / "tau-airline.yaml")
    (root / "pyproject.toml").write_text(GATES)
    (root / "overcalling.py").write_text(OVERCALLING)
    return root


def _run(root: Path, out: str, agent: str, server: ScriptedServer, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLEFFECT_EXAMPLE_")}
    env |= {"TOOLEFFECT_EXAMPLE_MODEL": "openai/gpt-4o", "TOOLEFFECT_EXAMPLE_API_BASE": server.base_url,
            "PYTHONPATH": os.pathsep.join([str(root), str(REPO)]), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "pytest", "cases/", "-q", "-p", "no:cacheprovider",
                           f"{OPT_AGENT}=agent={agent}", f"{OPT_SANDBOX}=off", f"{OPT_RECORDS}={out}.jsonl",
                           f"{OPT_REPORT}={out}.json", *extra],
                          cwd=root, env=env, capture_output=True, text=True, timeout=900)


def _lines(run: subprocess.CompletedProcess[str], prefix: str) -> list[str]:
    return [line for line in run.stdout.splitlines() if line.startswith(prefix)]


def _records(path: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())}


def _recorded_turns() -> Any:
    index = replay_index(REPO / "cases", system=False)  # the agent writes its own prompt

    def answer(body: Mapping[str, Any]) -> Reply:
        return index.get(turn_key(body, system=False), Reply(text="Is there anything else?"))

    return answer


def test_an_over_calling_variant_fails_the_gate_against_the_accepted_agent(tmp_path: Path) -> None:
    from pytest_tooleffect.cli import main

    root = _project(tmp_path)
    with ScriptedServer(_recorded_turns()) as srv:
        accepted = _run(root, "accepted", PLAIN, srv)
        assert "gate tau-airline/agent" in accepted.stdout, accepted.stdout[-3000:] + accepted.stderr[-2000:]
        assert len(_records(root / "accepted.jsonl")) == 210
        assert main(["baseline", "save", str(root / "accepted.jsonl"), "--out", str(root / "baseline.json")]) == 0

        # the three runs against the baseline are independent: at once, as three CI jobs would be
        with ThreadPoolExecutor(3) as pool:
            same_run = pool.submit(_run, root, "same", PLAIN, srv, f"{OPT_BASELINE}=baseline.json")
            variant_runs = {w: pool.submit(_run, root, f"variant-n{w}", "overcalling:decide", srv,
                                           f"{OPT_BASELINE}=baseline.json", *(["-n", str(w)] if w else []))
                            for w in (0, 2)}
            same = same_run.result()
            variant = {w: run.result() for w, run in variant_runs.items()}

    # the accepted agent against its own baseline: every gate passes, though some decisions fail
    assert same.returncode == 0, same.stdout[-3000:]
    assert re.search(r"\d+ passed, \d+ xfailed", same.stdout.splitlines()[-1])  # known failures, expected
    assert "gate tau-airline/agent regressions <= 0: PASSED (0 of 210 decisions compared with the baseline)" in (
        _lines(same, "gate "))

    runs = {w: (r, _records(root / f"variant-n{w}.jsonl")) for w, r in variant.items()}
    run, records = runs[0]
    assert run.returncode == 1, run.stdout[-3000:]
    regressed = sorted(i for i, r in records.items() if (r.get("baseline") or {}).get("status") == "regression")
    assert regressed, "the variant over-calls where the accepted agent stopped"
    # each regression is the variant's re-read of the profile (where it should stop, act, or read another user)
    assert all([e.get("tool") for e in records[i]["verdict"]["emitted"]] == ["get_user_details"] for i in regressed)
    assert any(records[i]["class"] == "no_tool" and records[i]["verdict"]["kind"] == "tool_when_none_needed"
               for i in regressed)
    # the run names the regressed cases, the gate that failed and McNemar's p-value
    for rid in regressed:
        assert any(line.startswith(f"regression {rid}:") for line in run.stdout.splitlines()), rid
        assert f"regression: {rid}:" in run.stdout
    (gate,) = [line for line in _lines(run, "gate ") if " regressions <= 0: " in line]
    assert gate.startswith(f"gate tau-airline/agent regressions <= 0: FAILED ({len(regressed)} of 210 decisions")
    (mcnemar,) = _lines(run, "tau-airline/agent: McNemar exact p = ")
    report = json.loads((root / "variant-n0.json").read_text())
    (block,) = report["baseline"]["blocks"]
    p = block["mcnemar"]["p_value"]
    assert 0 < p < 0.05 and f"McNemar exact p = {p:.4g} (pass→fail {len(regressed)}, " in mcnemar, (mcnemar, p)
    assert report["gates"]["exit_status"] == 1

    # -n 2: the same exit status, gate lines, regressions and records
    run2, records2 = runs[2]
    assert run2.returncode == 1
    assert _lines(run2, "gate ") == _lines(run, "gate ")
    assert _lines(run2, "tau-airline/agent: McNemar") == [mcnemar]

    def comparable(recs: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
        return {i: (r["verdict"], r.get("baseline"), r["outcome"]) for i, r in recs.items()}

    assert comparable(records2) == comparable(records)

    # tooleffect compare on the two record logs gives the report's McNemar p-value
    done = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "compare", "accepted.jsonl",
                           "variant-n0.jsonl"], cwd=root, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 1, done.stderr  # the variant regressed
    assert mcnemar.split(": ", 1)[1].split(" (")[0] in done.stdout


@pytest.mark.parametrize("workers", [0, 2])
def test_an_agent_that_raises_is_an_error_not_a_verdict_under_gates(tmp_path: Path, workers: int) -> None:
    root = _project(tmp_path)
    (root / "raising.py").write_text("def decide(state):\n    raise RuntimeError('tool router down')\n")
    with ScriptedServer(_recorded_turns()) as srv:
        run = _run(root, "raising", "raising:decide", srv, "-k", "t00-", *(["-n", str(workers)] if workers else []))
    assert run.returncode == 1, run.stdout[-3000:]
    records = _records(root / "raising.jsonl")
    assert records and all(r["outcome"] == "error" and r["verdict"] is None for r in records.values())
    assert all("RuntimeError: tool router down" in r["error"]["traceback"] for r in records.values())
    assert re.search(rf"{len(records)} errors?", run.stdout.splitlines()[-1])
