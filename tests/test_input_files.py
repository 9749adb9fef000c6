"""Bounded reads: no input a command opens (record logs, JSON reports, baselines, label files, case
files) can exhaust memory or hang it: a device such as ``/dev/zero`` or a folder is refused at once,
a file larger than the limit before a byte of it is read, a pipe once it has sent more than the limit.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from pytest_tooleffect.util.input_files import (
    MAX_INPUT_ENV,
    InputFileError,
    max_input_bytes,
    open_input,
    read_input_bytes,
    read_input_text,
)

#: the address space a command gets in these tests: reading /dev/zero whole would pass it in a second
MEMORY_CAP = 2 << 30


def test_a_device_and_a_folder_are_refused_without_reading(tmp_path: Path) -> None:
    with pytest.raises(InputFileError, match="is a character device, not a file to read") as info:
        read_input_bytes("/dev/zero")
    assert info.value.filename == "/dev/zero"
    with pytest.raises(InputFileError, match="is a directory"):
        read_input_text(tmp_path)


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big.jsonl"
    big.write_bytes(b"{}\n" * 700)
    monkeypatch.setenv(MAX_INPUT_ENV, "2048")
    assert max_input_bytes() == 2048
    with pytest.raises(InputFileError, match=r"holds 2.05 KiB, more than the 2 KiB an input may hold \(set "
                                             rf"{MAX_INPUT_ENV} in bytes for a larger one\)"):
        read_input_bytes(big)
    monkeypatch.setenv(MAX_INPUT_ENV, "2100")
    assert read_input_bytes(big) == b"{}\n" * 700
    monkeypatch.setenv(MAX_INPUT_ENV, "2 GB")
    with pytest.raises(ValueError, match=f"{MAX_INPUT_ENV}='2 GB': the most bytes"):
        read_input_bytes(big)


def test_a_pipe_is_read_as_it_comes_up_to_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    monkeypatch.setenv(MAX_INPUT_ENV, str(1 << 20))

    def read_while_fed(chunks: int) -> bytes:
        """Open the pipe for writing (a reader held open meanwhile, so neither side waits), feed it
        ``chunks`` of 64 KiB from a thread and read it by :func:`open_input`."""
        held = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        fd = os.open(fifo, os.O_WRONLY)

        def write() -> None:
            with open(fd, "wb") as fh:
                try:
                    for _ in range(chunks):
                        fh.write(b"x" * 65536)
                except BrokenPipeError:  # the reader stopped at the limit
                    pass

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        try:
            with open_input(fifo) as fh:
                os.close(held)
                held = -1
                return fh.read()
        finally:
            if held >= 0:
                os.close(held)
            writer.join(10)
            assert not writer.is_alive()

    assert len(read_while_fed(4)) == 4 * 65536  # 256 KiB: under the limit
    with pytest.raises(InputFileError, match="holds more than the 1 MiB an input may hold"):
        read_while_fed(10_000)  # 625 MiB, endless as far as the limit goes: stopped past 1 MiB


def test_a_pipe_nobody_writes_to_reads_as_empty_instead_of_waiting(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(read_input_bytes(fifo)), daemon=True)
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "the read waits for a writer"
    assert got == [b""]


def test_line_ends_are_read_as_path_read_text_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "prompt.txt"
    path.write_bytes(b"\xef\xbb\xbfa\r\nb\rc\n")
    assert read_input_text(path, "utf-8-sig") == path.read_text(encoding="utf-8-sig") == "a\nb\nc\n"


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


READS_IT = "is a character device, not a file to read"
DEV_ZERO = [
    (["html", "/dev/zero", "--out", "page.html"], READS_IT),
    (["baseline", "save", "/dev/zero", "--out", "base.json"], READS_IT),
    (["compare", "/dev/zero", "/dev/zero"], READS_IT),
    (["report", "/dev/zero"], READS_IT),
    (["agree", "/dev/zero", "/dev/zero"], READS_IT),
    (["merge", "/dev/zero", "--out", "final.jsonl"], READS_IT),
    (["label", "export", "/dev/zero", "--out", "states.jsonl"], READS_IT),
    (["label", "import", "/dev/zero", "--labels", "labels.jsonl"],  # the case file is written in place
     "the case file /dev/zero: is a character device, not a regular file"),
    (["sample", "/dev/zero", "--out", "fam"], READS_IT),
    (["generate", "/dev/zero", "--out", "fam"], READS_IT),
    (["import", "labelled-jsonl", "--input", "/dev/zero", "--out", "fam"], READS_IT),
]


@pytest.mark.parametrize(("argv", "says"), DEV_ZERO, ids=[" ".join(a[:2]) for a, _ in DEV_ZERO])
def test_a_command_given_dev_zero_refuses_it_in_one_line(tmp_path: Path, argv: list[str], says: str) -> None:
    """Run as users run it, in a child process whose memory is capped: before, ``html`` and every
    JSON Lines reader read ``/dev/zero`` until memory ran out."""
    (tmp_path / "labels.jsonl").write_text('{"id": "x", "valid_actions": [{"tool": null}]}\n')
    done = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", *argv], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, preexec_fn=_cap_memory, env=os.environ.copy())
    err = done.stderr.strip()
    assert done.returncode == 2, (done.returncode, err[-2000:])
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err[-2000:]
    assert "/dev/zero" in err and says in err and "[Errno" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels.jsonl"]  # nothing written


def test_a_record_log_over_the_limit_is_refused_by_the_commands_that_read_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_tooleffect.cli import main

    monkeypatch.chdir(tmp_path)  # no cases/ folder here: the log is the only input
    log = tmp_path / "rec.jsonl"
    log.write_text('{"id": "x"}\n' * 200)
    monkeypatch.setenv(MAX_INPUT_ENV, "1000")
    for argv in (["html", str(log), "--out", str(tmp_path / "p.html")], ["report", str(log)],
                 ["baseline", "save", str(log), "--out", str(tmp_path / "b.json")], ["compare", str(log), str(log)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "holds 2.34 KiB, more than the 1000 bytes an input may hold" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.jsonl"]


# ------------------------------------------------------------------ pipes given to the commands


def _record_log(pytester: pytest.Pytester) -> bytes:
    """A demo run's record log (6 records)."""
    from tests.demo_family import write_demo

    write_demo(pytester.path)
    pytester.runpytest("cases/", "--tooleffect-records=log.jsonl")
    data = (pytester.path / "log.jsonl").read_bytes()
    assert data.count(b"\n") == 6
    return data


def _pipe_of(data: bytes) -> str:
    """``/dev/fd/N`` of a pipe that holds ``data`` and whose writer is closed (as ``cat LOG |`` gives)."""
    r, w = os.pipe()
    threading.Thread(target=lambda: (os.write(w, data), os.close(w)), daemon=True).start()
    return f"/dev/fd/{r}"


def test_html_report_and_compare_read_a_record_log_from_a_pipe(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, ``html /dev/stdin`` said "no record" (the pipe was read twice), ``report /dev/stdin`` said
    "no such record log or folder" and ``compare LOG <(cat LOG)`` said "no records"."""
    from pytest_tooleffect.cli import main

    data = _record_log(pytester)
    log = str(pytester.path / "log.jsonl")
    capsys.readouterr()
    # the demo's case with no recorded decision has no record: the page is written, and says incomplete (exit 1)
    assert main(["html", _pipe_of(data), "--out", str(pytester.path / "page.html"), "--cases",
                 str(pytester.path / "cases")]) == 1
    assert "page.html written (6 decisions; status incomplete" in capsys.readouterr().out
    assert main(["report", _pipe_of(data), "--cases", str(pytester.path / "cases"), "--json"]) in (0, 1)
    assert sum(b["n_scored"] for b in json.loads(capsys.readouterr().out)["blocks"]) == 6
    assert main(["compare", log, _pipe_of(data)]) == 0
    assert "exit 0: 0 regressions" in capsys.readouterr().out
    # the demo's case with no recorded decision has no record: the run is not complete
    assert main(["baseline", "save", _pipe_of(data), "--out", str(pytester.path / "b.json")]) == 1
    assert "the run is not complete: 6 of 7 selected items have a record" in capsys.readouterr().err
    assert main(["baseline", "save", _pipe_of(data), "--out", str(pytester.path / "b.json"),
                 "--allow-incomplete"]) == 0


def test_a_named_pipe_is_a_record_log_too(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_tooleffect.cli import main

    data = _record_log(pytester)
    fifo = pytester.path / "fifo"
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # so that the writer's open does not wait for a reader
    w = os.open(fifo, os.O_WRONLY)
    threading.Thread(target=lambda: (os.write(w, data), os.close(w)), daemon=True).start()
    try:
        capsys.readouterr()
        assert main(["compare", str(pytester.path / "log.jsonl"), str(fifo)]) == 0
    finally:
        os.close(keep)
    assert "exit 0: 0 regressions" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "says"), [
    (["report", "cases"], "cases: a folder with no *.jsonl record log"),
    (["report", "missing.jsonl"], "missing.jsonl: no such record log or folder"),
    (["report", "/dev/null"], "/dev/null: is a character device, not a file to read: a record log (JSONL), a pipe "
                              "or a folder of logs"),
    (["agree", "cases", "cases"], "cases: is a directory, not a file to read"),
    (["agree", "missing.jsonl", "missing.jsonl"], "missing.jsonl: no such file"),
])
def test_what_is_neither_a_file_nor_a_pipe_is_named_for_what_it_is(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, argv: list[str],
        says: str) -> None:
    from pytest_tooleffect.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "cases").mkdir()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err, err


def test_agree_reads_label_files_from_pipes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, a pipe was refused as "not a regular file"."""
    from pytest_tooleffect.cli import main

    labels = b'{"id": "x", "valid_actions": [{"tool": null}]}\n'
    assert main(["agree", _pipe_of(labels), _pipe_of(labels), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n"] == 1


def test_an_empty_pipe_is_said_to_be_one_not_an_empty_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, ``html`` blamed the log ("an empty log: did the run decide anything?") for a pipe that
    gave nothing, as a named pipe whose writer opens late does."""
    from pytest_tooleffect.cli import main

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    said = "(a pipe through which nothing came: its writer wrote nothing, or had not opened it when it was read"
    assert main(["html", str(fifo), "--out", str(tmp_path / "p.html")]) == 2
    assert f"tooleffect html: no record in {fifo}: nothing to draw {said}" in capsys.readouterr().err
    assert main(["report", _pipe_of(b"")]) == 2
    assert said in capsys.readouterr().err
    assert not (tmp_path / "p.html").exists()
