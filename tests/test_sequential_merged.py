"""A report merged from record logs judges the sequential gate again on the merged records: the
shards' logs of a run stopped early (each shard settling on its own decisions), one run's log (its
verdict and counts are the run's), and logs that lack a shard (not yet: never a pass)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_tooleffect.ci.sequential_merged import replay_order
from pytest_tooleffect.options import OPT_BASELINE, OPT_RECORDS, OPT_REPORT, OPT_SHARD
from pytest_tooleffect.outcomes import SETTLED
from pytest_tooleffect.scoring.record import Record
from tests.sequential_family import agents, write_family

COUNT = 300
#: the agents flip 4 % of the pairs when nothing changed: the bets are tuned for it, the margin is 5 points
GATE = ('[tool.tooleffect.gates."*"]\n'
        "sequential = {alpha = 0.05, margin = 0.05, effect = 0.05, discordance = 0.04}\n")


def _baseline(pytester: pytest.Pytester, wrong: set[int], count: int = COUNT) -> None:
    from pytest_tooleffect.cli import main

    write_family(pytester.path, count, wrong)
    pytester.runpytest("cases/", "-q", f"{OPT_RECORDS}=base.jsonl")
    assert main(["baseline", "save", str(pytester.path / "base.jsonl"), "--out",
                 str(pytester.path / "baseline.json")]) == 0
    saved = json.loads((pytester.path / "baseline.json").read_text())
    saved["created"] = "2026-01-01T00:00:00+00:00"  # it seeds the run's order: the same order in every test run
    (pytester.path / "baseline.json").write_text(json.dumps(saved))


def _shards(pytester: pytest.Pytester, wrong: set[int], count: int = COUNT, shards: int = 2) -> list[dict[str, Any]]:
    """The agent that gets ``wrong`` wrong, run as ``shards`` shards (no shared backend: each shard settles
    on its own decisions); their reports."""
    write_family(pytester.path, count, wrong)
    pytester.makepyprojecttoml(GATE)
    out = []
    for i in range(1, shards + 1):
        pytester.runpytest("cases/", "-q", f"{OPT_SHARD}={i}/{shards}", f"{OPT_BASELINE}=baseline.json",
                           f"{OPT_RECORDS}=logs/shard-{i}.jsonl", f"{OPT_REPORT}=shard-{i}.json")
        out.append(json.loads((pytester.path / f"shard-{i}.json").read_text()))
    return out


def _merged(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], *logs: str) -> tuple[int, dict[str, Any], str]:
    """``tooleffect report LOGS --baseline --gates``: its exit status, its JSON report, its terminal text."""
    from pytest_tooleffect.cli import main

    args = [*(str(pytester.path / p) for p in logs), "--baseline", str(pytester.path / "baseline.json"),
            "--gates", str(pytester.path / "pyproject.toml")]
    capsys.readouterr()
    status = main(["report", *args, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert main(["report", *args]) == status
    return status, report, capsys.readouterr().out


def test_merged_shards_of_a_planted_regression_fail_the_sequential_gate_with_the_saving(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    a = agents(COUNT)
    _baseline(pytester, a["baseline"])
    reports = _shards(pytester, a["regressed"])
    skipped = sum(r["skipped"][0]["reasons"][SETTLED] for r in reports)
    assert all(r["sequential"]["blocks"][0]["verdict"] == "regression" for r in reports) and skipped > 0
    status, report, text = _merged(pytester, capsys, "logs")
    assert status == 1, (text, [r["sequential"] for r in reports])
    (block,) = report["sequential"]["blocks"]
    assert report["sequential"]["shared"] == "logs"
    assert block["verdict"] == "regression" and block["stopped_early"]
    made = sum(len((pytester.path / f"logs/shard-{i}.jsonl").read_text().splitlines()) for i in (1, 2))
    assert block["decisions_run"] == made and block["saved"]["decisions"] == skipped == COUNT - made
    assert block["saved"]["full_decisions"] == COUNT
    assert block["pairs"] <= made and block["regressions"] > block["improvements"]
    # the items the shards skipped as settled are no gap: the merge is complete, as the run was
    assert report["status"] == "complete" and report["shards"]["merged"] == [1, 2]
    assert report["selection"]["not_recorded"] == report["selection"]["settled"] == skipped
    (gate,) = [g for g in report["gates"]["results"] if g["gate"] == "sequential"]
    assert gate["status"] == "failed" and gate["n"] == block["pairs"]
    assert f"stopped early: {skipped} of {COUNT} decisions skipped as settled" in text
    assert "gate demo/replay sequential at alpha 0.05: FAILED (regression settled after" in text


def test_merged_shards_of_an_unchanged_agent_pass_on_the_margin(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    a = agents(COUNT)
    _baseline(pytester, a["baseline"])
    _shards(pytester, a["unchanged"])
    status, report, text = _merged(pytester, capsys, "logs/shard-1.jsonl", "logs/shard-2.jsonl")
    (block,) = report["sequential"]["blocks"]
    assert block["verdict"] == "no_regression" and block["saved"]["decisions"] > 0
    assert report["status"] == "complete" and report["gates"]["passed"]
    assert status == 0
    assert "gate demo/replay sequential at alpha 0.05: PASSED (no regression beyond the margin of 5 points" in text


def test_one_runs_log_gives_the_runs_own_verdict_and_counts(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    a = agents(COUNT)
    _baseline(pytester, a["baseline"])
    write_family(pytester.path, COUNT, a["regressed"])
    pytester.makepyprojecttoml(GATE)
    pytester.runpytest("cases/", f"{OPT_BASELINE}=baseline.json", f"{OPT_RECORDS}=r.jsonl", f"{OPT_REPORT}=r.json")
    (run,) = json.loads((pytester.path / "r.json").read_text())["sequential"]["blocks"]
    status, report, _ = _merged(pytester, capsys, "r.jsonl")
    (block,) = report["sequential"]["blocks"]
    keys = ("verdict", "why", "decisions", "pairs", "regressions", "improvements", "decisions_run", "saved")
    assert {k: block[k] for k in keys} == {k: run[k] for k in keys}
    assert status == 1 and report["status"] == "complete"


def test_logs_that_lack_a_shard_and_settle_nothing_are_not_yet_and_never_pass(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    a = agents(12)  # too few pairs for any verdict
    _baseline(pytester, a["baseline"], 12)
    _shards(pytester, a["unchanged"], 12)
    status, report, text = _merged(pytester, capsys, "logs/shard-1.jsonl")
    (block,) = report["sequential"]["blocks"]
    assert block["verdict"] == "not_yet" and "saved" not in block
    assert report["status"] == "incomplete" and status == 1
    assert "gate demo/replay sequential at alpha 0.05: FAILED (NOT YET: no verdict after" in text
    # the whole run's logs: its items ran out before a verdict, NOT SETTLED
    status, report, _ = _merged(pytester, capsys, "logs")
    assert report["sequential"]["blocks"][0]["verdict"] == "not_settled" and status == 1


def _rec(shard: int, n: int) -> Record:
    return Record.model_validate({
        "id": f"demo/c{shard}-{n}[p]", "family": "demo", "case_id": f"c{shard}-{n}", "policy": "p", "outcome": "error",
        "class": "single", "bucket": "last", "step": 0, "run_length": 1, "xfail": False, "label_hash": "0" * 16,
        "verdict": None, "no_tool_failure": None, "cost": {}, "error": {"type": "Timeout", "message": "m"}, "source": {"kind": "authored"},
        "shard": {"index": shard, "count": 2}})


def test_the_shards_records_are_interleaved_in_proportion_each_in_its_own_order() -> None:
    one = [_rec(1, n) for n in range(4)]
    two = [_rec(2, n) for n in range(2)]
    got = [r.case_id for r in replay_order([*one, *two])]
    assert got == ["c1-0", "c1-1", "c2-0", "c1-2", "c1-3", "c2-1"]


def test_a_missing_shard_is_never_explained_away_into_a_pass(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    a = agents(COUNT)
    _baseline(pytester, a["baseline"])
    _shards(pytester, a["unchanged"])
    status, report, _ = _merged(pytester, capsys, "logs/shard-1.jsonl")  # shard 2 left out
    assert report["sequential"]["blocks"][0]["verdict"] == "no_regression"  # on shard 1's records
    assert report["status"] == "incomplete" and report["shards"]["missing"] == [2] and status == 1
