"""Adaptive repeats in a run (``--tooleffect-repeats adaptive``, :mod:`pytest_tooleffect.ci.adaptive_run`),
live against the scripted model server on 127.0.0.1: a stable case stops at k*, a flaky case at its first
flip, a provider error is no verdict; at ``-n 0`` and ``-n 2``; the report's figures."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_tooleffect.ci.adaptive_repeats import RepeatDesign, trials_to_stable
from pytest_tooleffect.ci.adaptive_run import adaptive_summary, design_of_table, first_k_pass_hat
from pytest_tooleffect.options import OPT_API_BASE, OPT_HTML, OPT_MODEL, OPT_RECORDS, OPT_REPEATS, OPT_REPORT
from pytest_tooleffect.outcomes import REPEATS_SETTLED
from pytest_tooleffect.report.model import Report
from pytest_tooleffect.scoring.record import Record
from pytest_tooleffect.servers.scripted import Reply, ScriptedServer
from tests.conftest import generated_report_schema
from tests.sequential_family import single, write_family

REPO = Path(__file__).resolve().parents[1]
MODEL = "openai/local-test"
#: k* = 5 at alpha 0.25 and tolerance 0.25: 0.75^5 + 0.25^5 = 0.238 <= 0.25 < 0.75^4 + 0.25^4
DESIGN = "[tool.tooleffect.repeats]\nalpha = 0.25\ntolerance = 0.25\n"
K_STAR = 5
#: the case number in a request's messages (the demo family's cases say ``[case-N]``)
CASE_MARK = re.compile(r"\[case-(\d+)\]")
#: each case's answers by trial (R right, W wrong, E a provider error: HTTP 400, never retried), the last repeated
SCRIPT = {0: "R", 1: "W", 2: "RW", 3: "RRRW", 4: "ER", 5: "WR"}


def counting_agent(answer_of: Callable[[int, int], str]) -> tuple[Any, Counter[int]]:
    """The scripted server's answer function, and the requests it got per case number: ``answer_of(n, t)``
    says how case ``n`` is answered at its ``t``-th request (1-based): ``R`` right, ``W`` wrong, ``E`` a
    provider error (HTTP 400, never retried).
    """
    sent: Counter[int] = Counter()
    lock = threading.Lock()

    def answer(body: Mapping[str, Any]) -> Reply:
        n = int(CASE_MARK.search(json.dumps(body.get("messages") or []))[1])  # type: ignore[index]
        with lock:
            sent[n] += 1
            what = answer_of(n, sent[n])
        if what == "E":
            return Reply(status=400, error_message="scripted bad request")
        calls = single(n) == (what == "R")  # a single case done right, or a no-tool case done wrong, calls the tool
        return Reply(tool_calls=[("read_thread", '{"thread_id": "th-1"}')]) if calls else Reply(text="Done.")

    return answer, sent


def scripted_agent() -> tuple[Any, Counter[int]]:
    """:func:`counting_agent` answering by :data:`SCRIPT`."""
    return counting_agent(lambda n, t: SCRIPT[n][min(t, len(SCRIPT[n])) - 1])


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    write_family(pytester.path, len(SCRIPT))
    pytester.makepyprojecttoml(DESIGN)
    return pytester


def _run(pytester: pytest.Pytester, *extra: str) -> tuple[Any, dict[str, Any], Counter[int]]:
    answer, sent = scripted_agent()
    with ScriptedServer(answer) as srv:
        result = pytester.runpytest("cases/", "-q", "-rs", f"{OPT_MODEL}={MODEL}", f"{OPT_API_BASE}={srv.base_url}",
                                    f"{OPT_REPEATS}=adaptive", f"{OPT_REPORT}=report.json",
                                    f"{OPT_RECORDS}=records.jsonl", f"{OPT_HTML}=report.html", *extra)
    return result, json.loads((pytester.path / "report.json").read_text()), sent


@pytest.mark.parametrize("extra", [[], ["-n", "2"], ["-n", "2", "--tooleffect-concurrency=1"]],
                         ids=["n0", "n2", "n2-one-turn-at-a-time"])  # the last: xdist's scheduler is adaptive_run's
def test_stable_cases_stop_at_k_star_and_flaky_ones_at_their_first_flip(project: pytest.Pytester,
                                                                        extra: list[str]) -> None:
    result, report, sent = _run(project, *extra)
    # requests per case: k* for a stable case, up to its first flip for a flaky one, the error's item used up
    assert dict(sent) == {0: K_STAR, 1: K_STAR, 2: 2, 3: 4, 4: K_STAR, 5: 2}
    outcomes = result.parseoutcomes()
    assert outcomes["skipped"] == 6 * K_STAR - sum(sent.values()) == 7
    assert outcomes["errors"] == 1  # the provider error: an error outcome, never a verdict
    assert outcomes["passed"] + outcomes["failed"] == 22
    Report.model_validate(report)
    jsonschema.validate(report, generated_report_schema())
    (block,) = report["blocks"]
    rep = block["repeats"]
    ada = rep["adaptive"]
    steps = {c["case_id"]: (c["trials"], c["passes"], c["errors"], c["step"], c["verdicts"]) for c in ada["cases"]}
    assert steps == {
        "case-0000": (5, 5, 0, "stable", "PPPPP"),
        "case-0001": (5, 0, 0, "stable", "FFFFF"),
        "case-0002": (2, 1, 0, "flaky", "PF"),
        "case-0003": (4, 3, 0, "flaky", "PPPF"),
        "case-0004": (4, 4, 1, "not_settled", "PPPP"),  # its error took an item: out of items before k*
        "case-0005": (2, 1, 0, "flaky", "FP"),
    }
    assert (ada["k_star"], ada["items_per_case"], ada["stable"], ada["flaky"], ada["not_settled"]) == (5, 5, 2, 3, 1)
    assert (ada["trials_run"], ada["errors"], ada["skipped"], ada["full_trials"], ada["trials_saved"]) == (
        22, 1, 7, 30, 7)
    # the saving at the block's mean per scored trial: the scripted server counts 100 + 20 tokens; no price known
    assert (ada["saved_tokens"], ada["saved_cost_usd"]) == (7 * 120, None)
    assert rep["estimator"] == "first_k" and rep["cases"] == 6 and rep["trials"] == 5
    # pass^k: the share of cases whose first k trials all passed (case-0004 is left out at k = 5: no flip, 4 trials)
    assert rep["pass_hat_k"] == {"1": 4 / 6, "2": 3 / 6, "3": 3 / 6, "4": 2 / 6, "5": 1 / 5}
    assert rep["flip_share"] == 0.5
    # the skipped trials are not a gap: only the provider error keeps the run from complete
    assert report["skipped"][0]["reasons"] == {REPEATS_SETTLED: 7}
    page = (project.path / "report.html").read_text()
    assert "<p>repeats: 22 adaptive trials (up to 5 a case) of 6 cases: pass^1 " in page  # as the terminal says
    assert ("adaptive repeats (alpha 0.25, tolerance 0.25, k* 5): 2 stable, 3 flaky, 1 not settled; 22 trials run "
            "and 1 errors against 30 at k* everywhere (7 saved); not stable: case-0002 PF (flaky), case-0003 PPPF "
            "(flaky), case-0004 PPPP (not settled), case-0005 FP (flaky)") in page
    result.stdout.fnmatch_lines(["repeats: 22 adaptive trials (up to 5 a case) of 6 cases: pass^1 66.7 %, "
                                 "pass^2 50.0 %, pass^5 20.0 %; verdict flips between trials on 50.0 % of cases"])
    result.stdout.fnmatch_lines([
        "*tooleffect adaptive repeats*",
        "demo/openai/local-test: 2 stable, 3 flaky, 1 not settled of 6 cases; 22 trials run and 1 error against 30 "
        "at k*=5 everywhere (7 saved: ~840 tokens, 7 items skipped as 'repeats settled'); pass^1 66.7 %, "
        "pass^5 20.0 %; verdict flips on 50.0 % of cases*",
    ])


def test_a_cases_trials_stay_in_one_shard(project: pytest.Pytester) -> None:
    seen: dict[int, int] = {}
    for shard in ("1/2", "2/2"):
        result, report, sent = _run(project, f"--tooleffect-shard={shard}")
        assert not set(seen) & set(sent), result.outlines[-20:]  # no case in both shards
        seen.update(sent)
        (block,) = report["blocks"]  # the demo family's six cases hash to both shards
        for case in block["repeats"]["adaptive"]["cases"]:
            assert case["trials"] + case["errors"] == sent[int(case["case_id"][5:])]
        # a trial skipped as settled is no gap: the shard without the provider error is complete, and make
        # report's check passes it
        assert report["status"] == ("incomplete" if 4 in sent else "complete")
        check = subprocess.run([sys.executable, str(REPO / "scripts" / "report-errors"),
                                str(project.path / "report.json")], capture_output=True, text=True, check=False)
        assert check.returncode == (1 if 4 in sent else 0), check.stderr
        assert "repeats settled" not in check.stderr
    assert seen == {0: K_STAR, 1: K_STAR, 2: 2, 3: 4, 4: K_STAR, 5: 2}


def test_fixed_repeats_are_unchanged(project: pytest.Pytester) -> None:
    answer, sent = scripted_agent()
    with ScriptedServer(answer) as srv:
        result = project.runpytest("cases/", "-q", f"{OPT_MODEL}={MODEL}", f"{OPT_API_BASE}={srv.base_url}",
                                   f"{OPT_REPEATS}=3", f"{OPT_REPORT}=report.json")
    assert sum(sent.values()) == 18, result.outlines[-20:]
    rep = json.loads((project.path / "report.json").read_text())["blocks"][0]["repeats"]
    assert rep["estimator"] == "combinatorial" and rep["adaptive"] is None


def test_the_design_table_is_checked(project: pytest.Pytester) -> None:
    project.makepyprojecttoml("[tool.tooleffect.repeats]\nalpha = 0.25\ntolerence = 0.25\n")
    result = project.runpytest("cases/", f"{OPT_REPEATS}=adaptive")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "pyproject.toml: [tool.tooleffect.repeats] has 'tolerence', which it does not know" in result.stderr.str()
    project.makepyprojecttoml("[tool.tooleffect.repeats]\nmax_trials = 1\n")
    result = project.runpytest("cases/", f"{OPT_REPEATS}=adaptive")
    assert "[tool.tooleffect.repeats]: RepeatDesign.max_trials must be at least 2, got 1" in result.stderr.str()
    result = project.runpytest("cases/", f"{OPT_REPEATS}=sometimes")
    result.stderr.fnmatch_lines(["*'sometimes' is not a whole number (or 'adaptive')*"])


def test_design_defaults_and_types(tmp_path: Any) -> None:
    assert design_of_table(None, tmp_path) == RepeatDesign()
    assert design_of_table({"max_trials": 8, "alpha": 1e-2}, tmp_path) == RepeatDesign(alpha=0.01, max_trials=8)
    with pytest.raises(pytest.UsageError, match="max_trials must be a whole number, got 2.5"):
        design_of_table({"max_trials": 2.5}, tmp_path)
    with pytest.raises(pytest.UsageError, match="alpha must be a number, got True"):
        design_of_table({"alpha": True}, tmp_path)


def test_first_k_pass_hat_is_unbiased_under_the_stop() -> None:
    """A case that passes each trial with probability p, stopped at its first flip or at k*: the share of
    first-k passes averages p^k over every possible trial sequence (exactly), where C(c, k) / C(n, k) does not.
    """
    design = RepeatDesign(alpha=0.25, tolerance=0.25)
    k_star = trials_to_stable(design)
    p = 0.8
    outcomes: list[tuple[float, list[bool]]] = []  # every stopped sequence and its probability
    for first in (True, False):
        stopped = [[first] * (n - 1) + [not first] for n in range(2, k_star + 1)]  # the first flip at trial n
        for seq in [*stopped, [first] * k_star]:  # or k* identical verdicts
            prob = 1.0
            for x in seq:
                prob *= p if x else 1 - p
            outcomes.append((prob, seq))
    assert sum(pr for pr, _ in outcomes) == pytest.approx(1.0)
    from math import comb

    for k in range(1, k_star + 1):
        first_k = sum(pr * first_k_pass_hat([seq], k)[str(k)] for pr, seq in outcomes)
        assert first_k == pytest.approx(p ** k)
    combinatorial = sum(pr * comb(sum(seq), 1) / len(seq) for pr, seq in outcomes)
    assert combinatorial != pytest.approx(p, abs=1e-3)  # the fixed-n estimator is biased by the stop


def test_summary_of_records_in_arrival_order() -> None:
    from tests.test_records import shipped_record

    scored = Record.model_validate(shipped_record())
    error = Record.model_validate(shipped_record(verdict=None, error={"type": "Timeout", "message": "no answer"}))
    assert scored.verdict is not None and error.outcome == "error"

    def rec(case: str, kind: str | None) -> Record:
        if kind is None:
            return error.model_copy(update={"case_id": case})
        return scored.model_copy(update={"case_id": case, "verdict": scored.verdict.model_copy(update={"kind": kind})})

    design = RepeatDesign(alpha=0.25, tolerance=0.25)
    recs = [rec("b", "ok"), rec("a", "wrong_tool"), rec("b", None), rec("b", "wrong_tool"), rec("a", "wrong_tool")]
    rep = adaptive_summary(design, recs)
    assert rep.adaptive is not None
    assert [(c.case_id, c.verdicts, c.errors, c.step) for c in rep.adaptive.cases] == [
        ("a", "FF", 0, "not_settled"), ("b", "PF", 1, "flaky")]


def test_a_baseline_saved_without_repeats_says_why_nothing_pairs(project: pytest.Pytester,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A baseline saved from a run without repeats pairs no decision of an adaptive run (record ids under
    repeats name the trial): the run's baseline summary, its reports, the regression gate's NOT JUDGED
    reason and ``tooleffect compare`` say so, not only "left out"."""
    from pytest_tooleffect.cli import main as cli

    project.makepyprojecttoml(DESIGN + '[tool.tooleffect.gates."*"]\nmax_regressions = 0\n')
    answer, _ = scripted_agent()
    with ScriptedServer(answer) as srv:
        project.runpytest("cases/", "-q", f"{OPT_MODEL}={MODEL}", f"{OPT_API_BASE}={srv.base_url}",
                          f"{OPT_RECORDS}=once.jsonl")
    base = project.path / "baseline.json"
    assert cli(["baseline", "save", str(project.path / "once.jsonl"), "--out", str(base)]) == 0
    result, report, _ = _run(project, f"--tooleffect-baseline={base}", "--tooleffect-summary-md=summary.md")
    said = (f"family demo, policy {MODEL}: the baseline holds 1 trial per case; this run ran up to {K_STAR} "
            "(adaptive): no decision compared (a decision pairs by record id, which names its trial: save the "
            "baseline from a run with the same --tooleffect-repeats)")
    result.stdout.fnmatch_lines([f"repeats differ: {said}".replace("[", "[[]")])
    result.stdout.fnmatch_lines([f"*regressions <= 0: NOT JUDGED (no decision of the run was compared with the "
                                 f"baseline (repeats differ: {said})*".replace("[", "[[]")])
    assert report["baseline"]["repeats_mismatches"] == [
        {"family": "demo", "policy": MODEL, "baseline_trials": 1, "run_trials": K_STAR, "run_adaptive": True,
         "compared": 0, "line": said}]
    assert f"Repeats differ from the baseline: {said}." in (project.path / "summary.md").read_text()
    assert f'<p class="warn">repeats differ: {said}</p>' in (project.path / "report.html").read_text()
    capsys.readouterr()
    # the reverse, read from the record logs: B holds no trial numbers, A does
    assert cli(["compare", str(project.path / "records.jsonl"), str(project.path / "once.jsonl")]) == 2
    assert (f"tooleffect compare: repeats differ: family demo, policy {MODEL}: A holds {K_STAR} trials per case; "
            "B ran 1: no decision compared") in capsys.readouterr().err
