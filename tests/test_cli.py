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
