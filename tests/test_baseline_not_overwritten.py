"""A committed baseline is replaced only by a baseline: no other output of a run or a command writes
over it (an outside break-it pass found the HTML page, the record log and the JSON report did)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.options import OPT_RECORDS
from tests.demo_family import CASES, write_demo


@pytest.fixture
def base(pytester: pytest.Pytester) -> Path:
    """The demo family's run and the baseline saved from it, the way a team saves it."""
    write_demo(pytester.path, [CASES[0], CASES[1], CASES[3]])
    assert pytester.runpytest("cases/", f"{OPT_RECORDS}=rec.jsonl").ret == 0
    assert main(["baseline", "save", str(pytester.path / "rec.jsonl"), "--out", str(pytester.path / "base.json")]) == 0
    return pytester.path / "base.json"


@pytest.mark.parametrize("option", ["--tooleffect-records", "--tooleffect-report", "--tooleffect-html",
                                    "--tooleffect-summary-md"])
def test_no_run_output_replaces_a_baseline(pytester: pytest.Pytester, base: Path, option: str) -> None:
    before = base.read_bytes()
    result = pytester.runpytest("cases/", f"{option}=base.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "holds a tooleffect baseline" in "\n".join(result.outlines + result.errlines)
    assert base.read_bytes() == before


def test_html_out_refuses_a_baseline_and_baseline_save_still_replaces_one(
        pytester: pytest.Pytester, base: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = base.read_bytes()
    capsys.readouterr()
    assert main(["html", str(pytester.path / "rec.jsonl"), "--out", str(base)]) == 2
    assert "holds a tooleffect baseline" in capsys.readouterr().err and base.read_bytes() == before
    assert main(["baseline", "save", str(pytester.path / "rec.jsonl"), "--out", str(base), "--force"]) == 0
    assert json.loads(base.read_text())["kind"] == "tooleffect-baseline"
