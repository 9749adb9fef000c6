"""The ``tooleffect`` command line as a Unix tool: a reader that goes away (``| head -1``) ends it quietly."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_tooleffect.cli import SIGPIPE_STATUS
from tests.demo_family import write_demo


@pytest.fixture(scope="module")
def a_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A record log of the demo family (for the commands that read one)."""
    root = tmp_path_factory.mktemp("run")
    write_demo(root)
    subprocess.run([sys.executable, "-m", "pytest", "cases/", "-p", "no:cacheprovider", "-q",
                    "--tooleffect-records=records.jsonl"], cwd=root, capture_output=True, check=False)
    assert (root / "records.jsonl").read_text().count("\n") == 6
    return root


@pytest.mark.parametrize("argv", [
    ["schema", "case"], ["schema", "family"], ["schema", "record"], ["schema", "report"],
    ["report", "records.jsonl"], ["report", "records.jsonl", "--json"],
    ["compare", "records.jsonl", "records.jsonl"], ["compare", "records.jsonl", "records.jsonl", "--json"],
    ["baseline", "save", "records.jsonl", "--out", "base.json", "--allow-incomplete"],  # an item has no record
], ids=lambda argv: " ".join(argv))
def test_a_reader_that_goes_away_ends_the_command_quietly(a_run: Path, argv: list[str]) -> None:
    """``tooleffect schema case | head -1`` printed ``tooleffect schema: Broken pipe`` and exited 2 (or a
    traceback at the interpreter's last flush).  Now nothing is printed and the status is a Unix tool's
    killed by SIGPIPE (141), for every command that prints to stdout.
    """
    with subprocess.Popen([sys.executable, "-m", "pytest_tooleffect.cli", *argv], cwd=a_run,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the reader goes away before the command writes its first line
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == SIGPIPE_STATUS, err
    assert "Broken pipe" not in err and "BrokenPipeError" not in err and "Traceback" not in err, err


def test_a_reader_that_stays_gets_everything(a_run: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "schema", "case"], cwd=a_run,
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["title"] == "Case" and out.stderr == ""



@pytest.mark.parametrize(("argv", "closes", "written"), [
    (["report", "records.jsonl"], ">&-", None),
    (["html", "records.jsonl", "--out", "closed.html"], ">&-", "closed.html"),
    (["baseline", "save", "records.jsonl", "--out", "closed.json", "--allow-incomplete"], ">&- 2>&-", "closed.json"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_a_closed_stdout_leaves_the_status_the_command_earned(a_run: Path, argv: list[str], closes: str,
                                                              written: str | None) -> None:
    """``tooleffect html LOG --out h.html >&-`` wrote the page, then died on ``sys.stdout.flush()`` (stdout
    is ``None`` when fd 1 is closed) with an ``AttributeError`` and exit 1.  Now a closed stdout or stderr
    is nothing to print to: the status is the one the command earns with them open, its file written.
    """
    command = [sys.executable, "-m", "pytest_tooleffect.cli", *argv]
    earned = subprocess.run(command, cwd=a_run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            timeout=120, check=False).returncode
    if written:
        (a_run / written).unlink()
    proc = subprocess.run(["bash", "-c", f'"$0" "$@" {closes}; echo "status=$?"', *command], cwd=a_run,
                          capture_output=True, text=True, timeout=120, check=False)
    assert f"status={earned}" in proc.stdout, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "AttributeError" not in proc.stderr, proc.stderr
    if written:
        assert (a_run / written).stat().st_size > 0


def test_ctrl_c_in_a_command_is_one_line_and_status_130(tmp_path: Path) -> None:
    """Ctrl-C while a command works (here ``plan`` waiting on its input) ends it with one line on
    stderr, no traceback, and the status a shell gives SIGINT (130)."""
    import os
    import signal

    fifo = tmp_path / "baseline.fifo"
    os.mkfifo(fifo)
    with subprocess.Popen([sys.executable, "-m", "pytest_tooleffect.cli", "plan", str(fifo)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        writer = os.open(fifo, os.O_WRONLY)  # returns once the command has opened it to read: it is running
        try:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=120)
        finally:
            os.close(writer)
    assert proc.returncode == 130, err
    assert err.strip() == "tooleffect plan: interrupted" and "Traceback" not in err and out == ""


# --------------------------------------------------------------------- every number, checked as it is parsed

@pytest.mark.parametrize(("argv", "said"), [
    (["import", "mcp", "--timeout", "-1"], "argument --timeout: '-1' must be a number of seconds above 0"),
    (["import", "mcp", "--timeout", "inf"], "argument --timeout: 'inf' must be a number of seconds above 0"),
    (["import", "bfcl", "--limit", "0"], "argument --limit: '0' must be at least 1"),
    (["import", "tau-airline", "--seed", "-1"], "argument --seed: '-1' must be at least 0"),
    (["import", "tau-airline", "--quota", "first=0"],
     "argument --quota: first=0: counts are whole numbers from 1 to 100,000"),
    (["agree", "a.jsonl", "b.jsonl", "--show", "-1"], "argument --show: '-1' must be at least 0"),
    (["sample", "t.jsonl", "--out", "f", "--seed", "-5"], "argument --seed: '-5' must be at least 0"),
    (["serve", "--port", "0"], "argument --port: '0' must be at least 1 (a TCP port)"),
    (["serve", "--port", "70000"], "argument --port: '70000' must be at most 65,535 (a TCP port)"),
    (["model", "status", "--port", "-1"], "argument --port: '-1' must be at least 1 (a TCP port)"),
    (["model", "serve", "--threads", "0"], "argument --threads: '0' must be at least 1"),
    (["model", "serve", "--max-tokens", "-384"], "argument --max-tokens: '-384' must be at least 1"),
])
def test_every_number_a_command_takes_is_checked_when_parsed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        argv: list[str], said: str) -> None:
    from pytest_tooleffect.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip().splitlines()[-1].endswith(f": error: {said}"), captured.err
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------- every command's output file

OUT_COMMANDS = [  # argv; {log}: the demo run's record log, {out}: the output path under test
    ["html", "{log}", "--out", "{out}"],
    ["baseline", "save", "{log}", "--out", "{out}"],
    ["baseline", "init", "--from", "{log}", "--out", "{out}"],
    ["label", "export", "{case}", "--out", "{out}"],
    ["merge", "{labels}", "--out", "{out}"],
    ["calibrate-judge", "{labels}", "--judge-model", "openai/x", "--out", "{out}"],
    ["calibrate-replies", "{replies}", "--out", "{out}"],
]


def _names(a_run: Path, out: str) -> dict[str, str]:
    labels = a_run / "labels.jsonl"
    if not labels.exists():
        labels.write_text(json.dumps({"id": "x", "valid_actions": [{"tool": None}], "labelled_by": "a"}) + "\n")
    from tests.conftest import REPO

    return {"log": str(a_run / "records.jsonl"), "case": str(a_run / "cases" / "demo" / "cases.jsonl"),
            "labels": str(labels), "replies": str(REPO / "datasets" / "replies"), "out": out}


@pytest.mark.parametrize("argv", OUT_COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_commands_out_ending_in_a_separator_is_a_usage_error(
        a_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    from pytest_tooleffect.cli import main

    out = f"{tmp_path}/newdir/"
    with pytest.raises(SystemExit) as stopped:
        main([a.format(**_names(a_run, out)) for a in argv])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(f": error: argument --out: '{out}' ends in '/', so it names a folder; this option writes one "
                        f"file: give its name (e.g. {out}NAME)"), err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", OUT_COMMANDS[:5], ids=lambda a: " ".join(a[:2]))
def test_a_commands_out_on_its_own_stdout_redirected_to_a_file_is_refused(
        a_run: Path, tmp_path: Path, argv: list[str]) -> None:
    """``--out /dev/stdout > o.txt``, spelled through a link of the test's own (``std ->
    /proc/self/fd/1``): should the check let it through, the machine's ``/dev/stdout`` is safe."""
    (tmp_path / "std").symlink_to("/proc/self/fd/1")
    with open(tmp_path / "o.txt", "w") as stdout:
        run = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli",
                              *(a.format(**_names(a_run, "std")) for a in argv)],
                             cwd=tmp_path, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip().endswith(f"--out std (resolved: {tmp_path / 'o.txt'}): is this process's standard "
                                       "output: the terminal output written there would tear the file --out writes; "
                                       "give a file path of its own"), run.stderr
    assert (tmp_path / "o.txt").read_text() == "" and (tmp_path / "std").is_symlink()


@pytest.mark.parametrize("argv", OUT_COMMANDS[:5], ids=lambda a: " ".join(a[:2]))
def test_a_commands_out_named_as_a_new_familys_file_is_refused(
        a_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        argv: list[str]) -> None:
    from pytest_tooleffect.cli import main

    monkeypatch.chdir(tmp_path)
    assert main([a.format(**_names(a_run, "cases/new/family.yaml")) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--out cases/new/family.yaml" in err, err
    assert ": would be collected as the family file of a family in " in err
    assert not (tmp_path / "cases").exists()
