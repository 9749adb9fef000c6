"""An output replaces only a file of its own kind: an existing file the plugin wrote (a record log, a
baseline, a JSON report, a page, a job summary, a JUnit XML file, labels, a calibration) named as
another kind of output is refused before anything is written, naming the path and what it holds.
A record log is replaced by a record log (the default path is reused every run), a page by a page.

An outside break-it pass found an earlier run's record log replaced, with no word and exit 0, by the
HTML page, the Markdown summary and the JSON report of a run, and by ``tooleffect html --out`` and
``tooleffect baseline save --out``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.options import OPT_HTML, OPT_RECORDS, OPT_REPORT, OPT_SUMMARY_MD
from pytest_tooleffect.util.output_files import OutputPathError, check_outputs
from pytest_tooleffect.util.own_outputs import (
    BASELINE_WORDS,
    CASE_FILE,
    HTML_PAGE,
    JUDGE_CALIBRATION,
    JUNIT_XML,
    LABELS,
    RECORD_LOG,
    REPORT,
    SUMMARY_MD,
    output_kind,
)
from tests.demo_family import CASES, write_demo

PASSING = [CASES[0], CASES[1], CASES[3]]


@pytest.fixture
def old(pytester: pytest.Pytester) -> Path:
    """An earlier run's record log, ``old.jsonl``, that this run does not read."""
    write_demo(pytester.path, PASSING)
    assert pytester.runpytest("cases/", f"{OPT_RECORDS}=old.jsonl").ret == 0
    return pytester.path / "old.jsonl"


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
@pytest.mark.parametrize(("option", "writes"), [(OPT_HTML, HTML_PAGE), (OPT_SUMMARY_MD, SUMMARY_MD),
                                                (OPT_REPORT, REPORT), ("--junitxml", JUNIT_XML)])
def test_no_run_output_replaces_an_earlier_record_log(pytester: pytest.Pytester, old: Path, option: str,
                                                      writes: str, workers: list[str]) -> None:
    before = old.read_bytes()
    result = pytester.runpytest("cases/", *workers, f"{OPT_RECORDS}=new.jsonl", f"{option}=old.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {option} *old.jsonl: holds {RECORD_LOG}; {option} writes {writes}: give "
                                 f"{option} another path, or remove it first*"])
    assert old.read_bytes() == before
    assert not (pytester.path / "new.jsonl").exists()  # refused before anything was decided or written


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["n0", "n2"])
def test_each_run_output_still_replaces_its_own_kind(pytester: pytest.Pytester, old: Path, workers: list[str]) -> None:
    outputs = {OPT_RECORDS: "old.jsonl", OPT_HTML: "page.html", OPT_SUMMARY_MD: "summary.md",
               OPT_REPORT: "report.json", "--junitxml": "junit.xml"}
    args = [f"{option}={path}" for option, path in outputs.items()]
    pytester.runpytest("cases/", *workers, *args).assert_outcomes(passed=3)
    first = {path: (pytester.path / path).stat().st_mtime_ns for path in outputs.values()}
    pytester.runpytest("cases/", *workers, *args).assert_outcomes(passed=3)  # the same paths again: each its own kind
    assert {path: output_kind(pytester.path / path) for path in first} == {
        "old.jsonl": RECORD_LOG, "page.html": HTML_PAGE, "summary.md": SUMMARY_MD, "report.json": REPORT,
        "junit.xml": JUNIT_XML}
    assert all((pytester.path / path).stat().st_mtime_ns > mtime for path, mtime in first.items())


def test_a_run_output_on_another_run_output_of_another_kind_is_refused(pytester: pytest.Pytester, old: Path) -> None:
    """The page over the JSON report, the report over the page, the record log over the summary."""
    pytester.runpytest("cases/", f"{OPT_RECORDS}=new.jsonl", f"{OPT_REPORT}=report.json", f"{OPT_HTML}=page.html",
                       f"{OPT_SUMMARY_MD}=summary.md").assert_outcomes(passed=3)
    kept = {p: (pytester.path / p).read_bytes() for p in ("report.json", "page.html", "summary.md")}
    for option, path, holds in [(OPT_HTML, "report.json", REPORT), (OPT_REPORT, "page.html", HTML_PAGE),
                                (OPT_RECORDS, "summary.md", SUMMARY_MD)]:
        result = pytester.runpytest("cases/", f"{option}={path}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"ERROR: {option} *{path}: holds {holds}; *"])
    assert kept == {p: (pytester.path / p).read_bytes() for p in kept}


def _refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    return capsys.readouterr().err


def test_html_and_baseline_save_refuse_an_earlier_record_log(pytester: pytest.Pytester, old: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert pytester.runpytest("cases/", f"{OPT_RECORDS}=r3.jsonl").ret == 0
    before = old.read_bytes()
    r3 = str(pytester.path / "r3.jsonl")
    err = _refused(["html", r3, "--out", str(old)], capsys)
    assert f"--out {old}: holds {RECORD_LOG}; --out writes {HTML_PAGE}: give --out another path, or remove it " \
           "first" in err
    err = _refused(["baseline", "save", r3, "--out", str(old)], capsys)
    assert f"--out {old}: holds {RECORD_LOG}; --out writes {BASELINE_WORDS}" in err
    assert _refused(["baseline", "save", r3, "--out", str(old), "--force"], capsys)  # --force replaces other files
    assert _refused(["baseline", "init", "--from", r3, "--out", str(old), "--force"], capsys)
    assert old.read_bytes() == before


def test_label_commands_refuse_a_record_log_and_keep_their_own(pytester: pytest.Pytester, old: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    before = old.read_bytes()
    cases = str(pytester.path / "cases" / "demo" / "cases.jsonl")
    err = _refused(["label", "export", cases, "--out", str(old)], capsys)
    assert f"holds {RECORD_LOG}; --out writes {LABELS}" in err
    assert main(["label", "export", cases, "--out", str(pytester.path / "a.jsonl")]) == 0
    assert main(["label", "export", cases, "--out", str(pytester.path / "a.jsonl")]) == 0  # labels over labels
    err = _refused(["merge", str(pytester.path / "a.jsonl"), "--out", str(old)], capsys)
    assert f"holds {RECORD_LOG}; --out writes {LABELS}" in err
    err = _refused(["label", "import", cases, "--labels", str(pytester.path / "a.jsonl"), "--out", str(old)], capsys)
    assert f"holds {RECORD_LOG}; --out writes {CASE_FILE}" in err
    assert old.read_bytes() == before


def test_the_check_names_what_each_output_writes(tmp_path: Path) -> None:
    """The rule itself: an unknown file keeps the older rules, a file of the output's kind is replaced."""
    page = tmp_path / "page.html"
    page.write_text('<!DOCTYPE html>\n<html><head><meta name="generator" content="pytest-tooleffect">')
    check_outputs([("--out", page)], kinds={"--out": HTML_PAGE})
    with pytest.raises(OutputPathError, match=f"holds {HTML_PAGE}; --out writes {REPORT}"):
        check_outputs([("--out", page)], kinds={"--out": REPORT})
    empty = tmp_path / "empty.json"
    empty.write_text("")
    check_outputs([("--out", empty)], kinds={"--out": REPORT})  # nothing to lose


def test_sample_and_calibrate_judge_refuse_a_record_log(pytester: pytest.Pytester, old: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``sample --force`` replaces a family it did not write, never an earlier run's record log named as
    its case file; ``calibrate-judge`` refuses before a judge is asked (nothing listens on its endpoint).
    """
    repo = Path(__file__).resolve().parent.parent
    before = old.read_bytes()
    err = _refused(["sample", str(repo / "examples" / "traces" / "openai-chat.jsonl"), "--out", str(old.parent),
                    "--name", "old.jsonl", "--force"], capsys)
    assert f"holds {RECORD_LOG}; --out/--name writes {CASE_FILE}" in err
    err = _refused(["calibrate-judge", str(repo / "examples" / "judge" / "pairs.jsonl"), "--judge-model", "openai/x",
                    "--api-base", "http://127.0.0.1:9/v1", "--out", str(old), "--force"], capsys)
    assert f"holds {RECORD_LOG}; --out writes {JUDGE_CALIBRATION}" in err
    assert old.read_bytes() == before
