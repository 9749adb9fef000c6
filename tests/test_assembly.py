"""The one report assembler: its sections in a fixed order, the users' hook after them, and
``tooleffect report`` on a record log giving the sections the run that wrote it gave."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pytest

from pytest_tooleffect.cli import main as cli
from pytest_tooleffect.report.assembly import SECTION_ORDER, ReportSection, ShardSection, assemble, ordered
from pytest_tooleffect.report.model import Report
from pytest_tooleffect.report.run_model import JudgeSection, ShardOf
from pytest_tooleffect.scoring.record import Record
from tests.test_gates import write_family, write_gates


class Writes:
    """A section that notes, in the report's ``conventions``, which sections were written before it."""

    def __init__(self, section: Literal["judge", "shard", "baseline", "gates"]) -> None:
        self.section: Literal["judge", "shard", "baseline", "gates"] = section

    def contribute(self, report: Report, records: Sequence[Record]) -> None:
        before = [name for name in SECTION_ORDER if report.conventions.get(f"seen_{name}")]
        report.conventions[f"seen_{self.section}"] = ",".join(before) or "-"


def test_sections_are_written_in_the_fixed_order_whatever_order_they_come_in() -> None:
    sections = [Writes("gates"), Writes("baseline"), Writes("judge"), Writes("shard")]
    assert [s.section for s in ordered(sections)] == ["judge", "shard", "baseline", "gates"]
    report = assemble([], {}, sections)
    assert {k: v for k, v in report.conventions.items() if k.startswith("seen_")} == {
        "seen_judge": "-", "seen_shard": "judge", "seen_baseline": "judge,shard", "seen_gates": "judge,shard,baseline"}


def test_an_unknown_or_repeated_section_is_refused() -> None:
    with pytest.raises(ValueError, match="given twice"):
        ordered([Writes("judge"), Writes("judge")])
    odd = Writes("judge")
    odd.section = "ci"  # type: ignore[assignment]
    with pytest.raises(ValueError, match="unknown report sections"):
        ordered([odd])


def test_the_plugin_s_sections_meet_the_protocol() -> None:
    from pytest_tooleffect.ci.gate_keeper import GateKeeper
    from pytest_tooleffect.ci.regressions import BaselineContributor, BaselinePlugin
    from pytest_tooleffect.report.reporter import JudgeContributor

    for cls in (GateKeeper, BaselinePlugin, BaselineContributor, JudgeContributor, ShardSection):
        assert isinstance(cls.__dict__["section"], str) and cls.__dict__["section"] in SECTION_ORDER
        assert callable(cls.__dict__["contribute"])
    section: ReportSection = ShardSection(shard=ShardOf(index=2, count=3))
    report = assemble([], {}, [section])
    assert report.to_json()["shard"] == {"index": 2, "count": 3}
    judge = JudgeContributor(None)
    report = assemble([], {}, [judge])
    assert report.judge == JudgeSection(model=None, note="no judge: free-text fields use the deterministic "
                                                         "comparator (approximate)")


HOOK = '''
import json

def pytest_tooleffect_modifyreport(report, records, config):
    # the users' hook runs after the plugin's own sections: every one of them is there already
    report["seen_by_hook"] = [k for k in ("judge", "baseline", "gates") if k in report]
'''


def test_the_users_hook_runs_after_the_plugin_s_sections_and_tooleffect_report_gives_the_run_s_sections(
        pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    write_family(pytester.path, no_tool_read=2)
    first = pytester.runpytest("cases/", "--tooleffect-records=accepted.jsonl")
    first.assert_outcomes(passed=11, failed=2)
    baseline = pytester.path / "baseline.json"
    assert cli(["baseline", "save", str(pytester.path / "accepted.jsonl"), "--out", str(baseline)]) == 0
    cases = pytester.path / "cases" / "mini" / "cases.jsonl"
    rows = [json.loads(line) for line in cases.read_text().splitlines()]
    read = next(r["recorded"] for r in rows if r["id"] == "nt-read-0")
    for r in rows:
        if r["id"] == "nt-ok-0":  # a decision that passed now reads: a regression (same label)
            r["recorded"] = read
    cases.write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_gates(pytester.path, '[tool.tooleffect.gates."*"]\nmax_regressions = 0\n')
    pytester.makeconftest(HOOK)
    run = pytester.runpytest("cases/", f"--tooleffect-baseline={baseline}", "--tooleffect-records=r.jsonl",
                             "--tooleffect-report=r.json")
    assert run.ret == 1
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["seen_by_hook"] == ["judge", "baseline", "gates"]
    assert report["baseline"]["totals"]["regressions"] == 1 and report["gates"]["passed"] is False

    capsys.readouterr()
    assert cli(["report", str(pytester.path / "r.jsonl"), "--cases", str(pytester.path / "cases"),
                "--baseline", str(baseline), "--json"]) == 0
    merged = json.loads(capsys.readouterr().out)
    for key in ("status", "blocks", "comparisons", "judge", "baseline"):
        assert merged[key] == report[key], key
    # the gates too, from the pyproject.toml the run read: the same section, the same failing status
    assert cli(["report", str(pytester.path / "r.jsonl"), "--cases", str(pytester.path / "cases"),
                "--baseline", str(baseline), "--gates", str(pytester.path / "pyproject.toml"), "--json"]) == 1
    gated = json.loads(capsys.readouterr().out)
    assert gated["gates"] == report["gates"]
    assert cli(["report", str(pytester.path / "r.jsonl"), "--gates", str(pytester.path / "cases")]) == 2
    assert f"--gates {pytester.path / 'cases' / 'pyproject.toml'}: no such file" in capsys.readouterr().err
    # the log of a run made without the baseline gives the same comparison once the baseline is named
    assert cli(["report", str(pytester.path / "accepted.jsonl"), "--cases", str(pytester.path / "cases"),
                "--baseline", str(baseline), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["baseline"]["totals"]["regressions"] == 0

    assert cli(["report", str(pytester.path / "r.jsonl"), "--cases", str(pytester.path / "cases"),
                "--baseline", str(baseline)]) == 0
    text = capsys.readouterr().out
    printed = [line for line in run.outlines if line.startswith(("baseline ", "regression ", "fixed ", "mini/"))]
    assert printed and all(line in text.splitlines() for line in printed), printed


def test_a_report_from_record_logs_has_the_judge_section_a_run_has(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    repo = Path(__file__).resolve().parents[1]
    log = tmp_path / "r.jsonl"
    lines = [line for line in (repo / "cases").rglob("*.jsonl")][:0]  # no shipped log: make one from records
    assert lines == []
    from pytest_tooleffect.formats import Case
    from pytest_tooleffect.oracle import parse_emission, score
    from pytest_tooleffect.scoring.build import build_record

    case = Case.model_validate({"id": "c1", "placement": {"step": 0, "run_length": 1, "bucket": "first"},
                                "messages": [{"role": "user", "content": "hi"}], "source": "authored",
                                "label": {"valid_actions": [{"tool": None}]}})
    assert case.label is not None
    record = build_record(family="f", case=case, policy="p", tools={},
                          verdict=score(parse_emission({"content": "hello"}), case.label, {}),
                          extra={"judge": {"model": "openai/judge", "calls": 2, "cached": 0, "input_tokens": 10,
                                           "output_tokens": 3, "cost_usd": None}})
    from pytest_tooleffect.scoring.record import SelectionRecord

    record.selection = SelectionRecord(collected=1, count=1, digest="0" * 16, run_count=1, run_digest="0" * 16)
    log.write_text(json.dumps(record.to_json()) + "\n")
    assert cli(["report", str(log), "--cases", str(tmp_path), "--json"]) == 0  # one run, whole: complete
    judge = json.loads(capsys.readouterr().out)["judge"]
    assert judge == {"model": "openai/judge", "calibration": "not measured",
                     "usage": {"calls": 2, "cached": 0, "input_tokens": 10, "output_tokens": 3, "cost_usd": None,
                               "tokens_unknown": 0, "input_tokens_unknown": 0, "output_tokens_unknown": 0}}
