"""A report of part of a run is never called complete and never passes the gates: logs whose
records do not say what their run selected (an earlier tooleffect's, or written by hand), and a
merge that lacks records, are ``incomplete`` and exit 1, with or without ``--gates``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.options import OPT_RECORDS
from tests.demo_family import CASES, write_demo

PASSING = [CASES[0], CASES[1], CASES[3]]
GATES = '[tool.tooleffect.gates."*"]\nmax_count = {forbidden = 0}\n'  # a gate the passing cases pass


@pytest.fixture
def log(pytester: pytest.Pytester) -> Path:
    """A whole run's record log of three passing decisions, beside a pyproject.toml of gates they pass."""
    write_demo(pytester.path, PASSING)
    (pytester.path / "pyproject.toml").write_text(GATES)
    path = pytester.path / "run.jsonl"
    assert pytester.runpytest("cases/", f"{OPT_RECORDS}={path}").ret == 0
    return path


def _rewrite(path: Path, keep: int | None = None, drop: tuple[str, ...] = ()) -> None:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    records = [{k: v for k, v in r.items() if k not in drop} for r in records[:keep]]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_a_whole_run_with_its_gates_passes(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(log), "--gates", str(log.parent), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "complete" and data["gates"]["passed"] is True


def test_logs_without_the_selection_stamp_are_incomplete_not_complete(
        log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Break-it row 50: a log of an earlier tooleffect (or by hand), cut short, merged as complete."""
    _rewrite(log, keep=2, drop=("selection", "fingerprints"))
    assert main(["report", str(log), "--json"]) == 1
    out = capsys.readouterr()
    assert json.loads(out.out)["status"] == "incomplete"
    assert "tooleffect report: incomplete: the records do not say what their run selected" in out.err


@pytest.mark.parametrize("cut", ["a record missing", "no selection stamp"])
def test_gates_never_pass_an_incomplete_report(log: Path, capsys: pytest.CaptureFixture[str], cut: str) -> None:
    """Break-it row 211: "every gate passed" and exit_status 0 printed for a merge that lacks records."""
    _rewrite(log, keep=2) if cut == "a record missing" else _rewrite(log, drop=("selection", "fingerprints"))
    assert main(["report", str(log), "--gates", str(log.parent), "--json"]) == 1
    gates = json.loads(capsys.readouterr().out)["gates"]
    assert gates["passed"] is False and gates["exit_status"] == 1
    assert gates["exit_reason"].startswith("exit 1: the report is incomplete")
    assert all(r["status"] == "passed" for r in gates["results"])  # the gates themselves held
    assert main(["report", str(log), "--gates", str(log.parent)]) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("tooleffect gates: exit 1: the report is incomplete") and "every gate passed" not in last
