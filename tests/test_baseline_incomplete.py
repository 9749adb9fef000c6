"""``tooleffect baseline save`` refuses the log of a run that is not complete (break-it row 226: an
interrupted run's 7 of 20 records saved with exit 0; later runs counted the 13 missing as new and
never compared them), unless ``--allow-incomplete``, and then the baseline says it is incomplete."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_tooleffect.ci.baseline import Baseline
from pytest_tooleffect.cli import main
from pytest_tooleffect.options import OPT_RECORDS, OPT_SHARD
from tests.demo_family import CASES, write_demo

PASSING = [CASES[0], CASES[1], CASES[3]]


@pytest.fixture
def log(pytester: pytest.Pytester) -> Path:
    write_demo(pytester.path, PASSING)
    path = pytester.path / "run.jsonl"
    assert pytester.runpytest("cases/", f"{OPT_RECORDS}={path}").ret == 0
    return path


def test_a_log_cut_short_is_refused_naming_what_is_missing(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:1]))  # the run stopped after one record
    out = log.parent / "b.json"
    capsys.readouterr()
    assert main(["baseline", "save", str(log), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"tooleffect baseline save: {log}: the run is not complete: 1 of 3 selected items have a record " \
           "(2 missing" in err and "--allow-incomplete" in err
    assert not out.exists()


def test_allowed_it_is_saved_and_says_it_is_incomplete(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:2]))
    out = log.parent / "b.json"
    assert main(["baseline", "save", str(log), "--out", str(out), "--allow-incomplete"]) == 0
    assert "incomplete (--allow-incomplete): 2 of 3 selected items have a record" in capsys.readouterr().out
    saved = Baseline.load(out)
    assert len(saved.decisions) == 2 and saved.incomplete is not None
    assert saved.incomplete[0].startswith("2 of 3 selected items have a record (1 missing")


def test_a_complete_log_is_saved_without_the_mark(log: Path) -> None:
    out = log.parent / "b.json"
    assert main(["baseline", "save", str(log), "--out", str(out)]) == 0
    assert "incomplete" not in json.loads(out.read_text())


def test_one_shard_of_a_run_is_refused(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    write_demo(pytester.path, PASSING)
    shard = pytester.path / "s1.jsonl"
    pytester.runpytest("cases/", f"{OPT_SHARD}=1/2", f"{OPT_RECORDS}={shard}")
    capsys.readouterr()
    assert main(["baseline", "save", str(shard), "--out", str(pytester.path / "b.json")]) == 1
    assert "the run is not complete: shard 2 of 2 missing" in capsys.readouterr().err
