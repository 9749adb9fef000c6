"""A record, report or baseline of a version this plugin does not know is refused with one line
(break-it row 227: a record of ``version: 99`` was read as version 1 and reported complete)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_tooleffect.ci.baseline import Baseline, BaselineError
from pytest_tooleffect.cli import main
from pytest_tooleffect.options import OPT_RECORDS, OPT_REPORT
from pytest_tooleffect.report.record_log import load_records
from pytest_tooleffect.util.versions import version_problem
from tests.demo_family import CASES, write_demo

NEWER = "written by a newer pytest-tooleffect: version 99; this one reads 1"


@pytest.fixture
def run(pytester: pytest.Pytester) -> Path:
    """A whole run's record log and JSON report, beside the cases."""
    write_demo(pytester.path, CASES[:2])
    assert pytester.runpytest("cases/", f"{OPT_RECORDS}=run.jsonl", f"{OPT_REPORT}=report.json").ret == 0
    return pytester.path


def _bump(path: Path, every_line: bool) -> None:
    lines = path.read_text().splitlines()
    out = [json.dumps({**json.loads(x), "version": 99}) if every_line or i == 0 else x for i, x in enumerate(lines)]
    path.write_text("\n".join(out) + "\n")


def test_the_line_says_newer_or_unknown() -> None:
    assert version_problem(1, 1) is None
    assert version_problem(99, 1) == NEWER
    assert version_problem("1", 1) == "version '1' is not one pytest-tooleffect wrote; this one reads 1"
    assert version_problem(True, 1) is not None


def test_a_record_of_a_newer_version_is_refused_by_report_baseline_and_compare(
        run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = run / "run.jsonl"
    _bump(log, every_line=False)
    capsys.readouterr()
    assert main(["report", str(log)]) == 2
    assert NEWER in capsys.readouterr().err
    with pytest.raises(ValueError, match=NEWER):
        load_records(log)
    assert main(["baseline", "save", str(log), "--out", str(run / "b.json")]) == 2
    assert NEWER in capsys.readouterr().err and not (run / "b.json").exists()
    assert main(["compare", str(log), str(log)]) == 2
    assert NEWER in capsys.readouterr().err


@pytest.mark.parametrize(("field", "value", "said"), [
    ("version", 99, f"version: {NEWER}"),
    ("status", "bogus", "status: Input should be 'complete', 'incomplete' or 'interrupted', got 'bogus'"),
])
def test_a_report_of_a_newer_version_or_a_bad_field_is_refused_in_one_line(
        run: Path, capsys: pytest.CaptureFixture[str], field: str, value: object, said: str) -> None:
    """Break-it rows 307-308: html printed pydantic's dump (several lines, a URL) for these."""
    report = run / "report.json"
    report.write_text(json.dumps({**json.loads(report.read_text()), field: value}))
    capsys.readouterr()
    assert main(["html", str(report), "--out", str(run / "r.html")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tooleffect html: {report}: {said}"), lines
    assert not (run / "r.html").exists()


@pytest.mark.parametrize("status", ["incomplete", "interrupted"])
def test_a_page_drawn_from_a_report_of_part_of_a_run_says_so_and_exits_1(
        run: Path, capsys: pytest.CaptureFixture[str], status: str) -> None:
    """A page from a record log lacking part of its run exits 1; one from such a JSON report exited 0."""
    report = run / "report.json"
    assert main(["html", str(report), "--out", str(run / "whole.html")]) == 0
    report.write_text(json.dumps({**json.loads(report.read_text()), "status": status}))
    capsys.readouterr()
    assert main(["html", str(report), "--out", str(run / "part.html")]) == 1
    assert capsys.readouterr().out.rstrip().endswith(f"; status {status}")
    assert "incomplete" in (run / "part.html").read_text() or status in (run / "part.html").read_text()


def test_a_baseline_given_to_html_is_named_a_baseline(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Break-it row 309: html called a (valid JSON) baseline file "line 1: not valid JSON"."""
    base = run / "tooleffect-baseline.json"
    assert main(["baseline", "save", str(run / "run.jsonl"), "--out", str(base)]) == 0
    capsys.readouterr()
    assert main(["html", str(base), "--out", str(run / "b.html")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tooleffect html: {base}: this is a baseline file, not a record "
                                                   "log"), lines
    assert not (run / "b.html").exists()


def test_a_baseline_of_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"kind": "tooleffect-baseline", "version": 99, "created": "x", "groups": [],
                                "decisions": {}}))
    with pytest.raises(BaselineError, match=NEWER):
        Baseline.load(path)


def test_a_record_log_read_for_its_costs_is_refused_too(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = run / "run.jsonl"
    other = run / "costs.jsonl"
    other.write_text(log.read_text())
    _bump(other, every_line=True)
    capsys.readouterr()
    assert main(["plan", str(log), "--costs", str(other)]) == 2
    assert NEWER in capsys.readouterr().err
