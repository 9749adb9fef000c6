"""What a baseline or a record log holds is quoted escaped in every message about it.

A kind, a policy's name or a record id read from a file is hostile input: an error about it (a
usage error of the run, a ``tooleffect`` command's refusal) and the lines that name it (a known
failure's reason, a comparison's flips) show an escape sequence, NUL or a bidirectional override
as a visible escape, never raw.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.cli import main as cli
from tests.test_baseline import ACCEPTED, accepted_baseline, write_family
from tests.test_display import raw

KIND = "ok\x1b]0;PWN\x07\x1b[2J"
FAILING = "wrong_tool\x1b]0;PWN\x07\u202e\x00"
KNOWN = "bl/k-known[replay]"


def _edit(path: Path, rid: str, **fields: Any) -> None:
    data = json.loads(path.read_text())
    data["decisions"][rid].update(fields)
    path.write_text(json.dumps(data))


def test_a_baseline_kind_holding_escapes_is_refused_escaped(pytester: pytest.Pytester,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Break-it row 83: ``passed true with kind ok<ESC>]0;PWN<BEL><ESC>[2J`` printed raw by the run and
    by ``tooleffect compare``.  A kind the oracle does not know is refused as one, by its field."""
    base = accepted_baseline(pytester)
    _edit(base, "bl/p-pass[replay]", kind=KIND)
    result = pytester.runpytest("cases/", f"--tooleffect-baseline={base}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert raw(err) == [] and "decisions.bl/p-pass[replay].kind: Input should be 'ok', 'ok_no_tool'" in err
    assert cli(["compare", str(base), str(pytester.path / "accepted.jsonl")]) == 2
    err = capsys.readouterr().err
    assert raw(err) == [] and "decisions.bl/p-pass[replay].kind: Input should be 'ok'" in err


def test_a_record_s_policy_holding_escapes_is_refused_escaped(tmp_path: Path, pytester: pytest.Pytester,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Break-it row 84: ``tooleffect baseline save`` printed a record's policy raw."""
    write_family(pytester.path, ACCEPTED)
    pytester.runpytest("cases/", "--tooleffect-records=log.jsonl")
    lines = (pytester.path / "log.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["policy"] += "\x1b]0;PWN\x07"
    (tmp_path / "bad.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert cli(["baseline", "save", str(tmp_path / "bad.jsonl"), "--out", str(tmp_path / "b.json")]) == 2
    err = capsys.readouterr().err
    assert raw(err) == [] and "[replay\\x1b]0;PWN\\x07]" in err and "is not the record id" in err


def test_a_failing_kind_holding_escapes_is_refused_never_shown_raw(pytester: pytest.Pytester,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A failing kind holding escapes, in a baseline file or a record log: it was read as a known
    failure's reason and a comparison's flip (shown escaped); no such kind exists, so the run and every
    command refuse it now, by its field, and nothing they print holds it raw."""
    base = accepted_baseline(pytester)
    _edit(base, KNOWN, kind=FAILING)
    result = pytester.runpytest("cases/", f"--tooleffect-baseline={base}", "-rA")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert raw(result.stdout.str() + result.stderr.str()) == []
    assert f"decisions.{KNOWN}.kind: Input should be" in result.stderr.str()
    log = pytester.path / "accepted.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    failing = next(n for n, r in enumerate(records) if r.get("verdict") and r["verdict"]["kind"] != "ok")
    records[failing]["verdict"]["kind"] = FAILING
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    for argv in (["report", str(log)], ["compare", str(log), str(log)],
                 ["baseline", "save", str(log), "--out", str(pytester.path / "b2.json")]):
        assert cli(argv) == 2
        err = capsys.readouterr().err
        assert raw(err) == [] and f"line {failing + 1} is not a tooleffect record (verdict.kind: Input should be" in err
