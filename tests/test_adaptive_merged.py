"""Adaptive repeats in a report made from record logs (``tooleffect report``): one run's log and the shard
logs of a run give the run's ``repeats`` (steps, first-k pass^k, trials saved), and the trials skipped as
``repeats settled`` are no gap; the CI job summary's adaptive part; adaptive repeats under a sequential gate
(no model turn is sent for an item either of them skipped).  Live against the scripted server on 127.0.0.1."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import jsonschema
import pytest

from pytest_tooleffect.options import (
    OPT_API_BASE,
    OPT_BASELINE,
    OPT_MODEL,
    OPT_RECORDS,
    OPT_REPEATS,
    OPT_REPORT,
    OPT_SHARD,
    OPT_SUMMARY_MD,
)
from pytest_tooleffect.outcomes import REPEATS_SETTLED, SETTLED
from pytest_tooleffect.scoring.record import record_schema
from pytest_tooleffect.servers.scripted import ScriptedServer
from tests.sequential_family import write_family
from tests.test_adaptive_run import DESIGN, K_STAR, MODEL, SCRIPT, counting_agent, scripted_agent

#: each case's steps as the run reports them (tests/test_adaptive_run.py's script)
STEPS = {
    "case-0000": (5, 5, 0, "stable", "PPPPP"),
    "case-0001": (5, 0, 0, "stable", "FFFFF"),
    "case-0002": (2, 1, 0, "flaky", "PF"),
    "case-0003": (4, 3, 0, "flaky", "PPPF"),
    "case-0004": (4, 4, 1, "not_settled", "PPPP"),
    "case-0005": (2, 1, 0, "flaky", "FP"),
}
#: the terminal's adaptive line of the scripted run (ci/adaptive_run.summary_line)
LINE = ("demo/openai/local-test: 2 stable, 3 flaky, 1 not settled of 6 cases; 22 trials run and 1 error against 30 "
        "at k*=5 everywhere (7 saved: ~840 tokens, 7 items skipped as 'repeats settled'); pass^1 66.7 %, "
        "pass^5 20.0 %; verdict flips on 50.0 % of cases (--tooleffect-repeats adaptive: alpha 0.25, "
        "tolerance 0.25, max_trials 50)")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write_family(pytester.path, len(SCRIPT))
    pytester.makepyprojecttoml(DESIGN)
    return pytester


def _run(pytester: pytest.Pytester, *extra: str) -> tuple[Any, Counter[int]]:
    answer, sent = scripted_agent()
    with ScriptedServer(answer) as srv:
        result = pytester.runpytest("cases/", "-q", f"{OPT_MODEL}={MODEL}", f"{OPT_API_BASE}={srv.base_url}",
                                    *extra)
    return result, sent


def _report(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], *logs: str
            ) -> tuple[int, dict[str, Any], str]:
    """``tooleffect report LOGS``: its exit status, its JSON report, its terminal text."""
    from pytest_tooleffect.cli import main

    args = [str(pytester.path / p) for p in logs]
    capsys.readouterr()
    status = main(["report", *args, "--json"])
    report = json.loads(capsys.readouterr().out)
    assert main(["report", *args]) == status
    return status, report, capsys.readouterr().out


def _steps(repeats: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    return {c["case_id"]: (c["trials"], c["passes"], c["errors"], c["step"], c["verdicts"])
            for c in repeats["adaptive"]["cases"]}


def test_one_runs_log_reports_the_runs_adaptive_repeats_and_its_settled_trials_are_no_gap(
        project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    result, sent = _run(project, f"{OPT_REPEATS}=adaptive", f"{OPT_REPORT}=run.json", f"{OPT_RECORDS}=r.jsonl",
                        f"{OPT_SUMMARY_MD}=s.md")
    assert sum(sent.values()) == 23, result.outlines[-20:]
    run = json.loads((project.path / "run.json").read_text())
    records = [json.loads(x) for x in (project.path / "r.jsonl").read_text().splitlines()]
    # every record says the run was adaptive, and its design
    assert all(r["adaptive"] == {"alpha": 0.25, "tolerance": 0.25, "max_trials": 50} for r in records)
    for r in records:  # the generated schema knows the key
        jsonschema.validate(r, record_schema())
    status, report, text = _report(project, capsys, "r.jsonl")
    (block,) = report["blocks"]
    assert block["repeats"] == run["blocks"][0]["repeats"]  # the run's: steps, first-k pass^k, the saving
    assert _steps(block["repeats"]) == STEPS and block["repeats"]["estimator"] == "first_k"
    # the 7 trials no case needed are settled skips, no gap: the run's status (the provider error's record keeps
    # both from complete), and no part of the run missing: exit 0
    assert report["status"] == run["status"] and status == 0, text
    assert "incomplete:" not in capsys.readouterr().err
    sel = report["selection"]
    assert (sel["selected"], sel["recorded"], sel["not_recorded"], sel["settled"], sel["short"]) == (30, 23, 7, 7, [])
    assert "tooleffect adaptive repeats" in text and LINE in text
    # the page drawn from the log: the run's adaptive part
    from pytest_tooleffect.cli import main

    assert main(["html", str(project.path / "r.jsonl"), "--out", str(project.path / "r.html"),
                 "--cases", str(project.path / "cases")]) == 0
    assert ("adaptive repeats (alpha 0.25, tolerance 0.25, k* 5): 2 stable, 3 flaky, 1 not settled; 22 trials run "
            "and 1 errors against 30 at k* everywhere (7 saved)") in (project.path / "r.html").read_text()
    # the CI job summary: the same line per block, escaped as Markdown
    md = (project.path / "s.md").read_text()
    assert "### Adaptive repeats" in md
    assert "- " + LINE.replace("*", "\\*").replace("~", "\\~") in md


def test_shard_logs_merged_give_the_runs_adaptive_repeats(
        project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    seen: Counter[int] = Counter()
    for i in (1, 2):
        result, sent = _run(project, f"{OPT_REPEATS}=adaptive", f"{OPT_SHARD}={i}/2",
                            f"{OPT_RECORDS}=logs/shard-{i}.jsonl")
        assert sent and not set(seen) & set(sent), result.outlines[-20:]  # both shards hold cases, none in both
        seen.update(sent)
    status, report, text = _report(project, capsys, "logs")
    (block,) = report["blocks"]
    assert _steps(block["repeats"]) == STEPS
    ada = block["repeats"]["adaptive"]
    assert (ada["trials_run"], ada["errors"], ada["skipped"], ada["trials_saved"]) == (22, 1, 7, 7)
    assert block["repeats"]["pass_hat_k"] == {"1": 4 / 6, "2": 3 / 6, "3": 3 / 6, "4": 2 / 6, "5": 1 / 5}
    assert report["shards"]["missing"] == [] and status == 0, text
    assert report["selection"]["settled"] == 7 and report["selection"]["short"] == []
    assert LINE in text
    # one shard's log: the other's cases are missing, never explained away as settled
    status, report, _ = _report(project, capsys, "logs/shard-1.jsonl")
    assert report["status"] == "incomplete" and report["shards"]["missing"] == [2] and status == 1


def test_a_log_cut_short_inside_a_case_is_a_gap(project: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    _run(project, f"{OPT_REPEATS}=adaptive", f"{OPT_RECORDS}=r.jsonl")
    lines = (project.path / "r.jsonl").read_text().splitlines()
    cut = [x for x in lines if json.loads(x)["case_id"] != "case-0000" or json.loads(x)["trial"] <= 3]
    assert len(cut) == len(lines) - 2
    (project.path / "cut.jsonl").write_text("\n".join(cut) + "\n")
    status, report, _ = _report(project, capsys, "cut.jsonl")
    # case-0000 is three passes short of stable: its two lost trials are missing, not settled
    assert report["status"] == "incomplete" and status == 1
    assert report["selection"]["settled"] == 7 and report["selection"]["not_recorded"] == 9


def test_fixed_repeats_records_carry_no_adaptive_design(project: pytest.Pytester,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    _run(project, f"{OPT_REPEATS}=2", f"{OPT_RECORDS}=r.jsonl")
    records = [json.loads(x) for x in (project.path / "r.jsonl").read_text().splitlines()]
    assert len(records) == 12 and not any("adaptive" in r for r in records)
    _, report, _ = _report(project, capsys, "r.jsonl")
    assert report["blocks"][0]["repeats"]["estimator"] == "combinatorial"


# ------------------------------------------------------------------------------ with a sequential gate

#: 24 cases: a case n % 4 == 0 is flaky in the baseline and now (right, then wrong: adaptive repeats stop it at
#: its second trial; the sequential gate runs such discordant cases first); the rest were right in the baseline
#: and are wrong every time now (a planted regression the sequential gate settles early)
CASES = 24
GATE = ('[tool.tooleffect.gates."*"]\n'
        "sequential = {alpha = 0.05, margin = 0.02, effect = 0.05}\n")


def _agent(regressed: bool) -> tuple[Any, Counter[int]]:
    return counting_agent(lambda n, t: "R" if (t % 2 == 1 if n % 4 == 0 else not regressed) else "W")


def test_adaptive_repeats_under_a_sequential_gate_send_no_turn_for_an_item_either_skipped(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_tooleffect.cli import main

    write_family(pytester.path, CASES)
    pytester.makepyprojecttoml(DESIGN)
    answer, _ = _agent(regressed=False)
    with ScriptedServer(answer) as srv:  # the baseline: K_STAR fixed trials a case, the ids adaptive trials have
        pytester.runpytest("cases/", "-q", "-n", "0", f"{OPT_MODEL}={MODEL}", f"{OPT_API_BASE}={srv.base_url}",
                           f"{OPT_REPEATS}={K_STAR}", f"{OPT_RECORDS}=base.jsonl")
    assert main(["baseline", "save", str(pytester.path / "base.jsonl"), "--out",
                 str(pytester.path / "baseline.json")]) == 0
    saved = json.loads((pytester.path / "baseline.json").read_text())
    saved["created"] = "2026-01-01T00:00:00+00:00"  # it seeds the run's order: the same order in every test run
    (pytester.path / "baseline.json").write_text(json.dumps(saved))
    pytester.makepyprojecttoml(DESIGN + GATE)
    answer, sent = _agent(regressed=True)
    with ScriptedServer(answer) as srv:
        result = pytester.runpytest("cases/", "-q", "-n", "0", f"{OPT_MODEL}={MODEL}",
                                    f"{OPT_API_BASE}={srv.base_url}", f"{OPT_REPEATS}=adaptive",
                                    f"{OPT_BASELINE}=baseline.json", f"{OPT_REPORT}=r.json", f"{OPT_RECORDS}=r.jsonl")
    report = json.loads((pytester.path / "r.json").read_text())
    records = [json.loads(x) for x in (pytester.path / "r.jsonl").read_text().splitlines()]
    (seq,) = report["sequential"]["blocks"]
    assert seq["verdict"] == "regression" and seq["stopped_early"], result.outlines[-20:]
    assert report["sequential"]["order"]["tiers"]["discordant"] == 6 * K_STAR  # the flaky cases' items first
    reasons = report["skipped"][0]["reasons"]
    assert reasons[SETTLED] > 0 and reasons[REPEATS_SETTLED] == 6 * (K_STAR - 2), reasons  # the flaky: 2 trials
    assert reasons[SETTLED] + reasons[REPEATS_SETTLED] + len(records) == CASES * K_STAR
    # no model turn for an item either of them skipped: one request per record, case by case
    made = Counter(int(r["case_id"][5:]) for r in records)
    assert sent == made
    ada = report["blocks"][0]["repeats"]["adaptive"]
    assert ada["skipped"] == reasons[REPEATS_SETTLED] and ada["trials_run"] == len(records)
    assert seq["decisions_run"] == len(records)
    assert report["status"] == "complete"  # both kinds of skip are settled: no gap
    result.stdout.fnmatch_lines(["*tooleffect sequential gates*", "*tooleffect adaptive repeats*"])
    # the run's log, reported with its baseline and gates: both sections as the run had them, both skips no gap
    from pytest_tooleffect.cli import main as cli

    args = [str(pytester.path / "r.jsonl"), "--baseline", str(pytester.path / "baseline.json"),
            "--gates", str(pytester.path / "pyproject.toml"), "--json"]
    capsys.readouterr()
    status = cli(["report", *args])
    merged = json.loads(capsys.readouterr().out)
    (mseq,) = merged["sequential"]["blocks"]
    keys = ("verdict", "decisions", "pairs", "regressions", "improvements", "decisions_run", "saved")
    assert {k: mseq[k] for k in keys} == {k: seq[k] for k in keys}
    assert merged["blocks"][0]["repeats"] == report["blocks"][0]["repeats"]
    assert merged["status"] == "complete" and status == 1  # the regression fails the gate, as in the run
    assert merged["selection"]["settled"] == reasons[SETTLED] + reasons[REPEATS_SETTLED]
