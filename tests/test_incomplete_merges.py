"""A report of part of a run is never called complete and never passes the gates: logs whose
records do not say what their run selected (an earlier tooleffect's, or written by hand), and a
merge that lacks records, are ``incomplete`` and exit 1, with or without ``--gates``.  ``tooleffect
html`` and ``tooleffect plan`` check a log as ``report`` does (one function): refused in its words,
or called incomplete.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.options import OPT_RECORDS, OPT_SHARD
from tests.demo_family import CASES, write_demo

PASSING = [CASES[0], CASES[1], CASES[3]]
GATES = '[tool.tooleffect.gates."*"]\nmax_count = {forbidden = 0}\n'  # a gate the passing cases pass


@pytest.fixture
def log(pytester: pytest.Pytester) -> Path:
    """A whole run's record log of three passing decisions, beside a pyproject.toml of gates they pass."""
    write_demo(pytester.path, PASSING)
    (pytester.path / "pyproject.toml").write_text(GATES)
    path = pytester.path / "run.jsonl"
    assert pytester.runpytest("cases/", f"{OPT_RECORDS}={path}").ret == 0
    return path


def _rewrite(path: Path, keep: int | None = None, drop: tuple[str, ...] = ()) -> None:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    records = [{k: v for k, v in r.items() if k not in drop} for r in records[:keep]]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_a_whole_run_with_its_gates_passes(log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(log), "--gates", str(log.parent), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "complete" and data["gates"]["passed"] is True


def test_logs_without_the_selection_stamp_are_incomplete_not_complete(
        log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Break-it row 50: a log of an earlier tooleffect (or by hand), cut short, merged as complete."""
    _rewrite(log, keep=2, drop=("selection", "fingerprints"))
    assert main(["report", str(log), "--json"]) == 1
    out = capsys.readouterr()
    assert json.loads(out.out)["status"] == "incomplete"
    assert "tooleffect report: incomplete: the records do not say what their run selected" in out.err


@pytest.mark.parametrize("cut", ["a record missing", "no selection stamp"])
def test_gates_never_pass_an_incomplete_report(log: Path, capsys: pytest.CaptureFixture[str], cut: str) -> None:
    """Break-it row 211: "every gate passed" and exit_status 0 printed for a merge that lacks records."""
    _rewrite(log, keep=2) if cut == "a record missing" else _rewrite(log, drop=("selection", "fingerprints"))
    assert main(["report", str(log), "--gates", str(log.parent), "--json"]) == 1
    gates = json.loads(capsys.readouterr().out)["gates"]
    assert gates["passed"] is False and gates["exit_status"] == 1
    assert gates["exit_reason"].startswith("exit 1: the report is incomplete")
    assert all(r["status"] == "passed" for r in gates["results"])  # the gates themselves held
    assert main(["report", str(log), "--gates", str(log.parent)]) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("tooleffect gates: exit 1: the report is incomplete") and "every gate passed" not in last


@pytest.fixture
def logs(log: Path, pytester: pytest.Pytester) -> dict[str, Path]:
    """Logs that are not a whole run, beside the whole run's ``log``: cut short, one shard of two,
    every record twice, an unsharded run joined with a shard of another, two runs of other selections.
    """
    root = pytester.path
    shard = root / "s1.jsonl"
    assert pytester.runpytest("cases/", f"{OPT_SHARD}=1/2", f"{OPT_RECORDS}={shard}").ret == 0
    subset = root / "k.jsonl"
    assert pytester.runpytest("cases/", "-k", "a-read", f"{OPT_RECORDS}={subset}").ret == 0
    whole = log.read_text()
    out = {"cut short": root / "cut.jsonl", "shard 1 of 2": shard, "every record twice": root / "twice.jsonl",
           "an unsharded run and a shard": root / "join.jsonl", "two selections": root / "sel.jsonl"}
    out["cut short"].write_text("".join(whole.splitlines(keepends=True)[:2]))
    out["every record twice"].write_text(whole + whole)
    out["an unsharded run and a shard"].write_text(whole + shard.read_text())
    out["two selections"].write_text(whole + subset.read_text())
    return out


def _said(err: str, command: str) -> list[str]:
    return [line.removeprefix(f"tooleffect {command}: ") for line in err.splitlines()]


@pytest.mark.parametrize(("kind", "status"), [("cut short", 1), ("shard 1 of 2", 1), ("every record twice", 2),
                                              ("an unsharded run and a shard", 2), ("two selections", 2)])
def test_html_refuses_or_calls_incomplete_what_report_does(logs: dict[str, Path], kind: str, status: int,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Break-it rows 325-329: html wrote a page saying ``status complete``, exit 0, for each of these logs."""
    path, page = logs[kind], logs[kind].with_suffix(".html")
    cases = str(path.parent / "cases")
    capsys.readouterr()
    assert main(["report", str(path), "--cases", cases]) == status
    said = _said(capsys.readouterr().err, "report")
    assert main(["html", str(path), "--out", str(page), "--cases", cases]) == status
    out = capsys.readouterr()
    assert _said(out.err, "html") == said and said  # the same lines, in report's words
    if status == 2:  # refused: no page
        assert not page.exists() and len(said) == 1
    else:
        assert "status <b>incomplete" in page.read_text() and "status incomplete" in out.out
        assert all(line.startswith("incomplete: ") for line in said)


def test_html_keeps_one_of_a_repeated_record_on_request(logs: dict[str, Path],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path, page = logs["every record twice"], logs["every record twice"].with_suffix(".html")
    capsys.readouterr()
    assert main(["html", str(path), "--out", str(page), "--duplicates", "first"]) == 0
    out = capsys.readouterr()
    assert "3 repeated records left out (--duplicates first)" in out.err and "(3 decisions)" in out.out
    assert "status <b>complete" in page.read_text()


@pytest.mark.parametrize("command", ["plan", "compare"])
@pytest.mark.parametrize("kind", ["an unsharded run and a shard", "two selections"])
def test_plan_and_compare_refuse_two_runs_joined_as_report_does(logs: dict[str, Path], kind: str, command: str,
                                                                log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Break-it row 330: plan pooled two runs' decisions in silence."""
    capsys.readouterr()
    assert main(["report", str(logs[kind])]) == 2
    said = _said(capsys.readouterr().err, "report")
    assert main([command, str(logs[kind])] if command == "plan" else [command, str(log), str(logs[kind])]) == 2
    out = capsys.readouterr()
    assert out.out == "" and _said(out.err, command) == said


@pytest.mark.parametrize("command", ["plan", "compare"])
def test_a_record_twice_is_refused_without_naming_an_option_the_command_lacks(
        logs: dict[str, Path], log: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    twice = logs["every record twice"]
    capsys.readouterr()
    assert main([command, str(twice)] if command == "plan" else [command, str(log), str(twice)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and f"is twice in {twice}: a repeated record would be counted twice" in lines[0]
    assert "--duplicates" not in lines[0] and lines[0].startswith(f"tooleffect {command}: ")


@pytest.mark.parametrize("kind", ["cut short", "shard 1 of 2"])
def test_plan_refuses_part_of_a_run_unless_allowed(logs: dict[str, Path], kind: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Break-it row 332: plan measured shard 1 of 2 alone with no word of the missing shard."""
    path = logs[kind]
    capsys.readouterr()
    assert main(["plan", str(path)]) == 1
    out = capsys.readouterr()
    lines = out.err.splitlines()
    assert out.out == "" and len(lines) == 1
    assert lines[0].startswith(f"tooleffect plan: {path}: the run is not complete: ") and "--allow-incomplete" in lines[0]
    assert main(["plan", str(path), "--allow-incomplete"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("plan: ") and f"tooleffect plan: {path}: incomplete (--allow-incomplete): " in out.err


def test_a_shard_that_selected_no_item_is_not_missing(pytester: pytest.Pytester,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Break-it row 89: every item hashed to other shards; the shard that selected none wrote an empty
    log, and the whole run was called incomplete ("shard 2 of 2 missing (0 of the run's … items)").
    """
    write_demo(pytester.path, PASSING)
    logs = [pytester.path / f"s{i}.jsonl" for i in (1, 2, 3, 4)]
    for i, path in enumerate(logs, 1):  # 3 items in 4 shards: one shard at least selects none
        pytester.runpytest("cases/", f"{OPT_SHARD}={i}/4", f"{OPT_RECORDS}={path}")
    empty = [i for i, path in enumerate(logs, 1) if not path.read_text()]
    full = [i for i in (1, 2, 3, 4) if i not in empty]
    assert empty and sum(len(logs[i - 1].read_text().splitlines()) for i in full) == 3
    capsys.readouterr()
    for given in (logs, [logs[i - 1] for i in full]):  # with or without the empty logs: nothing is missing
        assert main(["report", *map(str, given), "--json"]) == 0
        out = capsys.readouterr()
        data = json.loads(out.out)
        assert data["status"] == "complete" and "incomplete" not in out.err, out.err
        assert data["shards"]["missing"] == [] and data["shards"]["empty"] == empty
    assert main(["report", *map(str, logs)]) == 0
    assert "selected no item" in capsys.readouterr().out
    lacking = [logs[i - 1] for i in full[1:]]  # a shard that selected items, left out: still missing
    assert main(["report", *map(str, lacking), "--json"]) == 1
    out = capsys.readouterr()
    assert json.loads(out.out)["status"] == "incomplete" and full[0] in json.loads(out.out)["shards"]["missing"]
