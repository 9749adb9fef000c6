"""One source of truth for the regressions of ``tooleffect report``: with ``--baseline`` every gate and
figure about regressions comes from the comparison with that baseline (the records' own ``baseline``
marks, made against another baseline or edited, are replaced); without it the records' marks are
used only when they all name one baseline; and a run against a baseline and ``report`` on its log
agree.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.ci.baseline import Baseline
from pytest_tooleffect.options import OPT_BASELINE, OPT_RECORDS, OPT_REPORT, OPT_SHARD
from tests.sequential_family import write_family

COUNT = 6
#: the careful agent gets every case right; the hasty one gets case 1 (a single-class case) wrong
HASTY = {1}
WRONG_ID = "demo/case-0001[replay]"
GATES = '[tool.tooleffect.gates."*"]\nmax_regressions = 0\n'


def _save(pytester: pytest.Pytester, wrong: set[int], name: str) -> Path:
    """Run the agent that gets ``wrong`` wrong (no baseline) and save its baseline as ``name``."""
    from pytest_tooleffect.cli import main

    write_family(pytester.path, COUNT, wrong)
    log = pytester.path / f"{name}.jsonl"
    pytester.runpytest("cases/", "-q", "-n", "0", f"{OPT_RECORDS}={log}")
    out = pytester.path / f"{name}.json"
    assert main(["baseline", "save", str(log), "--out", str(out)]) == 0
    return out


def _run(pytester: pytest.Pytester, wrong: set[int], baseline: Path, log: str, *more: str) -> tuple[int, Any]:
    """Run the agent that gets ``wrong`` wrong against ``baseline`` with the gates; its exit status and report."""
    write_family(pytester.path, COUNT, wrong)
    result = pytester.runpytest("cases/", "-q", "-n", "0", f"{OPT_BASELINE}={baseline}", f"{OPT_RECORDS}={log}",
                                f"{OPT_REPORT}={log}.report.json", *more)
    return int(result.ret), json.loads((pytester.path / f"{log}.report.json").read_text())


def _report(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str, str]:
    """``tooleffect report ARGS``: the exit status, the JSON report (``None`` when refused), the terminal
    text and stderr of the text run."""
    from pytest_tooleffect.cli import main

    capsys.readouterr()
    status = main(["report", *args, "--json"])
    out = capsys.readouterr().out
    report = json.loads(out) if out.strip() else None
    assert main(["report", *args]) == status
    text = capsys.readouterr()
    return status, report, text.out, text.err


def _regression_gates(report: Any) -> list[tuple[str, float | None, list[str] | None]]:
    return [(g["status"], g["value"], g["ids"]) for g in report["gates"]["results"] if g["gate"] == "regressions"]


@pytest.fixture
def two_baselines(pytester: pytest.Pytester) -> tuple[Path, Path]:
    """A (the careful agent's baseline) and H (the hasty agent's own), and the gates file."""
    pytester.makefile(".toml", g=GATES)
    return _save(pytester, set(), "A"), _save(pytester, HASTY, "H")


def test_report_baseline_replaces_the_marks_of_another_baseline(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], two_baselines: tuple[Path, Path]) -> None:
    """Records made against H (case 1 a known failure there), reported with ``--baseline A``: the gate
    counts the regression the section names, and fails."""
    a, h = two_baselines
    pytester.makepyprojecttoml(GATES)
    ret, run = _run(pytester, HASTY, h, "h.jsonl")
    assert ret == 0 and _regression_gates(run) == [("passed", 0.0, [])]  # against H: a known failure
    status, report, text, err = _report(capsys, str(pytester.path / "h.jsonl"), "--baseline", str(a),
                                        "--gates", str(pytester.path / "g.toml"))
    assert report["baseline"]["totals"]["regressions"] == 1
    assert _regression_gates(report) == [("failed", 1.0, [WRONG_ID])]
    assert status == 1
    assert "regressions <= 0: FAILED (1 of 6 decisions compared with the baseline" in text
    assert f"baseline {a}: 6 decisions compared: 1 regressed" in text
    # the report says the marks it read were made against another baseline and which one it used
    assert f"replaced by the comparison with --baseline {a}" in err and Baseline.load(h).digest in err
    # the xfail count follows the comparison too: nothing is a known failure against A
    assert [b["n_xfail"] for b in run["blocks"]] == [1]
    assert [b["n_xfail"] for b in report["blocks"]] == [0]


def test_report_baseline_ignores_an_edited_status(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], two_baselines: tuple[Path, Path]) -> None:
    """A record's ``baseline.status`` edited regression → passing: ``--baseline`` recomputes it."""
    a, _ = two_baselines
    pytester.makepyprojecttoml(GATES)
    ret, run = _run(pytester, HASTY, a, "r.jsonl")
    assert ret == 1 and _regression_gates(run) == [("failed", 1.0, [WRONG_ID])]
    log = pytester.path / "r.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    edited = [r for r in rows if r["id"] == WRONG_ID]
    assert edited and edited[0]["baseline"]["status"] == "regression"
    edited[0]["baseline"]["status"] = "passing"
    (pytester.path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    status, report, _, err = _report(capsys, str(pytester.path / "t.jsonl"), "--baseline", str(a),
                                     "--gates", str(pytester.path / "g.toml"))
    assert (status, _regression_gates(report)) == (1, [("failed", 1.0, [WRONG_ID])])
    assert "1 with another status now (passing → regression in 1)" in err and "another baseline" not in err
    # without --baseline the edited mark contradicts its own verdict: refused in one line naming the record
    status, report, text, err = _report(capsys, str(pytester.path / "t.jsonl"), "--gates", str(pytester.path / "g.toml"))
    assert (status, report, text) == (2, None, "")
    assert err.count("\n") == 1 and f"record {WRONG_ID}: baseline.status 'passing' contradicts its own verdict" in err
    # the page lists regressions by the records' marks: refused alike, nothing written
    from pytest_tooleffect.cli import main

    page = pytester.path / "page.html"
    assert main(["html", str(pytester.path / "t.jsonl"), "--out", str(page), "--cases", str(pytester.path / "cases")]) == 2
    err = capsys.readouterr().err
    assert f"record {WRONG_ID}: baseline.status 'passing' contradicts" in err and not page.exists()


def test_run_and_report_on_its_log_agree(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], two_baselines: tuple[Path, Path]) -> None:
    """The run against A and ``report`` on its log, with ``--baseline A`` and with the records' own marks,
    judge every gate alike."""
    a, _ = two_baselines
    pytester.makepyprojecttoml(GATES)
    ret, run = _run(pytester, HASTY, a, "r.jsonl")
    records = [json.loads(line) for line in (pytester.path / "r.jsonl").read_text().splitlines()]
    assert {r["baseline"].get("against") for r in records} == {Baseline.load(a).digest}
    gates = [(g["gate"], g["status"], g["value"], g["ids"]) for g in run["gates"]["results"]]
    for given in (["--baseline", str(a)], []):
        status, report, _, err = _report(capsys, str(pytester.path / "r.jsonl"), *given,
                                         "--gates", str(pytester.path / "pyproject.toml"))
        assert (status, [(g["gate"], g["status"], g["value"], g["ids"]) for g in report["gates"]["results"]]) == \
            (ret, gates)
        if not given:  # the report says whose marks it read
            assert f"the records' own baseline marks (baseline {Baseline.load(a).digest})" in err
        else:  # the marks were made against this baseline: nothing replaced, nothing said
            assert "replaced" not in err


def test_report_refuses_marks_of_two_baselines(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], two_baselines: tuple[Path, Path]) -> None:
    """Two shards of one run, each against another baseline: their marks are not one comparison.
    Without ``--baseline`` refused in one line; with it, both are compared with the one given."""
    a, h = two_baselines
    pytester.makepyprojecttoml(GATES)
    write_family(pytester.path, COUNT, HASTY)
    for i, base in ((1, a), (2, h)):
        pytester.runpytest("cases/", "-q", "-n", "0", f"{OPT_SHARD}={i}/2", f"{OPT_BASELINE}={base}",
                           f"{OPT_RECORDS}=s{i}.jsonl")
    logs = [str(pytester.path / "s1.jsonl"), str(pytester.path / "s2.jsonl")]
    status, report, text, err = _report(capsys, *logs, "--gates", str(pytester.path / "g.toml"))
    assert (status, report, text) == (2, None, "")
    line = err.strip().splitlines()
    assert len(line) == 1 and "made against 2 baselines" in line[0]
    assert Baseline.load(a).digest in line[0] and Baseline.load(h).digest in line[0] and "--baseline" in line[0]
    status, report, _, _ = _report(capsys, *logs, "--baseline", str(a), "--gates", str(pytester.path / "g.toml"))
    assert (status, _regression_gates(report)) == (1, [("failed", 1.0, [WRONG_ID])])
