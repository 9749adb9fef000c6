"""No output may be an input: a run's outputs and every command's ``--out`` are refused, before
anything is written, when they resolve (symbolic links followed) to a file the run or command
reads, to another output, or to something that is not a regular file (``/dev/null`` excepted); and
one run at a time writes a record log, so two runs never mix their records.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.options import OPT_HTML, OPT_RECORDS, OPT_REPORT, OPT_SUMMARY_MD
from tests.demo_family import CASES, write_demo

PASSING = [CASES[0], CASES[1], CASES[3]]
DEFAULT_LOG = Path("reports") / "tooleffect-records.jsonl"
#: the start of another run's record log (recognised as one: a run may write over it)
KEPT = '{"bucket": "first", "case_id": "kept", "class": "single"}\n'


def _project(root: Path) -> dict[str, Path]:
    """The demo family (a JSONL case file and a YAML one), its rules, a pyproject.toml and a pytest.ini."""
    fam = write_demo(root, PASSING)
    (fam / "more.yaml").write_text(json.dumps([{**CASES[3], "id": "y-stop"}]) + "\n")
    (root / "pyproject.toml").write_text('[tool.tooleffect.gates."*"]\nmin_pct.no_tool = {name = 50}\n')
    (root / "pytest.ini").write_text("[pytest]\n")
    return {"yaml case file": fam / "more.yaml", "jsonl case file": fam / "cases.jsonl",
            "family file": fam / "family.yaml", "oracle rules": root / "oracle" / "demo.yaml",
            "pyproject": root / "pyproject.toml", "ini": root / "pytest.ini"}


READ_BY_THE_RUN = [  # the reproductions first
    (OPT_REPORT, "yaml case file", "a case file of the family in *cases/demo"),
    (OPT_RECORDS, "jsonl case file", "a case file of the family in *cases/demo"),
    (OPT_RECORDS, "family file", "the family file of the family in *cases/demo"),
    (OPT_HTML, "pyproject", "the project's configuration*"),
    (OPT_SUMMARY_MD, "oracle rules", "the oracle rules of the family in *cases/demo"),
    (OPT_REPORT, "ini", "pytest's configuration file"),
]


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize(("option", "target", "what"), READ_BY_THE_RUN,
                         ids=[f"{o}-{t}" for o, t, _ in READ_BY_THE_RUN])
def test_an_output_on_a_file_the_run_reads_is_a_usage_error_before_any_item(
        pytester: pytest.Pytester, option: str, target: str, what: str, workers: str) -> None:
    files = _project(pytester.path)
    before = {p: p.read_bytes() for p in files.values()}
    shown = os.path.relpath(files[target], pytester.path)
    result = pytester.runpytest("cases/", f"{option}={shown}", "-n", workers)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"ERROR: {option} *{shown}: is {what}, which this run reads: writing {option} "
                                 f"there would overwrite it; give {option} a path of its own"])
    assert {p: p.read_bytes() for p in files.values()} == before
    assert not (pytester.path / "reports").exists()  # no item ran: no record log either
    assert "passed" not in result.stdout.str()


def test_an_output_through_a_symbolic_link_is_the_file_it_reaches(pytester: pytest.Pytester) -> None:
    files = _project(pytester.path)
    (pytester.path / "latest.json").symlink_to(files["jsonl case file"])
    before = files["jsonl case file"].read_bytes()
    result = pytester.runpytest("cases/", f"{OPT_REPORT}=latest.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {OPT_REPORT} latest.json (resolved: *cases/demo/cases.jsonl): is a case "
                                 "file of the family in *"])
    assert files["jsonl case file"].read_bytes() == before


def test_a_case_file_of_a_family_the_run_does_not_collect_is_refused_too(pytester: pytest.Pytester) -> None:
    """A family in the output's own folder is read by other runs: its files are never an output."""
    files = _project(pytester.path)
    other = pytester.path / "elsewhere" / "other"
    other.mkdir(parents=True)
    (other / "family.yaml").write_text("name: other\n")
    (other / "cases.jsonl").write_text("{}\n")
    result = pytester.runpytest("cases/", f"{OPT_REPORT}={other / 'cases.jsonl'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*: is a case file of the family in *elsewhere/other, which this run reads*"])
    assert (other / "cases.jsonl").read_text() == "{}\n" and files["jsonl case file"].exists()


class _Drain:
    """A reader of a named pipe, opening it again after each writer, so that writing to it (what an
    unchecked output does) never waits."""

    def __init__(self, fifo: Path) -> None:
        self.fifo, self.got, self.stopped = fifo, b"", False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self.stopped:
            with open(self.fifo, "rb") as fh:
                self.got += fh.read()

    def stop(self) -> None:
        self.stopped = True
        try:  # a reader waiting for a writer: let its open return
            os.close(os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:  # none waiting
            pass
        self.thread.join(10)


@pytest.mark.parametrize("option", [OPT_RECORDS, OPT_REPORT, OPT_HTML, OPT_SUMMARY_MD])
@pytest.mark.parametrize("kind", ["a character device", "a named pipe (FIFO)", "a directory"])
def test_an_output_that_is_not_a_regular_file_is_refused(pytester: pytest.Pytester, option: str, kind: str) -> None:
    write_demo(pytester.path, PASSING)
    drain = None
    if kind == "a character device":
        target = "/dev/zero"
    elif kind == "a directory":
        (pytester.path / "adir").mkdir()
        (pytester.path / "link").symlink_to(pytester.path / "adir")
        target = "link"  # a symbolic link to a folder is a folder
    else:
        os.mkfifo(pytester.path / "pipe")
        drain = _Drain(pytester.path / "pipe")
        target = "pipe"
    try:
        result = pytester.runpytest("cases/", f"{option}={target}")
    finally:
        if drain is not None:
            drain.stop()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"ERROR: {option} *{target}*: is {kind}, not a regular file; give a file path"])
    assert drain is None or drain.got == b""


def test_dev_null_takes_an_output_and_throws_it_away(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, PASSING)
    result = pytester.runpytest("cases/", f"{OPT_RECORDS}=/dev/null", f"{OPT_REPORT}=/dev/null",
                                f"{OPT_SUMMARY_MD}=/dev/null")
    result.assert_outcomes(passed=3)
    assert result.ret == pytest.ExitCode.OK
    assert Path("/dev/null").is_char_device() and not Path("/dev/.null.lock").exists()


# ------------------------------------------------------------------------------------- one run per record log


def test_a_run_on_a_record_log_another_run_holds_is_refused_naming_it(pytester: pytest.Pytester) -> None:
    from pytest_tooleffect.util.output_files import OutputLock

    write_demo(pytester.path, PASSING)
    log = pytester.path / "rec.jsonl"
    log.write_text(KEPT)
    lock = OutputLock.acquire(OPT_RECORDS, log)  # as the run that writes it holds it
    try:
        result = pytester.runpytest("cases/", f"{OPT_RECORDS}=rec.jsonl")
    finally:
        lock.release()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {OPT_RECORDS} *rec.jsonl: another run (pid {os.getpid()} on *, since *) "
                                 "is writing it now; two runs on one file would mix or replace each other's output. Wait for that run "
                                 f"to end, or give this run its own {OPT_RECORDS} PATH"])
    assert log.read_text() == KEPT
    pytester.runpytest("cases/", f"{OPT_RECORDS}=rec.jsonl").assert_outcomes(passed=3)  # released: the next one runs
    assert len(log.read_text().splitlines()) == 3
    assert not (pytester.path / ".rec.jsonl.lock").exists()


@pytest.mark.parametrize("option", [OPT_HTML, OPT_REPORT, OPT_SUMMARY_MD])
def test_a_run_naming_another_runs_record_log_as_any_output_is_refused(pytester: pytest.Pytester, option: str) -> None:
    """Break-it row 129: a second run's page named the first run's record log while it was being
    written (still empty, so of no kind yet): the page was reported written and then lost."""
    from pytest_tooleffect.util.output_files import OutputLock

    write_demo(pytester.path, PASSING)
    log = pytester.path / "x.jsonl"
    lock = OutputLock.acquire(OPT_RECORDS, log)  # the first run, its log not written yet
    try:
        result = pytester.runpytest("cases/", f"{OPT_RECORDS}=own.jsonl", f"{option}=x.jsonl")
    finally:
        lock.release()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {option} *x.jsonl: another run (pid {os.getpid()} on *, since *) is "
                                 "writing it now*"])
    assert not log.exists() and not (pytester.path / "own.jsonl").exists()
    assert not (pytester.path / ".own.jsonl.lock").exists()  # the locks it took before the refusal let go


def test_a_run_of_plain_tests_takes_no_lock_on_the_default_log(pytester: pytest.Pytester) -> None:
    """The project's own unit tests (no family folder among the arguments, no log named) run while
    a run of the cases holds the default record log: the lock is the case runs' alone.
    """
    from pytest_tooleffect.options import DEFAULT_RECORDS
    from pytest_tooleffect.util.output_files import OutputLock

    write_demo(pytester.path, PASSING)
    pytester.makepyfile(test_unit="def test_one():\n    assert 1 + 1 == 2\n")
    log = pytester.path / DEFAULT_RECORDS
    log.parent.mkdir(parents=True, exist_ok=True)
    lock = OutputLock.acquire(OPT_RECORDS, log)  # a run of the cases is writing it
    try:
        pytester.runpytest("test_unit.py").assert_outcomes(passed=1)
        assert pytester.runpytest("cases/").ret == pytest.ExitCode.USAGE_ERROR  # the cases' run is refused
    finally:
        lock.release()


SLOW = "import time\n\n\ndef pytest_runtest_call(item):\n    time.sleep({s})\n"
#: after its first item, the run waits for a file named ``go`` (two minutes at most)
HOLD = """import os
import time

SEEN = []


def pytest_runtest_call(item):
    SEEN.append(item)
    deadline = time.monotonic() + 120
    while len(SEEN) > 1 and not os.path.exists("go") and time.monotonic() < deadline:
        time.sleep(0.05)
"""


def _start(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q",
                             "cases/", *args], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=os.environ.copy())


def _wait_for_lines(path: Path, n: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"no {n} records in {path} (exit {proc.poll()})")


@pytest.mark.subprocess
def test_two_runs_at_once_on_the_default_log_the_second_is_refused_and_the_first_keeps_every_record(
        pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, PASSING)
    pytester.makeconftest(HOLD)
    log = pytester.path / DEFAULT_LOG
    with _start(pytester.path) as first:  # its pipes closed on the way out
        try:
            _wait_for_lines(log, 1, first)
            second = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "cases/"],
                                    cwd=pytester.path, capture_output=True, text=True, timeout=120,
                                    env=os.environ.copy())
            assert first.poll() is None, "the first run ended before the second did: nothing was at stake"
            (pytester.path / "go").touch()
            out, err = first.communicate(timeout=120)
        finally:
            if first.poll() is None:
                first.kill()
    assert second.returncode == pytest.ExitCode.USAGE_ERROR, second.stdout + second.stderr
    assert f"{OPT_RECORDS} {log}: another run (pid {first.pid} on " in second.stderr
    assert first.returncode == pytest.ExitCode.OK, out + err
    records = [json.loads(line) for line in log.read_text().splitlines()]  # every line whole
    assert sorted(r["case_id"] for r in records) == sorted(c["id"] for c in PASSING)


@pytest.mark.subprocess
def test_a_killed_run_keeps_its_flushed_records_and_leaves_no_lock_behind(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, PASSING)
    pytester.makeconftest(SLOW.format(s=1.0))
    log = pytester.path / "rec.jsonl"
    with _start(pytester.path, f"{OPT_RECORDS}=rec.jsonl") as run:
        try:
            _wait_for_lines(log, 1, run)
            run.send_signal(signal.SIGKILL)  # no handler, no cleanup: the kernel drops the lock
            run.communicate(timeout=60)
        finally:
            if run.poll() is None:
                run.kill()
    kept = [json.loads(line) for line in log.read_text().splitlines()]
    assert 1 <= len(kept) < len(PASSING)
    pytester.makeconftest("")
    after = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "cases/",
                            f"{OPT_RECORDS}=rec.jsonl"], cwd=pytester.path, capture_output=True, text=True,
                           timeout=120, env=os.environ.copy())
    assert after.returncode == pytest.ExitCode.OK, after.stdout + after.stderr
    assert len(log.read_text().splitlines()) == len(PASSING)


# --------------------------------------------------------------------------------------------------- commands


def _labels(path: Path, ids: list[str], tool: str | None) -> None:
    # each file one labeller's (named after it): two files naming one labeller are refused as one file twice
    path.write_text("".join(json.dumps({"id": i, "valid_actions": [{"tool": tool}], "labelled_by": path.stem}) + "\n"
                            for i in ids))


def _command_inputs(root: Path) -> dict[str, Path]:
    fam = write_demo(root, PASSING)
    log = root / "rec.jsonl"
    log.write_text('{"a record log": true}\n')
    _labels(root / "ana.jsonl", ["a", "b"], None)
    _labels(root / "bo.jsonl", ["a", "b"], "read_thread")
    (root / "pairs.jsonl").write_text(json.dumps({"id": "p", "expected": "x", "got": "x", "human": "pass"}) + "\n")
    trace = root / "fam" / "trace.jsonl"
    trace.parent.mkdir()
    trace.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    (root / "spec").mkdir()
    (root / "spec" / "family.yaml").write_text("family: {name: spec}\n")
    return {"log": log, "case": fam / "cases.jsonl", "family": fam / "family.yaml", "ana": root / "ana.jsonl",
            "bo": root / "bo.jsonl", "pairs": root / "pairs.jsonl", "trace": trace, "spec": root / "spec" / "family.yaml",
            "adjudicated": root / "final.adjudicate.jsonl"}


COMMANDS = [  # argv (paths by name), the file --out would destroy, what the message calls it
    (["html", "{log}", "--out", "{log}", "--cases", "cases"], "log", "the record log or report"),
    (["html", "{log}", "--out", "{case}", "--cases", "cases"], "case", "a case file of the family in *cases/demo"),
    (["baseline", "save", "{log}", "--out", "{family}"], "family", "the family file of the family in *cases/demo"),
    (["label", "export", "{case}", "--out", "{case}"], "case", "a case file"),
    (["label", "import", "{case}", "--labels", "{ana}", "--out", "{ana}"], "ana", "the labelling file (--labels)"),
    (["merge", "{ana}", "{bo}", "--out", "{bo}"], "bo", "a label file"),
    (["merge", "{ana}", "{bo}", "--out", "{root}/final.jsonl", "--adjudicated", "{adjudicated}"], "adjudicated",
     "the adjudicated labels (--adjudicated)"),
    (["calibrate-judge", "{pairs}", "--judge-model", "openai/none", "--out", "{pairs}"], "pairs", "the pairs file"),
    (["sample", "{trace}", "--out", "{root}/fam", "--name", "trace.jsonl"], "trace", "a trace file"),
    (["generate", "{spec}", "--out", "{root}/spec"], "spec", "the spec"),
    (["import", "labelled-jsonl", "--input", "{case}", "--out", "{root}/cases/demo"], "case",
     "the rows it imports (--input)"),
]


@pytest.mark.parametrize(("argv", "target", "what"), COMMANDS, ids=[" ".join(a[:2]) + f"-{t}" for a, t, _ in COMMANDS])
def test_a_commands_out_on_a_file_it_reads_is_refused_in_one_line(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], argv: list[str], target: str, what: str) -> None:
    import fnmatch

    files = _command_inputs(pytester.path)
    _labels(files["adjudicated"], ["a"], None)  # the adjudicated labels, where merge lists what needs adjudication
    before = {p: p.read_bytes() for p in files.values()}
    assert main([a.format(**{k: str(v) for k, v in files.items()}, root=pytester.path) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert fnmatch.fnmatch(err, f"tooleffect *: * {files[target]}*: is {what}, which this command reads: writing * "
                                "there would overwrite it; give * a path of its own"), err
    assert {p: p.read_bytes() for p in files.values()} == before


@pytest.mark.parametrize("argv", [["html", "{log}", "--out", "{out}"], ["baseline", "save", "{log}", "--out", "{out}"],
                                  ["label", "export", "{case}", "--out", "{out}"]], ids=lambda a: " ".join(a[:2]))
@pytest.mark.parametrize("out", ["/dev/zero", "adir"])
def test_a_commands_out_that_is_not_a_regular_file_is_refused(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], argv: list[str], out: str) -> None:
    files = _command_inputs(pytester.path)
    (pytester.path / "adir").mkdir()
    assert main([a.format(**{k: str(v) for k, v in files.items()}, out=out) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    kind = "a character device" if out.startswith("/dev") else "a directory"
    assert err.endswith(f"--out {out}: is {kind}, not a regular file; give a file path"), err
    assert list((pytester.path / "adir").iterdir()) == []


@pytest.mark.parametrize(("name", "text"), [("conftest.py", "x = 1\n"), ("agent.py", "x = 1\n"),
                                           ("setup.cfg", "[metadata]\nname = x\n"), ("tox.ini", "[tox]\n")])
def test_an_output_on_an_existing_source_or_configuration_file_is_refused(pytester: pytest.Pytester,
                                                                          name: str, text: str) -> None:
    """No output is a Python source or a configuration file: an existing one is never overwritten,
    whether or not the run reads it (an agent module, a conftest the run never names).
    """
    write_demo(pytester.path, PASSING)
    target = pytester.path / name
    target.write_text(text)
    result = pytester.runpytest("cases/", f"{OPT_REPORT}={name}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {OPT_REPORT} {name}*: is an existing * file (source or configuration*"])
    assert target.read_text() == text


@pytest.mark.parametrize("args", [["html", "{log}", "--out", "pyproject.toml"],
                                  ["baseline", "save", "{log}", "--out", "pyproject.toml"],
                                  ["html", "{log}", "--out", "conftest.py"]])
def test_a_commands_out_on_a_configuration_file_is_refused(pytester: pytest.Pytester, args: list[str],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    write_demo(pytester.path, PASSING)
    pytester.runpytest("cases/", f"{OPT_RECORDS}=rec.jsonl").assert_outcomes(passed=3)
    for name in ("pyproject.toml", "conftest.py"):
        (pytester.path / name).write_text("# kept\n")
    log = str(pytester.path / "rec.jsonl")
    argv = [a.format(log=log) for a in args]
    argv[-1] = str(pytester.path / argv[-1])
    capsys.readouterr()
    assert main(argv) == 2
    assert "is an existing" in capsys.readouterr().err
    assert (pytester.path / "pyproject.toml").read_text() == "# kept\n"
    assert (pytester.path / "conftest.py").read_text() == "# kept\n"


def test_a_rate_file_whose_folder_cannot_be_made_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, PASSING)
    result = pytester.runpytest("cases/", "--tooleffect-model=openai/x", "--tooleffect-api-base=http://127.0.0.1:9/v1",
                                "--tooleffect-rpm=100", "-o", "tooleffect_rate_file=/proc/nonexist/x")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: ini tooleffect_rate_file = */proc/nonexist/x*"])
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


@pytest.mark.parametrize("field", ["family", "policy"])
def test_a_name_with_a_control_character_or_an_override_is_refused(field: str) -> None:
    """Family and policy names are shown in test ids and on the terminal, where pytest prints them as
    they are: an escape sequence or a bidirectional override in one is refused when it is read.
    """
    from pydantic import ValidationError

    from pytest_tooleffect.formats import Family, Policy

    for bad in ("demo\x1b[31m", "pol\x1b]0;T\x07", "a\u202eb", "x\n### forged"):
        with pytest.raises(ValidationError, match="a control character or a bidirectional override"):
            Family(name=bad) if field == "family" else Policy(name=bad)
    assert (Family(name="démo-日本") if field == "family" else Policy(name="démo-日本")).name == "démo-日本"


# ------------------------------------------------------ the process's own streams, /dev and /proc, folder names

RUN_OUTPUTS = [OPT_RECORDS, OPT_REPORT, OPT_HTML, OPT_SUMMARY_MD]


@pytest.mark.subprocess
@pytest.mark.parametrize("option", RUN_OUTPUTS)
@pytest.mark.parametrize("fd", [1, 2])
def test_an_output_on_the_runs_own_stream_redirected_to_a_file_is_refused(
        pytester: pytest.Pytester, option: str, fd: int) -> None:
    """The issue's reproduction (``--tooleffect-records /dev/stdout`` with stdout a file: the run's
    terminal output tore the records).  ``/dev/stdout`` is spelled as a link of the test's own,
    ``std -> /proc/self/fd/N``: should the check ever let it through, what is replaced is that link,
    never the machine's ``/dev/stdout``."""
    write_demo(pytester.path, PASSING)
    (pytester.path / "std").symlink_to(f"/proc/self/fd/{fd}")
    result = pytester.runpytest_subprocess("cases/", f"{option}=std")  # stdout and stderr are files
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    name = {1: "output", 2: "error"}[fd]
    result.stderr.fnmatch_lines([f"ERROR: {option} *std (resolved: *): is this process's standard {name}: the "
                                 f"terminal output written there would tear the file {option} writes; give a file "
                                 "path of its own"])
    assert "passed" not in result.stdout.str() and (pytester.path / "std").is_symlink()


@pytest.mark.subprocess
def test_an_output_on_the_runs_own_stdout_as_a_pipe_is_refused_in_words(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, PASSING)
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "cases/",
                          f"{OPT_RECORDS}=/dev/stdout"], cwd=pytester.path, capture_output=True, text=True,
                         timeout=120, env=os.environ.copy())
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert f"ERROR: {OPT_RECORDS} /dev/stdout (resolved: " in run.stderr
    assert "): is a named pipe (FIFO), not a regular file; give a file path" in run.stderr
    assert ".lock" not in run.stderr


@pytest.mark.parametrize("option", RUN_OUTPUTS)
def test_a_regular_file_under_dev_is_refused(pytester: pytest.Pytester, option: str) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm on this system")
    write_demo(pytester.path, PASSING)
    target = shm / f"tooleffect-{os.getpid()}-{option.strip('-')}.out"
    try:
        result = pytester.runpytest("cases/", f"{option}={target}")
        assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
        result.stderr.fnmatch_lines([f"ERROR: {option} {target}: lies under /dev, which holds devices and processes' "
                                     "streams, not files; give a file path (/dev/null alone takes an output and "
                                     "discards it)"])
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)


@pytest.mark.parametrize("option", RUN_OUTPUTS)
def test_an_output_path_ending_in_a_separator_is_a_usage_error(pytester: pytest.Pytester, option: str) -> None:
    write_demo(pytester.path, PASSING)
    result = pytester.runpytest("cases/", f"{option}=rr/")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"*argument {option}: 'rr/' ends in '/', so it names a folder; this option writes "
                                 "one file: give its name (e.g. rr/NAME)"])
    assert not (pytester.path / "rr").exists()


def test_an_ini_record_log_ending_in_a_separator_is_a_usage_error(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, PASSING)
    pytester.makeini("[pytest]\ntooleffect_records = logs/\n")
    result = pytester.runpytest("cases/")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines(["ERROR: ini tooleffect_records = 'logs/': ends in '/', so it names a folder; the "
                                 "record log is one file: give its name (e.g. reports/tooleffect-records.jsonl)"])
    assert not (pytester.path / "logs").exists()


@pytest.mark.parametrize("option", RUN_OUTPUTS)
def test_an_output_named_as_a_new_familys_file_is_refused(pytester: pytest.Pytester, option: str) -> None:
    """The next run would collect ``cases/new/family.yaml`` as a family and fail on it."""
    write_demo(pytester.path, PASSING)
    result = pytester.runpytest("cases/", f"{option}=cases/new/family.yaml")
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    result.stderr.fnmatch_lines([f"ERROR: {option} *cases/new/family.yaml*: would be collected as the "
                                 "family file of a family in *cases/new: the next run would read the output as cases*"])
    assert not (pytester.path / "cases" / "new").exists()
