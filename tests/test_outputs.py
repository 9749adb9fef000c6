"""Outputs: refused at start when they cannot be written, collide, are no regular file or are a file
the run reads; kept when a write fails at the end.

A full disk is simulated with a file size limit of 0 bytes (``RLIMIT_FSIZE``, SIGXFSZ ignored:
every write to a regular file fails with EFBIG) set by a conftest for part of a run in a child
process, which needs no privilege (``/dev/full`` is a device, refused as an output); "cannot be
written" with a path under a regular file and under ``/proc``, which hold for root as well (root
passes every permission bit, so a ``chmod`` test would not).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.options import OPT_BASELINE, OPT_HTML, OPT_POLICY, OPT_RECORDS, OPT_REPORT, OPT_SUMMARY_MD
from tests.demo_family import CASES, write_demo

PASSING = [CASES[0], CASES[1], CASES[3]]  # every decision passes: the run exits 0 unless an output fails

#: a conftest that fills the disk (a file size limit of 0) from one hook to another of the run
FULL_DISK = """
import resource
import signal

import pytest

LIMIT = resource.getrlimit(resource.RLIMIT_FSIZE)


def _fill():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of ending the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, LIMIT[1]))


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    if {from_start}:
        _fill()


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):  # before the plugin's (trylast): the report is written after it
    if {from_start}:
        resource.setrlimit(resource.RLIMIT_FSIZE, LIMIT)
    else:
        _fill()
"""


def _run_on_a_full_disk(path: Path, from_start: bool, *args: str) -> subprocess.CompletedProcess[str]:
    """``pytest cases/ ARGS`` in a child process (its output through pipes, which a file size limit does
    not touch) with the disk full from the session's start to its end (the record log), or from its end
    on (the report)."""
    (path / "conftest.py").write_text(FULL_DISK.format(from_start=from_start))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-s", "-p", "no:randomly",
                           "cases/", *args], cwd=path, capture_output=True, text=True, timeout=300,
                          env=os.environ.copy())


def test_records_and_report_on_one_file_are_refused(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, PASSING)
    result = pytester.runpytest("cases/", f"{OPT_REPORT}=reports/tooleffect-records.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{OPT_REPORT} *tooleffect-records.jsonl: the same file as {OPT_RECORDS}*"])


def test_an_output_over_the_baseline_it_reads_is_refused(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, PASSING)
    pytester.runpytest("cases/").assert_outcomes(passed=3)
    assert main(["baseline", "save", str(pytester.path / "reports" / "tooleffect-records.jsonl"),
                 "--out", str(pytester.path / "base.json")]) == 0
    before = (pytester.path / "base.json").read_text()
    result = pytester.runpytest("cases/", f"{OPT_BASELINE}=base.json", f"{OPT_SUMMARY_MD}=base.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{OPT_SUMMARY_MD} base.json: is the baseline ({OPT_BASELINE}), which this run "
                                 "reads: writing * there would overwrite it*"])
    assert (pytester.path / "base.json").read_text() == before


@pytest.mark.parametrize("option", [OPT_REPORT, OPT_RECORDS, OPT_SUMMARY_MD, "--junitxml"])
@pytest.mark.parametrize("where", ["under-a-file", "proc"])
def test_unwritable_outputs_are_usage_errors_even_for_root(pytester: pytest.Pytester, option: str,
                                                           where: str) -> None:
    write_demo(pytester.path, PASSING)
    (pytester.path / "afile").write_text("x")
    path = "afile/out.json" if where == "under-a-file" else "/proc/tooleffect-test/out.json"
    result = pytester.runpytest("cases/", f"{option}={path}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    why = "cannot be written" if where == "under-a-file" else "lies under /proc, which holds devices and processes' "
    result.stderr.fnmatch_lines([f"*{option} *out.json: {why}*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


@pytest.mark.subprocess
def test_full_disk_for_the_records_is_an_error_outcome_and_the_report_keeps_them(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, PASSING)
    result = _run_on_a_full_disk(pytester.path, True, f"{OPT_RECORDS}=rec.jsonl", f"{OPT_REPORT}=r.json")
    out = result.stdout
    assert "INTERNALERROR" not in out + result.stderr
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, out  # every decision passed: the lost records fail the run
    assert f"{OPT_RECORDS} {pytester.path / 'rec.jsonl'}: write failed (File too large): 0 records kept in it, 3 lost" \
        in out, out
    assert "tooleffect records written to" not in out
    assert json.loads((pytester.path / "r.json").read_text())["blocks"][0]["n_scored"] == 3


@pytest.mark.subprocess
@pytest.mark.parametrize("option", [OPT_REPORT, OPT_SUMMARY_MD])
def test_full_disk_for_the_report_is_an_error_outcome_not_written_to(pytester: pytest.Pytester, option: str) -> None:
    write_demo(pytester.path, PASSING)
    previous = {OPT_REPORT: '{"version": 1, "status": "complete", "the previous one": 1}\n',
                OPT_SUMMARY_MD: "## tooleffect\nthe previous one\n"}[option]  # each output over its own kind
    (pytester.path / "out.txt").write_text(previous)
    result = _run_on_a_full_disk(pytester.path, False, f"{option}=out.txt")
    out = result.stdout
    assert "INTERNALERROR" not in out + result.stderr
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, out
    assert f"{option} out.txt: cannot be written (File too large)" in out, out
    assert "written to out.txt" not in out
    assert (pytester.path / "out.txt").read_text() == previous  # replaced only by a whole new file
    assert len((pytester.path / "reports" / "tooleffect-records.jsonl").read_text().splitlines()) == 3


def test_a_failed_report_write_leaves_the_previous_report(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, PASSING)
    pytester.runpytest("cases/", f"{OPT_REPORT}=r.json").assert_outcomes(passed=3)
    before = (pytester.path / "r.json").read_text()
    # the report's folder loses its write permission mid-run is not testable as root; a report that
    # cannot be encoded is: the write is atomic, so the old file stays whole either way
    from pytest_tooleffect.util.output_files import write_text

    with pytest.raises(UnicodeEncodeError):
        write_text(pytester.path / "r.json", "\ud800")
    assert (pytester.path / "r.json").read_text() == before
    assert [p.name for p in pytester.path.iterdir() if p.name.startswith(".r.json")] == []


def test_a_run_that_stops_before_any_item_keeps_the_previous_log(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, PASSING)
    pytester.runpytest("cases/").assert_outcomes(passed=3)
    log = pytester.path / "reports" / "tooleffect-records.jsonl"
    before = log.read_text()
    assert len(before.splitlines()) == 3
    result = pytester.runpytest("cases/", f"{OPT_POLICY}=no-such-policy")
    result.assert_outcomes(errors=1)
    assert log.read_text() == before
    result.stdout.fnmatch_lines(["*no record was made; the previous log * is kept*"])
    (pytester.path / "cases" / "demo" / "family.yaml").write_text("name: [unclosed\n")  # a collection error
    pytester.runpytest("cases/")
    assert log.read_text() == before


def _labelled_family(tmp_path: Path) -> Path:
    fam = tmp_path / "fam"
    fam.mkdir()
    (fam / "cases.jsonl").write_text(json.dumps({"id": "x", "label": {"valid_actions": [{"tool": None}]}}) + "\n")
    return fam


def test_sample_refuses_to_overwrite_labels_unless_forced_then_keeps_a_backup(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.conftest import REPO

    trace = str(REPO / "examples" / "traces" / "openai-chat.jsonl")
    fam = _labelled_family(tmp_path)
    labelled = (fam / "cases.jsonl").read_text()
    assert main(["sample", trace, "--out", str(fam), "--quota", "first=1"]) == 2
    err = capsys.readouterr().err
    assert "holds 1 labelled cases" in err and "--force" in err and "Traceback" not in err
    assert (fam / "cases.jsonl").read_text() == labelled
    assert main(["sample", trace, "--out", str(fam), "--quota", "first=1", "--force"]) == 0
    (backup,) = fam.glob("cases.jsonl.*.bak")
    assert backup.read_text() == labelled
    assert "label" not in (fam / "cases.jsonl").read_text()


def test_sample_refuses_a_family_it_did_not_write_unless_forced(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """A hand-written family.yaml (its comments, no quota) is not sample's to rewrite; its own is."""
    from tests.conftest import REPO

    trace = str(REPO / "examples" / "traces" / "openai-chat.jsonl")
    fam = tmp_path / "support"
    fam.mkdir()
    hand = "# the support desk, by hand\nname: support\ntools: []\n"
    (fam / "family.yaml").write_text(hand)
    assert main(["sample", trace, "--out", str(fam), "--seed", "1"]) == 2
    err = capsys.readouterr().err
    assert f"--out {fam}: holds a family whose family.yaml was not written by `tooleffect sample`" in err
    assert "--force" in err and "Traceback" not in err
    assert (fam / "family.yaml").read_text() == hand and not (fam / "cases.jsonl").exists()
    own = tmp_path / "own"
    assert main(["sample", trace, "--out", str(own), "--seed", "1"]) == 0
    assert main(["sample", trace, "--out", str(own), "--seed", "2"]) == 0  # its own family: rewritten in place
    assert main(["sample", trace, "--out", str(fam), "--seed", "1", "--force"]) == 0
    assert "quota" in (fam / "family.yaml").read_text()


def test_baseline_save_refuses_to_overwrite_its_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "records.jsonl"
    log.write_text('{"id": "x"}\n')
    assert main(["baseline", "save", str(log), "--out", str(log)]) == 2
    assert "--out " + str(log) + ": is the record log, which this command reads" in capsys.readouterr().err
    assert log.read_text() == '{"id": "x"}\n'


@pytest.mark.parametrize(("argv", "message"), [
    (["--buckets", "0"], "*argument --buckets: '0' must be at least 1"),
    (["--quota", "first=-2"], "*argument --quota: first=-2: counts are whole numbers from 1 to 100,000"),
    (["--per-bucket", "10000000", "--buckets", "2"], "*argument --per-bucket: '10000000' must be at most 100,000"),
])
def test_sample_counts_out_of_range_are_usage_errors_before_anything_is_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["sample", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "fam"), *argv])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    import fnmatch

    assert fnmatch.fnmatch(err[-1], message), err
    assert not (tmp_path / "fam").exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["label", "export", "{bad}", "--out", "{out}"], "*bad.jsonl: line 1: not valid JSON*"),
    (["label", "export", "{noplace}", "--out", "{out}"], "*noplace.jsonl: line 1: field 'placement' is missing"),
    (["label", "export", "{missing}", "--out", "{out}"], "*missing.jsonl: No such file or directory"),
    (["label", "export", "{binary}", "--out", "{out}"], "*binary.jsonl: line 1: not UTF-8 text*"),
    (["label", "export", "{noplace}"], "*--out is required*"),
    (["label", "import", "{bad}", "--labels", "{noplace}"], "*bad.jsonl: line 1: not valid JSON*"),
    (["label", "import", "{alist}", "--labels", "{noplace}"], "*alist.jsonl: line 1: a case is a JSON object*"),
    (["merge", "{noplace}", "--out", "{proc}"], "*--out /proc/*/m.jsonl: lies under /proc, which holds devices *"),
    (["merge", "{binary}", "--out", "{out}"], "*binary.jsonl: line 1: not UTF-8 text*"),
])
def test_label_merge_and_sample_answer_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             argv: list[str], message: str) -> None:
    files = {"bad": "not json\n", "noplace": '{"id": 1}\n', "alist": "[1]\n"}
    paths = {k: tmp_path / f"{k}.jsonl" for k in files}
    for k, text in files.items():
        paths[k].write_text(text)
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe{")
    names = {**{k: str(v) for k, v in paths.items()}, "binary": str(tmp_path / "binary.jsonl"),
             "missing": str(tmp_path / "missing.jsonl"), "out": str(tmp_path / "o.jsonl"),
             "proc": "/proc/tooleffect-test/m.jsonl", "fam": str(tmp_path / "fam")}
    assert main([a.format(**names) for a in argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    import fnmatch

    assert fnmatch.fnmatch(err.strip(), message), err


def test_an_atomically_written_output_gets_the_mode_a_new_file_would(tmp_path: Path) -> None:
    """The report is written through a temporary file (mode 0600): renamed into place, it takes
    the mode ``open()`` gives a new file under the umask, as the record log and the HTML page do."""
    import os
    import stat

    from pytest_tooleffect.util.output_files import write_text

    old = os.umask(0o022)
    try:
        write_text(tmp_path / "r.json", "{}\n")
        (tmp_path / "plain.json").write_text("{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "r.json").stat().st_mode) == stat.S_IMODE((tmp_path / "plain.json").stat().st_mode)


def test_every_written_to_line_prints_its_path_the_same_way(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """A path under the directory pytest started in is printed relative to it, whether its option was
    relative, absolute, or an ini key relative to the rootdir (the record log); one outside it, absolute.
    """
    write_demo(pytester.path, PASSING)
    outside = tmp_path / "elsewhere.json"
    result = pytester.runpytest("cases/", f"{OPT_REPORT}={pytester.path / 'out' / 'r.json'}",
                                f"{OPT_HTML}=out/r.html", f"{OPT_SUMMARY_MD}={outside}")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["tooleffect report written to out/r.json",
                                 "tooleffect records written to reports/tooleffect-records.jsonl",
                                 "tooleffect HTML report written to out/r.html"])
    result.stdout.fnmatch_lines([f"tooleffect summary (Markdown) written to {outside}"])


def test_a_written_to_path_under_a_symlinked_start_directory_is_relative(pytester: pytest.Pytester,
                                                                        tmp_path: Path) -> None:
    from pytest_tooleffect.util.output_files import shown_path

    real = tmp_path / "real"
    (real / "out").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real)
    assert shown_path(link / "out" / "h.html", real) == "out/h.html"  # pytest's start directory is the real one
    assert shown_path(Path("out/h.html"), real) == "out/h.html"
    assert shown_path(tmp_path / "other.json", real) == str(tmp_path / "other.json")
