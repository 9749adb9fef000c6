"""The read-back rule (:func:`~pytest_tooleffect.oracle.kinds.verdict_problem`,
:func:`~pytest_tooleffect.scoring.no_tool.record_problem`) against the oracle: every verdict the oracle
gives over the shipped cases passes it (no false refusal), and each tampering of a record log the
oracle could not have written is refused by every reader (``report``, ``html``, ``baseline save``).
"""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.ci.baseline import BaselineDecision
from pytest_tooleffect.collect.cases import is_case_file, load_case_file
from pytest_tooleffect.collect.family import family_dirs, load_family
from pytest_tooleffect.formats import Action, ParallelGroup
from pytest_tooleffect.oracle import CompareContext, score
from pytest_tooleffect.oracle.kinds import KINDS
from pytest_tooleffect.scoring.build import build_record
from pytest_tooleffect.scoring.hints import policy_label
from tests.conftest import REPO

#: a turn that claims an action it did not take (a phantom claim where the conversation holds none)
PHANTOM = "I have cancelled your reservation and booked the meeting for you."
EFFECT_FAILED = {"effect": {"passed": False, "kind": "effect_missing", "failures": ["x"], "diff": {}}}


def _call(name: str, args: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": json.dumps(args)}]}


def _turns(case: Any, tools: list[Any], label: Any) -> list[Any]:
    """The turns scored at one state: its recorded one, no call, a phantom claim, each valid
    alternative, each offered and forbidden tool with no arguments, a tool not offered, a malformed call."""
    turns: list[Any] = [{"content": "Could you tell me more?"}, {"content": PHANTOM},
                        _call("no_such_tool", {}), {"tool_calls": [{"name": tools[0].name if tools else "t",
                                                                    "arguments": "{bad"}]}]
    if case.recorded is not None:
        turns.append(case.recorded)
    for alt in label.valid_actions:
        if isinstance(alt, ParallelGroup):
            turns.append({"tool_calls": [{"name": a.tool, "arguments": json.dumps(a.args)} for a in alt.parallel]})
        elif isinstance(alt, Action) and alt.tool is not None:
            turns += [_call(alt.tool, alt.args), {**_call(alt.tool, alt.args), "content": PHANTOM}]
    turns += [_call(t.name, {}) for t in tools[:8]]
    turns += [_call(f.tool, f.args or {}) for f in label.forbidden_actions]
    return turns


def test_every_verdict_the_oracle_gives_over_the_shipped_cases_passes_the_read_back_rule() -> None:
    predicates = runpy.run_path(str(REPO / "conftest.py"))["pytest_tooleffect_predicates"]()  # the harness's
    kinds: Counter[str] = Counter()
    buckets: Counter[str | None] = Counter()
    for directory in family_dirs([REPO / "cases"]):
        fam = load_family(directory)
        for path in sorted(directory.iterdir()):
            if not path.is_file() or not is_case_file(path, fam.referenced_files):
                continue
            cases, problems = load_case_file(path, fam, set())
            assert problems == []
            for case in cases:
                if case.label is None:
                    continue
                tools = list(case.tools) if case.tools is not None else list(fam.tools)
                label = policy_label(case, tools, fam)
                ctx = CompareContext(timezone=case.timezone, state=case.state, messages=case.messages,
                                     predicates=predicates)
                for turn in _turns(case, tools, label):
                    verdict = score(turn, label, tools, fam.rules, ctx)
                    for extra in ({}, EFFECT_FAILED):
                        # build_record validates the record: the read-back rule, verdict and record level
                        record = build_record(family=fam.name, case=case, policy="replay",
                                              tools={t.name: t for t in tools}, verdict=verdict, extra=extra)
                        BaselineDecision.from_record(record.to_json())  # the baseline's half of the rule
                        kinds[verdict.kind] += 1
                        buckets[record.no_tool_failure] += 1
    assert set(kinds) == set(KINDS), kinds  # every kind the oracle gives was met
    assert sum(kinds.values()) > 5_000 and buckets["forbidden"] and buckets["other"], (kinds, buckets)


def _log(tmp_path: Path) -> Path:
    """A replay run's record log over a small family: a forbidden refund on a no_tool case, and more."""
    (tmp_path / "cases" / "support").mkdir(parents=True)
    (tmp_path / "cases" / "support" / "family.yaml").write_text(
        "name: support\ntools:\n"
        "  - name: lookup_order\n    parameters: {type: object, properties: {order_id: {type: string}}}\n"
        "    annotations: {readOnlyHint: true}\n"
        "  - name: refund\n    parameters: {type: object, properties: {order_id: {type: string}}}\n")
    (tmp_path / "cases" / "support" / "cases.yaml").write_text(
        "- id: refund-asked\n  placement: {step: 0, run_length: 2, bucket: first}\n"
        "  messages: [{role: user, content: 'I want my money back for order 1042.'}]\n"
        "  label: {valid_actions: [{tool: null, reply: ask}], forbidden_actions: [refund]}\n"
        "  recorded: {tool_calls: [{name: refund, arguments: '{\"order_id\": \"1042\"}'}]}\n  source: authored\n"
        "- id: where\n  placement: {step: 0, run_length: 2, bucket: first}\n"
        "  messages: [{role: user, content: 'Where is order 1042?'}]\n"
        "  label: {valid_actions: [{tool: lookup_order, args: {order_id: '1042'}}]}\n"
        "  recorded: {tool_calls: [{name: lookup_order, arguments: '{\"order_id\": \"1042\"}'}]}\n"
        "  source: authored\n")
    log = tmp_path / "r.jsonl"
    run = subprocess.run([sys.executable, "-m", "pytest", "cases", "-q", "-p", "no:cacheprovider",
                          f"--tooleffect-records={log}"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 1 and log.is_file(), run.stdout[-2000:]
    return log


def _tamper(log: Path, case: str, edit: Any) -> Path:
    lines = log.read_text().splitlines()
    out = []
    for line in lines:
        r = json.loads(line)
        if r["case_id"] == case:
            edit(r)
        out.append(json.dumps(r))
    tampered = log.with_name("t.jsonl")
    tampered.write_text("\n".join(out) + "\n")
    return tampered


def _forbidden_to_ok_no_tool(r: dict[str, Any]) -> None:
    """A forbidden call edited into a pass, every field but the emitted call made to agree."""
    r["verdict"].update(kind="ok_no_tool", forbidden=None, name_ok=True, name_args_ok=True)
    r["no_tool_failure"] = None


def _levels_true(r: dict[str, Any]) -> None:
    r["verdict"].update(name_ok=True, name_args_ok=True)


def _no_bucket(r: dict[str, Any]) -> None:
    r["no_tool_failure"] = None


def _to_single(r: dict[str, Any]) -> None:
    r["class"] = "single"


def _no_entry(r: dict[str, Any]) -> None:
    r["verdict"]["forbidden"] = None


@pytest.mark.parametrize(("edit", "said"), [
    (_forbidden_to_ok_no_tool, "kind ok_no_tool with a call emitted: the oracle gives it to a turn that called nothing"),
    (_levels_true, "kind forbidden with name_ok true and name_args_ok true: the oracle gives it with name_ok false "
                   "and name_args_ok false"),
    (_no_bucket, "no_tool_failure null on a no_tool record of kind forbidden: the scoring gives forbidden"),
    (_to_single, "no_tool_failure forbidden on a single record of kind forbidden: the scoring gives null"),
    (_no_entry, "kind forbidden without the forbidden entry that was hit"),
])
def test_a_tampered_record_is_refused_by_every_reader(tmp_path: Path, edit: Any, said: str) -> None:
    log = _log(tmp_path)
    tampered = _tamper(log, "refund-asked", edit)
    for command in (["report", str(tampered), "--cases", "cases"],
                    ["html", str(tampered), "--out", str(tmp_path / "p.html"), "--cases", "cases"],
                    ["baseline", "save", str(tampered), "--out", str(tmp_path / "b.json")]):
        out = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", *command], cwd=tmp_path,
                             capture_output=True, text=True)
        assert out.returncode == 2, (command, out.stdout, out.stderr)
        assert f"{tampered}: line 1 is not a tooleffect record" in out.stderr and said in out.stderr, out.stderr
        assert not (tmp_path / "b.json").exists()


def _class_and_bucket(r: dict[str, Any]) -> None:
    """A no_tool record made to read as single: its class and no_tool_failure both edited."""
    r.update({"class": "single", "no_tool_failure": None})


def test_a_class_its_cases_label_contradicts_is_refused_given_the_cases(tmp_path: Path) -> None:
    log = _log(tmp_path)
    tampered = _tamper(log, "refund-asked", _class_and_bucket)
    said = ("record support/refund-asked[replay]: class single, but case refund-asked of support under cases has "
            "that label (hash ")
    for command in (["report", str(tampered)], ["html", str(tampered), "--out", str(tmp_path / "p.html")],
                    ["baseline", "save", str(tampered), "--out", str(tmp_path / "b.json")]):
        out = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", *command, "--cases", "cases"],
                             cwd=tmp_path, capture_output=True, text=True)
        assert out.returncode == 2 and said in out.stderr and "is no_tool: the record was edited" in out.stderr, out
        # without the cases nothing says the class is not the label's: the record alone is consistent
        alone = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", *command, "--cases", "none"],
                               cwd=tmp_path, capture_output=True, text=True)
        assert alone.returncode in (0, 1) and "was edited" not in alone.stderr, alone
        (tmp_path / "b.json").unlink(missing_ok=True)
    # a label hash that is not the case's: a label changed since the run, said and taken as written
    changed = _tamper(log, "refund-asked", lambda r: r.update(label_hash="0" * 16))
    out = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "report", str(changed), "--cases", "cases"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0 and ("the label hash of 1 (records) is not their case's under cases "
                                    "(support/refund-asked[replay])") in out.stderr, out.stderr


def test_a_baselines_class_its_cases_label_contradicts_is_refused_by_a_run_and_by_report(tmp_path: Path) -> None:
    log = _log(tmp_path)
    assert subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "baseline", "save", str(log), "--out",
                           "b.json", "--cases", "cases"], cwd=tmp_path, capture_output=True).returncode == 0
    data = json.loads((tmp_path / "b.json").read_text())
    data["decisions"]["support/where[replay]"]["class"] = "several"  # kind ok: the record alone cannot tell
    (tmp_path / "b.json").write_text(json.dumps(data))
    run = subprocess.run([sys.executable, "-m", "pytest", "cases", "-q", "-p", "no:cacheprovider",
                          "--tooleffect-baseline=b.json"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 4 and ("b.json: decisions.support/where[replay].class: several, "
                                    "but the case has that label") in run.stderr, (run.stdout, run.stderr)
    out = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "report", str(log), "--baseline", "b.json"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 2 and ("--baseline's decision support/where[replay]: class several, but case where of "
                                    "support under cases") in out.stderr, out.stderr
