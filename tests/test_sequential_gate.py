"""The sequential gate at run time: its table, the order it runs items in, the shared tally, and runs
that stop once the verdict is settled, at -n 0 and -n 2 (replayed decisions: no model turn)."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.ci.gate_rules import parse_gates
from pytest_tooleffect.ci.sequential_state import SqliteSettleStore, Tally
from pytest_tooleffect.collect.order import informative_first
from pytest_tooleffect.options import (
    INI_RATE_BACKEND,
    OPT_BASELINE,
    OPT_HTML,
    OPT_RECORDS,
    OPT_REPEATS,
    OPT_REPORT,
    OPT_SETTLE_KEY,
    OPT_SHARD,
    OPT_SUMMARY_MD,
)
from pytest_tooleffect.outcomes import SETTLE_BUDGET, SETTLED
from tests.sequential_family import agents, write_family

COUNT = 300
GATE = '[tool.tooleffect.gates."*"]\nsequential = {{alpha = 0.05, margin = 0.02, effect = 0.05{extra}}}\n'


# ------------------------------------------------------------------------------ the table


@pytest.mark.parametrize(("spec", "message"), [
    ("{alpha = 5}", "sequential.alpha: expected a fraction between 0 and 1 (0.05 is 5 points), got 5"),
    ("{margin = -0.1}", "sequential.margin: expected a fraction from 0 to below 1"),
    ("{budget_decisions = 0}", 'sequential.budget_decisions: expected a whole number of decisions >= 1 or "off"'),
    ("{budget_usd = -1}", "sequential.budget_usd: expected an amount in USD > 0"),
    ("{budget_usd = 0}", 'sequential.budget_usd: expected an amount in USD > 0 or "off"'),
    ("{budget_usd = 0.0}", 'sequential.budget_usd: expected an amount in USD > 0 or "off"'),
    ("{discordance = 1.5}", "sequential.discordance: expected a share from 0 to 1"),
    ("{alfa = 0.05}", "sequential.alfa: unknown key (known here: alpha, margin, beta, effect, discordance"),
    ("0.05", "sequential: must be a table, got 0.05"),
])
def test_a_bad_sequential_table_is_a_usage_error_naming_the_file_table_and_key(spec: str, message: str) -> None:
    import tomllib

    table = tomllib.loads(f'[tool.tooleffect.gates."demo/*"]\nsequential = {spec}\n')["tool"]["tooleffect"]["gates"]
    with pytest.raises(pytest.UsageError) as err:
        parse_gates(table, Path("pyproject.toml"))
    assert str(err.value).startswith('pyproject.toml: [tool.tooleffect.gates."demo/*"]: ')
    assert message in str(err.value)


def test_a_sequential_table_merges_key_by_key_and_off_removes_it() -> None:
    gates = parse_gates({"*": {"sequential": {"alpha": 0.01, "budget_usd": 2.0}},
                         "demo/*": {"sequential": {"margin": 0.02}},
                         "other/*": {"sequential": {"off": True}}}, Path("pyproject.toml"))
    merged = gates.for_block("demo", "p")
    assert merged.sequential is not None and merged.sequential_on
    assert (merged.sequential.alpha, merged.sequential.margin, merged.sequential.budget_usd) == (0.01, 0.02, 2.0)
    assert not gates.for_block("other", "p").sequential_on and gates.configured


# ------------------------------------------------------------------------------ the order


def test_the_order_puts_discordant_cases_first_and_keeps_every_prefix_representative() -> None:
    # 200 items: a fifth failed in the baseline; cases 0-9 were discordant among the baseline's trials
    items = [(n, "no_tool" if n % 4 == 0 else "single", "fail" if n % 5 == 0 else "pass") for n in range(200)]
    done = informative_first(items, lambda it: "discordant" if it[0] < 10 else "rest",
                             lambda it: f"{it[1]}/{it[2]}", seed="baseline-1")
    ordered = [items[i] for i in done.order]
    assert sorted(done.order) == list(range(200))  # every item once
    assert {it[0] for it in ordered[:10]} == set(range(10))  # the discordant cases first
    assert done.tiers == {"discordant": 10, "rest": 190}
    rest = ordered[10:]
    for end in (20, 50, 100, 190):  # every prefix of the rest holds the baseline's mix of failures and classes
        prefix = rest[:end]
        fails = sum(1 for it in prefix if it[2] == "fail")
        expected = end * sum(1 for it in rest if it[2] == "fail") / len(rest)
        assert abs(fails - expected) <= 2, (end, fails, expected)
        assert {it[1] for it in prefix} == {"single", "no_tool"}
    # deterministic for a seed; another seed, another order of the same strata
    assert informative_first(items, lambda it: "discordant" if it[0] < 10 else "rest",
                             lambda it: f"{it[1]}/{it[2]}", seed="baseline-1") == done
    other = informative_first(items, lambda it: "discordant" if it[0] < 10 else "rest",
                              lambda it: f"{it[1]}/{it[2]}", seed="baseline-2")
    assert other.order != done.order and other.tiers == done.tiers
    assert done.moved == sum(1 for pos, i in enumerate(done.order) if pos != i) > 0


def test_an_unknown_tier_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown tiers"):
        informative_first([1], lambda it: "hot", lambda it: "single")


# ------------------------------------------------------------------------------ the tally


def _add_many(path: str, n: int) -> None:
    store = SqliteSettleStore(Path(path))
    for i in range(n):
        store.add("demo/p", pair="regression" if i % 2 else "same", cost_usd=0.001, tokens=10)
    store.close()


def test_the_tally_file_counts_every_process_and_keeps_the_first_verdict(tmp_path: Path) -> None:
    path = tmp_path / "settle.sqlite"
    procs = [multiprocessing.get_context("spawn").Process(target=_add_many, args=(str(path), 50)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    store = SqliteSettleStore(path)
    t = store.read("demo/p")
    assert (t.decisions, t.pairs, t.regressions, t.tokens) == (150, 150, 75, 1500)
    assert t.cost_usd == pytest.approx(0.15)
    first = store.settle("demo/p", "regression", t)
    second = store.settle("demo/p", "no_regression", Tally(decisions=999))
    assert first.verdict == second.verdict == "regression" and second.at["decisions"] == 150
    assert store.read("other/p") == Tally()
    store.close()


# ------------------------------------------------------------------------------ runs


def sequential_baseline(pytester: pytest.Pytester, wrong: set[int], count: int = COUNT) -> None:
    from pytest_tooleffect.cli import main

    write_family(pytester.path, count, wrong)
    pytester.runpytest("cases/", "-q", f"{OPT_RECORDS}=base.jsonl")
    assert main(["baseline", "save", str(pytester.path / "base.jsonl"), "--out",
                 str(pytester.path / "baseline.json")]) == 0


def _report(pytester: pytest.Pytester, name: str = "r.json") -> dict[str, Any]:
    return json.loads((pytester.path / name).read_text())


@pytest.mark.parametrize("workers", [0, 2])
def test_a_planted_regression_stops_early_and_fails_with_the_saving(pytester: pytest.Pytester, workers: int) -> None:
    a = agents(COUNT)
    sequential_baseline(pytester, a["baseline"])
    write_family(pytester.path, COUNT, a["regressed"])
    pytester.makepyprojecttoml(GATE.format(extra=""))
    result = pytester.runpytest("cases/", f"{OPT_BASELINE}=baseline.json", f"{OPT_REPORT}=r.json",
                                f"{OPT_SUMMARY_MD}=s.md", f"{OPT_HTML}=r.html", *(["-n", str(workers)] if workers else []))
    assert result.ret == 1
    report = _report(pytester)
    (block,) = report["sequential"]["blocks"]
    assert block["verdict"] == "regression" and block["stopped_early"]
    saved = block["saved"]
    assert saved["decisions"] > 0 and saved["full_decisions"] == COUNT
    assert block["decisions_run"] + saved["decisions"] == COUNT  # nothing lost: made, or skipped as settled
    assert report["status"] == "complete"  # a settled skip is no gap
    check = subprocess.run([sys.executable, str(Path(__file__).resolve().parents[1] / "scripts" / "report-errors"),
                            str(pytester.path / "r.json")], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr  # make report's check lets settled skips through
    assert report["skipped"][0]["reasons"] == {SETTLED: saved["decisions"]}
    outcomes = result.parseoutcomes()
    assert outcomes["skipped"] == saved["decisions"]
    assert report["sequential"]["shared"] == ("file" if workers else "process")
    assert report["sequential"]["order"]["order"] == "informative-first"
    assert report["sequential"]["order"]["tiers"] == {"discordant": 0, "rest": COUNT}  # no repeats: no discordance
    (gate,) = report["gates"]["results"]
    assert gate["gate"] == "sequential" and gate["status"] == "failed"
    saving = f"stopped early: {saved['decisions']} of {COUNT} decisions skipped as settled"
    assert "### Sequential gates" in (pytester.path / "s.md").read_text() and saving in (pytester.path / "s.md").read_text()
    page = (pytester.path / "r.html").read_text()
    assert '<section id="sequential"' in page and saving in page
    result.stdout.fnmatch_lines([
        "*tooleffect sequential gates*",
        f"demo/replay: REGRESSION * stopped early: {saved['decisions']} of {COUNT} decisions skipped as settled*",
        "gate demo/replay sequential at alpha 0.05: FAILED (regression settled after *",
        "tooleffect gates: 0 passed, 1 failed, 0 not judged; 0 errors; exit 1: gates failed",
    ])


def test_a_spent_budget_ends_the_block_not_settled_and_never_passes(pytester: pytest.Pytester) -> None:
    a = agents(COUNT)
    sequential_baseline(pytester, a["baseline"])
    write_family(pytester.path, COUNT, a["unchanged"])
    pytester.makepyprojecttoml(GATE.format(extra=", budget_decisions = 20") + 'unjudged = "pass"\n')
    result = pytester.runpytest("cases/", f"{OPT_BASELINE}=baseline.json", f"{OPT_REPORT}=r.json")
    assert result.ret == 1
    report = _report(pytester)
    (block,) = report["sequential"]["blocks"]
    assert block["verdict"] == "not_settled" and block["decisions"] == 20
    assert block["budget_skipped"] == COUNT - 20 and "saved" not in block
    assert report["skipped"][0]["reasons"] == {SETTLE_BUDGET: COUNT - 20}
    assert report["status"] == "incomplete"  # what the budget left unsent is a gap
    result.stdout.fnmatch_lines(["gate demo/replay sequential at alpha 0.05: FAILED (NOT SETTLED: a budget was spent "
                                 "after 20 decisions*never a pass*"])


def test_without_a_baseline_the_sequential_gate_is_not_judged_and_nothing_is_skipped(
        pytester: pytest.Pytester) -> None:
    write_family(pytester.path, 30, set())
    pytester.makepyprojecttoml(GATE.format(extra=""))
    result = pytester.runpytest("cases/", f"{OPT_REPORT}=r.json")
    result.assert_outcomes(passed=30)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["gate demo/replay sequential at alpha 0.05: NOT JUDGED (no baseline*"])


# ------------------------------------------------------------------------------ shards, through Redis


def test_two_shards_at_once_share_one_tally_in_redis_and_both_stop(pytester: pytest.Pytester, redis_url: str,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    a = agents(COUNT)
    sequential_baseline(pytester, a["baseline"])
    write_family(pytester.path, COUNT, a["regressed"])
    pytester.makepyprojecttoml(GATE.format(extra=""))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                         os.environ.get("PYTHONPATH", "")])}
    procs = []
    for i in (1, 2):
        cmd = [sys.executable, "-m", "pytest", "cases/", "-q", "-p", "no:cacheprovider", f"{OPT_SHARD}={i}/2",
               "-o", f"{INI_RATE_BACKEND}={redis_url}#seq", f"{OPT_SETTLE_KEY}=run-1", f"{OPT_BASELINE}=baseline.json",
               f"{OPT_REPORT}=shard{i}.json", f"{OPT_RECORDS}=shard{i}.jsonl", *(["-n", "2"] if i == 2 else [])]
        procs.append(subprocess.Popen(cmd, cwd=pytester.path, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    outs = [p.communicate(timeout=600)[0] for p in procs]
    reports = [_report(pytester, f"shard{i}.json") for i in (1, 2)]
    blocks = [r["sequential"]["blocks"][0] for r in reports]
    for p, out, r, b in zip(procs, outs, reports, blocks, strict=True):
        assert p.returncode == 1, out[-3000:]
        assert r["sequential"]["shared"] == "redis" and b["verdict"] == "regression"
    # one stopping point for the run: the counts when the first shard's decision settled it, seen by both
    assert {(b["decisions"], b["pairs"], b["regressions"]) for b in blocks} == {
        (blocks[0]["decisions"], blocks[0]["pairs"], blocks[0]["regressions"])}
    made = sum(len((pytester.path / f"shard{i}.jsonl").read_text().splitlines()) for i in (1, 2))
    settled = sum(r["skipped"][0]["reasons"].get(SETTLED, 0) for r in reports if r["skipped"])
    assert made == max(b["decisions_run"] for b in blocks) and made + settled == COUNT and settled > 0
    # the stop reached both shards: each skipped its items left once the run's verdict was settled
    assert all(r["skipped"] and r["skipped"][0]["reasons"].get(SETTLED, 0) > 0 for r in reports)
    # the shards' logs merged: the gate judged again on them fails, and the settled skips are no gap
    from pytest_tooleffect.cli import main

    capsys.readouterr()
    assert main(["report", str(pytester.path / "shard1.jsonl"), str(pytester.path / "shard2.jsonl"), "--baseline",
                 str(pytester.path / "baseline.json"), "--gates", str(pytester.path / "pyproject.toml"),
                 "--json"]) == 1
    merged = json.loads(capsys.readouterr().out)
    (block,) = merged["sequential"]["blocks"]
    assert block["verdict"] == "regression" and block["saved"]["decisions"] == settled
    assert merged["status"] == "complete" and not merged["gates"]["passed"]


def test_a_sharded_run_with_redis_and_no_settle_key_is_a_usage_error(pytester: pytest.Pytester) -> None:
    a = agents(30)
    sequential_baseline(pytester, a["baseline"], 30)
    pytester.makepyprojecttoml(GATE.format(extra=""))
    result = pytester.runpytest("cases/", f"{OPT_SHARD}=1/2", "-o", f"{INI_RATE_BACKEND}=redis://127.0.0.1:1/0",
                                f"{OPT_BASELINE}=baseline.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{OPT_SETTLE_KEY}: a sharded run with sequential gates and ini "
                                 f"{INI_RATE_BACKEND} needs a key every shard of the run gives*"])


def test_with_the_gates_switched_off_nothing_is_skipped(pytester: pytest.Pytester) -> None:
    a = agents(60)
    sequential_baseline(pytester, a["baseline"], 60)
    write_family(pytester.path, 60, a["regressed"])
    pytester.makepyprojecttoml(GATE.format(extra=", budget_decisions = 5"))
    result = pytester.runpytest("cases/", f"{OPT_BASELINE}=baseline.json", "-p", "no:tooleffect-gates")
    assert "skipped" not in result.parseoutcomes()


def test_cases_discordant_among_the_baseline_trials_run_first_with_all_their_trials(
        pytester: pytest.Pytester) -> None:
    write_family(pytester.path, 40, set())
    pytester.runpytest("cases/", "-q", f"{OPT_REPEATS}=2", f"{OPT_RECORDS}=base.jsonl")
    from pytest_tooleffect.cli import main

    assert main(["baseline", "save", str(pytester.path / "base.jsonl"), "--out",
                 str(pytester.path / "baseline.json")]) == 0
    data = json.loads((pytester.path / "baseline.json").read_text())
    flaky = ("case-0007", "case-0031")  # their second trial failed in the baseline: discordant cases
    for d in data["decisions"].values():
        if d["case_id"] in flaky and d["trial"] == 2:
            d.update(passed=False, kind="tool_when_none_needed" if d["class"] == "no_tool" else "wrong_tool",
                     name_ok=False, name_args_ok=False)
    (pytester.path / "baseline.json").write_text(json.dumps(data))
    pytester.makepyprojecttoml(GATE.format(extra=""))
    pytester.runpytest("cases/", f"{OPT_REPEATS}=2", f"{OPT_BASELINE}=baseline.json", f"{OPT_REPORT}=r.json",
                       f"{OPT_RECORDS}=run.jsonl")
    ran = [json.loads(x)["case_id"] for x in (pytester.path / "run.jsonl").read_text().splitlines()]
    assert sorted(ran[:4]) == sorted([*flaky, *flaky])  # both trials of both discordant cases, first
    assert _report(pytester)["sequential"]["order"]["tiers"] == {"discordant": 4, "rest": 76}


def test_a_shared_tally_that_fails_keeps_every_record_and_the_gate_is_not_settled(pytester: pytest.Pytester) -> None:
    a = agents(40)
    sequential_baseline(pytester, a["baseline"], 40)
    write_family(pytester.path, 40, a["regressed"])
    pytester.makepyprojecttoml(GATE.format(extra=""))
    result = pytester.runpytest("cases/", "-o", f"{INI_RATE_BACKEND}=redis://127.0.0.1:1/0", f"{OPT_SETTLE_KEY}=run-2",
                                f"{OPT_BASELINE}=baseline.json", f"{OPT_RECORDS}=r.jsonl", f"{OPT_REPORT}=r.json")
    assert result.ret == 1
    assert len((pytester.path / "r.jsonl").read_text().splitlines()) == 40  # nothing lost, nothing skipped
    (block,) = _report(pytester)["sequential"]["blocks"]
    assert block["verdict"] == "not_settled" and "the shared tally failed" in block["why"]
    result.stdout.fnmatch_lines(["gate demo/replay sequential at alpha 0.05: FAILED (NOT SETTLED: the shared tally "
                                 "failed (*redis://127.0.0.1:1/0*"])


def test_a_block_with_no_decision_in_the_baseline_is_not_judged_with_the_reason(pytester: pytest.Pytester) -> None:
    sequential_baseline(pytester, set(), count=30)  # saved before the shuffled catalog was asked for: its block is new
    pytester.makepyprojecttoml(GATE.format(extra=""))
    result = pytester.runpytest("cases/", f"{OPT_BASELINE}=baseline.json", f"{OPT_REPORT}=r.json",
                                "--tooleffect-perturb=shuffle")
    gates = {g["policy"]: g for g in _report(pytester)["gates"]["results"] if g["gate"] == "sequential"}
    assert gates["replay+shuffle"]["status"] == "not_judged"
    assert gates["replay"]["status"] != "not_judged"  # the original's block pairs with the baseline
    result.stdout.fnmatch_lines(["gate demo/replay+shuffle sequential at alpha 0.05: NOT JUDGED (no decision of this "
                                 "block is in the baseline*"])
@pytest.mark.parametrize(("verdict", "why", "said"), [
    ("not_settled", "NOT SETTLED: a budget was spent after 20 decisions ($0.000000) before a verdict; never a pass",
     "demo/replay: NOT SETTLED: a budget was spent after 20 decisions"),
    ("regression", "after 40 of 300 pairs", "demo/replay: REGRESSION — after 40 of 300 pairs: 1 regressions"),
    ("no_regression", "after 120 of 300 pairs", "demo/replay: NO REGRESSION — after 120 of 300 pairs: "),
])
def test_the_sequential_line_says_its_verdict_once(verdict: str, why: str, said: str) -> None:
    from pytest_tooleffect.report.sequential_model import RunOrder, SequentialBlock, SequentialSection

    block = SequentialBlock(family="demo", policy="replay", alpha=0.05, margin=0.02, beta=0.2, effect=0.05,
                            budget_decisions=20, budget_usd=None, verdict=verdict, why=why, stopped_early=False,
                            decisions=20, pairs=20, regressions=1, improvements=0, cost_usd=0.0, decisions_run=20)
    section = SequentialSection(test="t", shared="process", order=RunOrder(order="collection", tiers={}, moved=0),
                                blocks=[block])
    (line,) = section.lines()[1:]
    assert line.startswith(said), line
    head = verdict.upper().replace("_", " ")
    assert line.count(head) == 1, line
