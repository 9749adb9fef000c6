"""Every JSON Lines input refuses what JSON does not allow, names the file and the line, and never
raises a traceback; empty inputs and repeated ids are said, never taken as a result."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.collect.cases import case_refs
from pytest_tooleffect.collect.family import load_family
from pytest_tooleffect.data.labelling import read_labels
from pytest_tooleffect.report.record_log import load_records
from pytest_tooleffect.util.jsonl import json_lines
from tests.demo_family import CASES, write_demo
from tests.test_html import record_row

DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize(("line", "why"), [
    (DEEP, "not read: nested too deeply"),
    (b'{"latency_ms": NaN}', "not valid JSON: NaN is not a JSON number"),
    (b'{"input_tokens": Infinity}', "not valid JSON: Infinity is not a JSON number"),
    (b'{"x": -Infinity}', "not valid JSON: -Infinity is not a JSON number"),
    (b'\x1e{"id": "b"}', "not valid JSON: starts with a record separator (0x1e) or a byte-order mark"),
    (b'\xef\xbb\xbf{"id": "b"}', "not valid JSON: starts with a record separator (0x1e) or a byte-order mark"),
    (b"\x1e", "not valid JSON: Expecting value (column 1)"),
    (b'{"id": "b"', "not valid JSON: Expecting ',' delimiter (column 11)"),
    (b'{"id": "\xff"}', "not UTF-8 text (invalid start byte at byte 8)"),
])
def test_a_line_json_does_not_allow_is_named_and_the_rest_is_read(tmp_path: Path, line: bytes, why: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "a"}\r\n\n \t\n' + line + b'\n{"id": "c"}\n')
    assert list(json_lines(path)) == [(1, {"id": "a"}, None), (4, None, why), (5, {"id": "c"}, None)]


def _labels(path: Path, ids: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "valid_actions": [{"tool": "t"}]}) + "\n" for i in ids))
    return path


@pytest.mark.parametrize("argv", [["agree", "{deep}", "{a}"], ["merge", "{deep}", "{a}", "--out", "{out}"],
                                  ["label", "export", "{deep}", "--out", "{out}"], ["report", "{deep}"],
                                  ["html", "{deep}", "--out", "{out}"], ["sample", "{deep}", "--out", "{fam}"]])
def test_deep_nesting_is_an_error_naming_the_line_on_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                    argv: list[str]) -> None:
    deep = tmp_path / "deep.jsonl"
    deep.write_bytes(DEEP + b"\n")
    names = {"deep": str(deep), "a": str(_labels(tmp_path / "a.jsonl", ["s1"])), "out": str(tmp_path / "o.jsonl"),
             "fam": str(tmp_path / "fam")}
    assert main([a.format(**names) for a in argv]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "line 1" in err and "nested too deeply" in err, err


def test_a_record_log_with_nan_is_refused_and_only_a_torn_last_line_says_so(tmp_path: Path) -> None:
    good = json.dumps(record_row("p", "c1", "ok", True))
    log = tmp_path / "records.jsonl"
    log.write_text(good + "\n" + good.replace('"latency_ms": 5.0', '"latency_ms": NaN') + "\n" + good + "\n")
    with pytest.raises(ValueError, match=r"^line 2: not valid JSON: NaN is not a JSON number$"):
        load_records(log)
    log.write_text(good + "\n" + good[:40])
    with pytest.raises(ValueError, match=r"^line 2: not valid JSON: .*; the last line is torn: the run that wrote "
                                         r"it was cut$"):
        load_records(log)
    log.write_text(good + "\n" + good[:40] + "\n")  # a bad last line the writer ended: not a cut run
    with pytest.raises(ValueError, match=r"^line 2: not valid JSON: [^;]*$"):
        load_records(log)


def test_a_file_that_is_no_record_log_is_named_so_not_as_a_cut_run(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Break-it row 92: a binary file named ``.jsonl`` was said to be torn by a cut run."""
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b"\x7fELF\x02\x01\x01\xff" + bytes(range(11, 256)) * 8 + b"\n" + b"\xff" * 100)
    assert main(["report", str(binary)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tooleffect report: {binary}: line 1: not UTF-8 text (invalid start byte at byte 7): not a "
                   "tooleffect record log"], err
    text = tmp_path / "notes.jsonl"
    text.write_text("hello\n")
    with pytest.raises(ValueError, match=r"^line 1: not valid JSON: .*: not a tooleffect record log$"):
        load_records(text)
    good = json.dumps(record_row("p", "c1", "ok", True))
    other = tmp_path / "other.jsonl"
    other.write_text('{"a": 1}\n' + good[:40])  # JSON lines before, but not records: no run of ours cut it
    with pytest.raises(ValueError, match=r"^line 2: not valid JSON: [^;]*$"):
        load_records(other)
    first = tmp_path / "first.jsonl"
    first.write_text(good[:40])  # a run cut while writing its first record
    with pytest.raises(ValueError, match=r"^line 1: not valid JSON: .*; the last line is torn"):
        load_records(first)


def test_a_file_of_cr_ended_lines_is_named_as_such_in_case_files_and_record_logs(tmp_path: Path) -> None:
    """JSON Lines ends a line at LF: a file whose lines end in CR alone reads as one line, and its
    error says so, in a record log and in a case file; CRLF lines read as lines.
    """
    good = json.dumps(record_row("p", "c1", "ok", True))
    log = tmp_path / "records.jsonl"
    log.write_bytes((good + "\r" + good + "\r").encode())
    with pytest.raises(ValueError, match=r"^line 1: not valid JSON: Extra data .*; the line holds a bare carriage "
                                         r"return \(CR\): are the file's lines ended by CR alone\? JSON Lines ends "
                                         r"each line with LF \(or CRLF\)$"):
        load_records(log)
    log.write_bytes((good + "\r\n" + good + "\r\n").encode())
    assert len(load_records(log)) == 2
    fam = write_demo(tmp_path, CASES[:3])
    cases = fam / "cases.jsonl"
    cases.write_bytes(cases.read_bytes().replace(b"\n", b"\r"))
    _, problems = case_refs(cases, load_family(fam), set())
    (problem,) = problems
    assert "line 1 is not valid JSON: Extra data" in str(problem) and "bare carriage return (CR)" in str(problem)
    cases.write_bytes(cases.read_bytes().replace(b"\r", b"\r\n"))
    refs, problems = case_refs(cases, load_family(fam), set())
    assert problems == [] and [r.id for r in refs] == [c["id"] for c in CASES[:3]]


def test_html_refuses_an_empty_log_and_names_a_bad_lines_number(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n")
    assert main(["html", str(empty), "--out", str(tmp_path / "e.html")]) == 2
    assert f"no record in {empty}: nothing to draw" in capsys.readouterr().err
    assert not (tmp_path / "e.html").exists()
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(json.dumps(record_row("p", "c1", "ok", True)).encode() + b"\n{\"id\": \"\xff\"}\n")
    assert main(["html", str(binary), "--out", str(tmp_path / "b.html")]) == 2
    assert f"{binary}: line 2: not UTF-8 text (invalid start byte at byte 8)" in capsys.readouterr().err


def test_a_label_file_that_labels_a_state_twice_is_refused(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    twice = _labels(tmp_path / "twice.jsonl", ["s1", "s2", "s1"])
    with pytest.raises(ValueError, match=r"twice.jsonl: line 3: id 's1' is labelled again \(first on line 1\)"):
        read_labels(twice)
    other = _labels(tmp_path / "b.jsonl", ["s1", "s2"])
    for argv in (["agree", str(twice), str(other)], ["merge", str(twice), str(other), "--out", str(tmp_path / "m")]):
        assert main(argv) == 2
        assert "line 3: id 's1' is labelled again" in capsys.readouterr().err


def test_merge_refuses_an_empty_labeller_and_counts_labels_resting_on_one(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _labels(tmp_path / "a.jsonl", ["s1", "s2", "s3"]), _labels(tmp_path / "b.jsonl", ["s1"])
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["merge", str(empty), str(a), "--out", str(tmp_path / "m.jsonl")]) == 2
    assert capsys.readouterr().err.strip() == f"tooleffect merge: {empty}: holds no label"
    assert main(["merge", str(a), str(b), "--out", str(tmp_path / "m.jsonl")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"tooleffect merge: 3 final labels to {tmp_path / 'm.jsonl'}; 0 need adjudication; 2 of the final labels "
        "come from one labeller only (no agreement to check)")
    assert main(["agree", str(tmp_path), str(a)]) == 2
    assert capsys.readouterr().err.strip() == f"tooleffect agree: {tmp_path}: is a directory, not a file to read"


def _run(pytester: pytest.Pytester, fam: Path, content: bytes) -> Any:
    (fam / "more.jsonl").write_bytes(content)
    return pytester.runpytest("cases/", "--tooleffect-no-summary")


def test_an_empty_case_file_and_a_separator_only_line_are_problems_of_the_file(pytester: pytest.Pytester) -> None:
    fam = write_demo(pytester.path)  # every *.jsonl beside family.yaml is a case file of the family
    result = _run(pytester, fam, b"")
    result.stdout.fnmatch_lines(["*more.jsonl: file: <file>: holds no case (an empty case file)*"])
    result = _run(pytester, fam, b"\x1e\n")
    result.stdout.fnmatch_lines(["*more.jsonl: file: <file>: line 1 is not valid JSON*"])
