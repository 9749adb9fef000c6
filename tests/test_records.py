"""Records and reports as typed data: the record's keys per outcome, the record id under repeats,
round trips through the models, and the generated JSON Schemas against a real run of the shipped cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.collect.cases import load_case_file, load_family
from pytest_tooleffect.collect.ids import record_id
from pytest_tooleffect.formats import Case, Label, ToolSpec
from pytest_tooleffect.oracle import CompareContext, Verdict, parse_emission, score
from pytest_tooleffect.report import Report, dumps, render_terminal, report_schema, summarise
from pytest_tooleffect.report.record_log import load_records
from pytest_tooleffect.scoring.build import build_record
from pytest_tooleffect.scoring.no_tool import reply_due
from pytest_tooleffect.scoring.record import Record, record_schema
from tests.conftest import REPO, schema_validator

# the first shipped airline state's label asks its reply for a kind: reply_due follows no_tool_failure
BASE_KEYS = ["version", "id", "family", "case_id", "policy", "outcome", "class", "bucket", "step", "run_length",
             "xfail", "label_hash", "verdict", "no_tool_failure", "reply_due", "cost", "error", "source"]
SANDBOX_KEYS = ["effect", "sandbox", "steps", "rollout", "faults", "recovery"]
#: what every record of a run says of the run: its selection, its family's label-set and rules fingerprints, its
#: policy's identity
RUN_KEYS = ["selection", "fingerprints", "policy_identity"]


@cache
def _shipped(family: str = "tau-airline") -> list[tuple[Case, dict[str, ToolSpec], Verdict]]:
    """The family's cases with their replayed verdicts."""
    fam = load_family(REPO / "cases" / family)
    out = []
    for path in sorted(fam.directory.glob("cases.*")):
        cases, problems = load_case_file(path, fam)
        assert not problems
        for case in cases:
            if case.label is None or case.recorded is None:
                continue
            tools = list(case.tools) if case.tools is not None else list(fam.tools)
            ctx = CompareContext(timezone=case.timezone, state=case.state, messages=case.messages)
            verdict = score(parse_emission(case.recorded.model_dump(exclude_none=True),
                                           offered=[t.name for t in tools]), case.label, tools, fam.rules, ctx)
            out.append((case, {t.name: t for t in tools}, verdict))
    assert out
    return out


def shipped_record(i: int = 0, **kw: Any) -> dict[str, Any]:
    case, tools, verdict = _shipped()[i]
    args: dict[str, Any] = {"family": "tau-airline", "case": case, "policy": "replay", "tools": tools,
                            "verdict": verdict, "extra": {"model": None, "trial": 1}}
    args.update(kw)
    return build_record(**args).to_json()


SANDBOX_EXTRA = {
    "effect": {"passed": False, "kind": "effect_missing", "failures": ["no reply on th-1"], "diff": {}},
    "sandbox": {"provider": "docker", "id": "0123456789ab", "run": "f" * 32, "worker": "gw0",
                "restrictions": ["network_none"], "restrictions_missing": []},
    "steps": [{"step": 1, "calls": [{"name": "mail.reply", "arguments": {}, "content": "{}", "error": False,
                                     "executed": True, "fault": None, "latency_ms": 0.4}], "text": None, "cost": {}}],
    "rollout": {"steps": 1, "stopped": "replay", "limit": 1, "self_steered": False,
                "cost": {"input_tokens": None, "output_tokens": None, "latency_ms": None, "cost_usd": None}},
    "faults": [],
    "recovery": None,
}


@pytest.mark.parametrize(("kw", "keys"), [
    ({}, [*BASE_KEYS, "model", "trial"]),
    ({"extra": {"model": "openai/m", "trial": 1, "provider_tool_names": {"a.b": "a_b"}, "cached": False,
                "rate_wait_ms": 0.0}},
     [*BASE_KEYS, "model", "trial", "provider_tool_names", "cached", "rate_wait_ms"]),
    ({"extra": {"model": None, "trial": 1, "agent": {"callable": "pkg.mod:agent", "steps": 3}}},
     [*BASE_KEYS, "model", "trial", "agent"]),
    ({"extra": {"model": None, "trial": 1, **SANDBOX_EXTRA}}, [*BASE_KEYS, "model", "trial", *SANDBOX_KEYS]),
    ({"verdict": None, "error": {"type": "Timeout", "message": "no complete answer within 5 s"}},
     [*BASE_KEYS, "model", "trial"]),
    ({"verdict": None, "error": {"type": "SandboxError", "message": "the sandbox did not start"}},
     [*BASE_KEYS, "model", "trial"]),
    ({"verdict": None, "error": {"type": "OracleError", "message": "ValueError: bad rule"},
      "extra": {"model": "openai/m", "trial": 1, "cached": True, "rate_wait_ms": 1.5}},
     [*BASE_KEYS, "model", "trial", "cached", "rate_wait_ms"]),
    ({"extra": {}}, BASE_KEYS),
], ids=["replay", "live", "agent", "sandbox", "provider-error", "sandbox-error", "oracle-error", "bare"])
def test_a_record_has_exactly_the_keys_of_its_outcome(kw: dict[str, Any], keys: list[str]) -> None:
    assert reply_due(_shipped()[0][0]) is not None
    rec = shipped_record(**kw)
    assert list(rec) == keys
    assert rec["outcome"] == ("error" if "error" in kw else "scored")
    assert set(rec["cost"]) == {"input_tokens", "output_tokens", "latency_ms", "cost_usd"}
    if "error" in kw:
        assert rec["error"] == kw["error"] and rec["verdict"] is None and rec["no_tool_failure"] is None
    else:
        assert list(rec["verdict"])[:3] == ["name_ok", "name_args_ok", "kind"]
        assert "tool_ok" not in rec["verdict"] and "args_ok" not in rec["verdict"]
    if "sandbox" in keys:
        assert rec["steps"][0]["cost"] == {}  # a replayed step's cost stays empty, not filled with nulls
    assert Record.model_validate(rec).to_json() == rec
    jsonschema.validate(rec, record_schema())


def test_a_sandboxed_steps_text_is_cut_as_the_reply_is() -> None:
    from pytest_tooleffect.scoring.record import REPLY_TEXT_LIMIT

    text = "I will keep calling the tool. " * 500  # 15,000 characters
    steps = [{**SANDBOX_EXTRA["steps"][0], "text": text}, {**SANDBOX_EXTRA["steps"][0], "step": 2, "text": "Done."}]
    rec = shipped_record(extra={"model": None, "trial": 1, **SANDBOX_EXTRA, "steps": steps})
    assert [s["text"] for s in rec["steps"]] == [text[:REPLY_TEXT_LIMIT] + " … (15,000 characters, cut)", "Done."]
    jsonschema.validate(rec, record_schema())


def test_a_record_whose_label_asks_no_reply_kind_has_no_reply_due() -> None:
    i = next(i for i, (case, _, _) in enumerate(_shipped()) if reply_due(case) is None)
    rec = shipped_record(i)
    assert "reply_due" not in rec
    assert list(rec) == [k for k in BASE_KEYS if k != "reply_due"] + ["model", "trial"]


def test_an_agent_traceback_is_kept_and_absent_otherwise() -> None:
    error = {"type": "AgentError", "message": "boom", "traceback": "Traceback (most recent call last): ..."}
    assert shipped_record(verdict=None, error=error)["error"] == error
    assert "traceback" not in shipped_record(verdict=None, error={"type": "Timeout", "message": "t"})["error"]


def test_build_record_takes_one_outcome() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        shipped_record(error={"type": "Timeout", "message": "t"})
    with pytest.raises(ValueError, match="exactly one"):
        shipped_record(verdict=None)
    with pytest.raises(ValueError, match="rate_wait_ms"):
        shipped_record(extra={"model": None, "trial": 1, "rate_wait_ms": "soon"})


def test_record_id_under_repeats() -> None:
    assert record_id("fam", "c-1", "gpt", 1, 1) == "fam/c-1[gpt]"
    assert record_id("fam", "c-1", "gpt", 1, 3) == "fam/c-1[gpt:1]"
    assert record_id("fam", "c-1", "gpt", 3, 3) == "fam/c-1[gpt:3]"
    case = _shipped()[0][0]
    assert shipped_record()["id"] == f"tau-airline/{case.id}[replay]"
    # trial 1 of a repeated run carries its trial, as the test item's name does
    assert shipped_record(repeats=3)["id"] == f"tau-airline/{case.id}[replay:1]"
    assert shipped_record(repeats=3, extra={"model": None, "trial": 2})["id"] == f"tau-airline/{case.id}[replay:2]"


def test_keys_a_hook_adds_survive_a_round_trip() -> None:
    rec = shipped_record()
    rec["team"] = {"owner": "ana"}
    rec["verdict"]["note"] = "seen"
    again = Record.model_validate(json.loads(json.dumps(rec))).to_json()
    assert again == rec and list(again) == list(rec)


def test_a_record_of_the_old_vocabulary_reads_as_the_new() -> None:
    rec = shipped_record()
    v = rec["verdict"]
    rec["verdict"] = {"tool_ok": v["name_ok"], "args_ok": v["name_args_ok"],
                      **{k: x for k, x in v.items() if k not in ("name_ok", "name_args_ok")}}
    assert Record.model_validate(rec).to_json()["verdict"] == v


def test_load_records_names_the_line_and_the_field(tmp_path: Path) -> None:
    good = shipped_record()
    log = tmp_path / "r.jsonl"
    bad = {k: v for k, v in good.items() if k != "label_hash"}
    log.write_text(json.dumps(good) + "\n\n" + json.dumps(bad) + "\n")
    with pytest.raises(ValueError, match=r"line 3 is not a tooleffect record \(label_hash: Field required\)"):
        load_records(log)
    log.write_text(json.dumps(good) + "\n" + json.dumps({**good, "outcome": "scored", "verdict": None}) + "\n")
    with pytest.raises(ValueError, match="line 2 .*a scored record needs a verdict"):
        load_records(log)
    log.write_text(json.dumps(good) + "\n")
    assert [r.to_json() for r in load_records(log)] == [good]


def test_report_command_rejects_a_record_naming_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "r.jsonl"
    log.write_text(json.dumps(shipped_record()) + "\n" + json.dumps({"family": "x"}) + "\n")
    assert main(["report", str(log), "--cases", str(tmp_path)]) == 2
    assert "r.jsonl: line 2 is not a tooleffect record (" in capsys.readouterr().err


_TAMPERED = {
    # a forbidden verdict edited to pass: the forbidden entry kept, both levels false
    "forbidden-as-ok": {"kind": "ok_no_tool", "name_ok": False, "name_args_ok": False, "forbidden": {"tool": "x"}},
    "unknown-kind": {"kind": "bogus_kind", "name_ok": False, "name_args_ok": False},
    # consistent levels, yet the forbidden entry says the verdict was another kind
    "forbidden-as-wrong-tool": {"kind": "wrong_tool", "name_ok": False, "name_args_ok": False,
                                "forbidden": {"tool": "x"}},
    "args-on-a-wrong-name": {"kind": "wrong_tool", "name_ok": False, "name_args_ok": True},
}


@pytest.mark.parametrize("tamper", list(_TAMPERED))
def test_every_reader_of_a_record_log_refuses_a_verdict_the_oracle_cannot_give(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], tamper: str) -> None:
    """A record log whose verdict's kind is unknown or contradicts its fields was read by ``report``
    (its gates passed), ``html`` and ``baseline save`` (the unknown kind kept); only ``compare``
    refused it.  Every reader refuses it now, naming the file, the line and the field, exit 2, and
    writes nothing.
    """
    good = [shipped_record(i) for i in range(2)]
    (tmp_path / "good.jsonl").write_text("".join(json.dumps(r) + "\n" for r in good))
    bad = [good[0], {**good[1], "verdict": {**good[1]["verdict"], **_TAMPERED[tamper]}}]
    log = tmp_path / "bad.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in bad))
    with pytest.raises(ValueError, match=r"^line 2 is not a tooleffect record \(verdict"):
        load_records(log)
    assert main(["baseline", "save", str(tmp_path / "good.jsonl"), "--out", str(tmp_path / "base.json")]) == 0
    capsys.readouterr()
    doors = {
        "report": ["report", str(log), "--cases", str(tmp_path)],
        "merge": ["report", str(tmp_path / "good.jsonl"), str(log), "--cases", str(tmp_path)],
        "html": ["html", str(log), "--out", str(tmp_path / "page.html")],
        "baseline save": ["baseline", "save", str(log), "--out", str(tmp_path / "bad-base.json")],
        "compare": ["compare", str(tmp_path / "base.json"), str(log)],
        "plan": ["plan", str(log)],
        "plan --costs": ["plan", str(tmp_path / "base.json"), "--costs", str(log)],
    }
    for door, argv in doors.items():
        assert main(argv) == 2, door
        err = capsys.readouterr().err
        said = [line for line in err.splitlines() if "bad.jsonl" in line and "line 2" in line and "verdict" in line]
        assert said, (door, err)
    assert not (tmp_path / "page.html").exists() and not (tmp_path / "bad-base.json").exists()


def test_the_record_schema_lists_the_verdict_kinds() -> None:
    from pytest_tooleffect.oracle import KINDS

    verdict = record_schema()["$defs"]["VerdictRecord"]["properties"]["kind"]
    assert verdict["enum"] == list(KINDS)


@pytest.mark.parametrize("what", ["record", "report"])
def test_schema_command_prints_the_generated_schema(what: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", what]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == (record_schema() if what == "record" else report_schema())
    jsonschema.Draft202012Validator.check_schema(printed)


def test_report_round_trip_from_records_and_from_models() -> None:
    recs = [shipped_record(i) for i in range(len(_shipped()))]
    recs += [shipped_record(0, policy="gpt", extra={"model": "openai/gpt", "trial": 1},
                     cost={"input_tokens": 900, "output_tokens": 12, "latency_ms": 410.5, "cost_usd": 0.0021}),
             shipped_record(1, policy="gpt", verdict=None, error={"type": "Timeout", "message": "t"},
                     extra={"model": "openai/gpt", "trial": 1})]
    meta = {"tau-airline": load_family(REPO / "cases" / "tau-airline").meta}
    report = summarise(recs, meta)
    assert summarise([Record.model_validate(r) for r in recs], meta) == report
    text = dumps(report)
    again = Report.model_validate_json(text)
    assert again == report and dumps(again) == text == dumps(json.loads(text))
    assert render_terminal(again) == render_terminal(report)
    assert [b.policy for b in report.blocks] == ["gpt", "replay"] and len(report.comparisons) == 1
    jsonschema.validate(json.loads(text), report_schema())


def test_the_schema_refuses_what_is_not_a_report() -> None:
    data = summarise([shipped_record(i) for i in range(3)]).to_json()
    validator = schema_validator(report_schema())
    validator.validate(data)
    for broken in ({**data, "status": "done"},
                   {**data, "blocks": [{**data["blocks"][0], "classes": {**data["blocks"][0]["classes"], "x": {}}}]},
                   {**data, "blocks": [{**data["blocks"][0], "label_set_fingerprint": "nope"}]},
                   {k: v for k, v in data.items() if k != "blocks"}):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(broken)


def test_shipped_cases_run_report_and_records_match_the_generated_schemas(shipped_run_folder: Path) -> None:
    """The shipped cases run as `make report` runs them (the session's run, tests/conftest.py); the
    report command rebuilds the same report."""
    report_file, log = shipped_run_folder / "report.json", shipped_run_folder / "records.jsonl"
    returncode = (shipped_run_folder / "returncode").read_text()
    assert returncode in ("0", "1"), ((shipped_run_folder / "stdout.txt").read_text()[-3000:]
                                      + (shipped_run_folder / "stderr.txt").read_text()[-3000:])
    data = json.loads(report_file.read_text())
    assert data["status"] == "complete"  # tooltalk (nothing to replay) deselected, as make report does
    jsonschema.validate(data, report_schema())
    assert {b["family"] for b in data["blocks"]} == {"mcp-git", "scheduling", "tau-airline"}
    assert any(b["effects"] for b in data["blocks"])  # the sandboxed family's effect level is in the schema too
    assert dumps(Report.model_validate(data)) == dumps(data)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    validator = schema_validator(record_schema())
    for rec in records:
        validator.validate(rec)
        assert json.dumps(Record.model_validate(rec).to_json(), sort_keys=True) == json.dumps(rec, sort_keys=True)
        hinted = {"no_tool_severity"} if rec["family"] == "mcp-git" else set()  # an MCP family's needless calls
        assert set(rec) - set(BASE_KEYS) - hinted in ({"model", "trial", *RUN_KEYS},
                                                      {"model", "trial", *RUN_KEYS, *SANDBOX_KEYS})
    rebuilt = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "report", str(log), "--json"],
                             cwd=REPO, capture_output=True, text=True, timeout=300)
    assert rebuilt.returncode == 0, rebuilt.stderr
    # one assembler: the report from the log has every section the run's has (its judge's too), the
    # run's metadata aside (when and how the run was made is the run's own), and adds what it found
    # of the run's selection: all 313 items selected (-m) of the 809 collected have a record
    plugin_report = {k: data[k] for k in Report.model_fields if k != "run" and k in data}
    assert "judge" in plugin_report
    rebuilt_report = json.loads(rebuilt.stdout)
    selection = rebuilt_report.pop("selection")
    assert selection["selected"] == selection["recorded"] == len(records) and selection["not_recorded"] == 0
    assert selection["collected"] > selection["selected"] and selection["short"] == []
    assert dumps(rebuilt_report) == dumps(plugin_report)
    # piped (a CI log, `| less`), the tables are as wide as they need: no header or cell folds
    text = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "report", str(log)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "80"})
    for shown in (text.stdout, (shipped_run_folder / "stdout.txt").read_text()):
        headers = [line for line in shown.splitlines() if line.startswith("class ")]
        assert len(headers) == 3 and all("name+args ok" in h and "95% CI" in h for h in headers), headers
        assert not [line for line in shown.splitlines() if line.startswith("              │")], shown[:3000]


@pytest.mark.parametrize(("kinds", "text"), [
    (["ask", "refuse"], "I can only organise meetings, so I can't book trains."),
    (["refuse", "ask"], "Which of the two meetings should I book on Thursday?"),
], ids=["refusal-against-ask-first", "question-against-refuse-first"])
def test_with_two_null_actions_reply_due_is_the_first_and_the_verdict_names_the_one_met(
        kinds: list[str], text: str) -> None:
    case, tools, _ = _shipped()[0]
    case = case.model_copy(update={"label": Label.model_validate(
        {"valid_actions": [{"tool": None, "reply": k} for k in kinds]})})
    assert case.label is not None
    verdict = score({"content": text}, case.label, list(tools.values()))
    rec = shipped_record(case=case, verdict=verdict)
    assert rec["reply_due"] == kinds[0]
    assert rec["verdict"]["kind"] == "ok_no_tool" and rec["no_tool_failure"] is None
    assert rec["verdict"]["matched"] == {"tool": None, "reply": kinds[1]}
    assert rec["verdict"]["reply"]["reply"] == kinds[1] and rec["verdict"]["reply"]["ok"] is True
