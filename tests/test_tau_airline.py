"""The shipped tau-airline family: reproducible from the public data, labelled, and scored."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.collect.traces import Run, decision_points, position_bucket
from pytest_tooleffect.data.importers.tau_airline import REVISION_PASSES, build_family, sample_states
from pytest_tooleffect.data.importers.tau_airline_rules import rule_label
from tests.conftest import REPO, SHARED

FAMILY = REPO / "cases" / "tau-airline"
TRAJ = SHARED / "datasets" / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json"
TOOLS = SHARED / "datasets" / "tau-bench" / "airline_tools.json"


@pytest.mark.shared
def test_family_rebuilds_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "cases" / "tau-airline"  # the repository's layout: cases/<family> beside oracle/
    (out / "labels").mkdir(parents=True)
    (tmp_path / "oracle").mkdir()
    shutil.copy(REPO / "oracle" / "tau-airline.yaml", tmp_path / "oracle" / "tau-airline.yaml")
    for name in ("manual.jsonl", "adjudicated.jsonl", *REVISION_PASSES):
        shutil.copy(FAMILY / "labels" / name, out / "labels" / name)
    counts = build_family(TRAJ, TOOLS, out)
    assert counts == {"cases": 210, "labelled": 210, "adjudicated": 99, "agreed": 111, "unlabelled": 0,
                      "revised": 193}
    for name in ("cases.jsonl", "family.yaml", "tools.json", "system_prompt.md", "labels/rules.jsonl"):
        assert (out / name).read_bytes() == (FAMILY / name).read_bytes(), name


@pytest.mark.shared
def test_sample_is_stratified_with_the_stated_quota() -> None:
    cases, sample = sample_states(TRAJ)
    assert sample.quota == {"first": 60, "middle": 90, "last": 60}
    assert sample.population == {"first": 200, "middle": 2054, "last": 200}
    assert sum(sample.population.values()) == 2454  # every assistant turn, the final one included
    buckets = [c["placement"]["bucket"] for c in cases]
    assert {b: buckets.count(b) for b in set(buckets)} == sample.quota
    assert all("label" not in c for c in cases)


def test_decision_points_include_the_final_stop() -> None:
    run = Run("r", [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": "id?"}, {"role": "user", "content": "u_1"},
                    {"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{}"}}]},
                    {"role": "tool", "tool_call_id": "1", "content": "ok"},
                    {"role": "assistant", "content": "done"}])
    points = list(decision_points(run))
    assert [p.step for p in points] == [0, 1, 2] and {p.run_length for p in points} == {3}
    assert points[-1].recorded["content"] == "done" and points[-1].messages[-1]["role"] == "tool"
    assert [position_bucket(p.step, p.run_length) for p in points] == ["first", "middle", "last"]
    assert position_bucket(0, 1) == "last"
    assert [position_bucket(s, 8, 4) for s in range(8)] == ["q1", "q1", "q2", "q2", "q3", "q3", "q4", "q4"]


GOLD = [{"name": "get_reservation_details", "kwargs": {"reservation_id": "ABC123"}},
        {"name": "cancel_reservation", "kwargs": {"reservation_id": "ABC123"}}]


def _names(label: dict) -> set:
    return {a["tool"] for a in label["valid_actions"]}


def test_rule_labeller() -> None:
    ask = rule_label([{"role": "user", "content": "I want to cancel a trip."}], GOLD)
    assert _names(ask) == {None}
    assert {f["tool"] for f in ask["forbidden_actions"]} >= {"cancel_reservation", "book_reservation"}
    read = rule_label([{"role": "user", "content": "I am mia_li_3668, cancel ABC123 please"}], GOLD)
    # reads the next step needs; replying stays valid because the write awaits confirmation
    assert _names(read) == {"get_user_details", "get_reservation_details", None}
    confirm = rule_label([
        {"role": "user", "content": "I am mia_li_3668, cancel ABC123 please"},
        {"role": "assistant", "content": "I will cancel reservation ABC123. Shall I proceed?"},
        {"role": "user", "content": "Yes, please proceed."}], GOLD)
    assert {"tool": "cancel_reservation", "args": {"reservation_id": "ABC123"}} in [
        {k: v for k, v in a.items() if k != "reason"} for a in confirm["valid_actions"]]
    assert "cancel_reservation" not in {f["tool"] for f in confirm["forbidden_actions"]}


def test_main_job_scores_gpt4o_with_a_no_tool_class(shipped_run_folder: Path) -> None:
    """The main job's run of the shipped families (the session's, tests/conftest.py): its airline block."""
    stdout = (shipped_run_folder / "stdout.txt").read_text()
    assert (shipped_run_folder / "returncode").read_text() in ("0", "1"), (
        stdout[-3000:] + (shipped_run_folder / "stderr.txt").read_text()[-3000:])
    (block,) = [b for b in json.loads((shipped_run_folder / "report.json").read_text())["blocks"]
                if b["family"] == "tau-airline"]
    assert block["family"] == "tau-airline" and block["policy"] == "replay"
    assert block["n_scored"] == 210 and block["n_errors"] == 0
    assert sum(block["classes"][c]["n"] for c in ("single", "several", "no_tool")) == 210
    assert block["classes"]["no_tool"]["n"] > 0
    assert "tooleffect: family tau-airline" in stdout


def _cases() -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in map(json.loads, (FAMILY / "cases.jsonl").read_text().splitlines())}


def _transfer(label: dict[str, Any]) -> str:
    tool = "transfer_to_human_agents"
    if any(a.get("tool") == tool for a in label["valid_actions"]):
        return "valid"
    if any((f if isinstance(f, str) else f.get("tool")) == tool for f in label["forbidden_actions"]):
        return "forbidden"
    return "neither"


def test_a_transfer_for_a_request_the_policy_denies_is_forbidden_in_every_such_state() -> None:
    # the policy: "deny user requests that are against this policy" and "transfer ... if and only if
    # the request cannot be handled within the scope of your actions": a denial is within scope
    policy = (FAMILY / "system_prompt.md").read_text()
    assert "You should deny user requests that are against this policy." in policy
    assert "if and only if the request cannot be handled within the scope of your actions" in policy
    revisions = [json.loads(line) for line in (FAMILY / "labels" / "revisions.jsonl").read_text().splitlines()]
    denied = {r["id"] for r in revisions if r.get("policy") == "denied"}
    cases = _cases()
    assert len(denied) == 30
    assert {i: _transfer(cases[i]["label"]) for i in denied} == dict.fromkeys(denied, "forbidden")
    # the states a human agent must take (flown segments, an insurance refund the agent has no action
    # for) keep the transfer valid, and none of them is marked denied
    kept = {i for i, c in cases.items() if _transfer(c["label"]) == "valid"}
    assert kept == {"t26-r3-s06", "t28-r0-s16", "t38-r0-s03", "t38-r0-s06"} and not kept & denied
    # the denied states' right reply declines (reply: refuse), except one where the user already declined
    refusals = {i for i in denied if next(a for a in cases[i]["label"]["valid_actions"]
                                          if a.get("tool") is None).get("reply") == "refuse"}
    assert denied - refusals == {"t35-r1-s07"}


def test_every_no_tool_state_says_what_its_reply_must_do() -> None:
    nulls = {i: next((a for a in c["label"]["valid_actions"] if a.get("tool") is None), None)
             for i, c in _cases().items()}
    kinds = [a.get("reply") for a in nulls.values() if a is not None]
    assert len(kinds) == 194
    # revision-2 moved seven from answer to ask (LABELLING.md, "The verdicts the stricter check moved")
    assert {k: kinds.count(k) for k in set(kinds)} == {"ask": 79, "refuse": 33, "answer": 81, None: 1}


def test_a_revision_that_cannot_apply_is_refused_with_the_file_and_state(tmp_path: Path) -> None:
    from pytest_tooleffect.data.labelling import revise

    label = {"valid_actions": [{"tool": "get_user_details"}], "forbidden_actions": [], "labelled_by": ["m"]}
    with pytest.raises(ValueError, match=r"revisions.jsonl: t1: reply, must and must_not need a tool: null"):
        revise(label, {"reply": "ask"}, "revisions.jsonl: t1")
    with pytest.raises(ValueError, match="forbid names valid tools"):
        revise(label, {"forbid": [{"tool": "get_user_details"}]}, "r")
    with pytest.raises(ValueError, match="unknown keys"):
        revise(label, {"relpy": "ask"}, "r")
    out = revise(label, {"drop_valid": [], "forbid": [{"tool": "x", "reason": "r"}], "by": "revision-1"}, "r")
    assert out["forbidden_actions"] == [{"tool": "x", "reason": "r"}] and out["labelled_by"] == ["m", "revision-1"]
    assert label["forbidden_actions"] == []  # the input is not changed


def test_a_revision_can_add_a_valid_action_beside_the_labels_own(tmp_path: Path) -> None:
    from pytest_tooleffect.data.labelling import revise

    label = {"valid_actions": [{"tool": None, "reply": "ask", "reason": "ask for the id"}],
             "forbidden_actions": [{"tool": "transfer_to_human_agents", "reason": "in scope"}], "labelled_by": ["m"]}
    refuse = {"tool": None, "reply": "refuse", "reason": "say the agent cannot do it"}
    out = revise(label, {"add_valid": [refuse], "by": "revision-2"}, "r")
    assert out["valid_actions"] == [label["valid_actions"][0], refuse] and out["labelled_by"] == ["m", "revision-2"]
    # reply criteria still go to the label's own (first) null action, not the added one
    out = revise(label, {"reply": "answer", "add_valid": [refuse]}, "r")
    assert [a["reply"] for a in out["valid_actions"]] == ["answer", "refuse"]
    with pytest.raises(ValueError, match=r"r2: add_valid names forbidden tools \['transfer_to_human_agents'\]"):
        revise(label, {"add_valid": [{"tool": "transfer_to_human_agents"}]}, "r2")
    with pytest.raises(ValueError, match="add_valid must be a list of actions"):
        revise(label, {"add_valid": {"tool": None}}, "r")


def test_the_second_revision_pass_is_applied_after_the_first() -> None:
    # revision-1 set reply: answer on these states; revision-2 (read by hand against the
    # conversation, LABELLING.md) sets ask or adds an alternative, and the shipped cases hold the result
    first = {r["id"]: r for r in map(json.loads, (FAMILY / "labels" / "revisions.jsonl").read_text().splitlines())}
    second = [json.loads(line) for line in (FAMILY / "labels" / "revisions-2.jsonl").read_text().splitlines()]
    cases = _cases()
    assert len(second) == 11 and all(r["why"] and r["by"] == "revision-2" for r in second)
    for r in second:
        label = cases[r["id"]]["label"]
        assert "revision-2" in label["labelled_by"], r["id"]
        nulls = [a for a in label["valid_actions"] if a.get("tool") is None]
        if "reply" in r:
            assert first[r["id"]]["reply"] != r["reply"] and nulls[0]["reply"] == r["reply"], r["id"]
        for added in r.get("add_valid", []):
            assert added in nulls[1:], r["id"]


@pytest.mark.parametrize("name", ["labels/manual.jsonl", "labels/adjudicated.jsonl", "labels/rules.jsonl",
                                  "labels/revisions.jsonl", "labels/revisions-2.jsonl"])
def test_label_files_cover_every_state(name: str) -> None:
    ids = {json.loads(line)["id"] for line in (FAMILY / "cases.jsonl").read_text().splitlines()}
    labelled = [json.loads(line)["id"] for line in (FAMILY / name).read_text().splitlines()]
    assert len(ids) == 210 and labelled  # both files read
    assert len(labelled) == len(set(labelled)) and set(labelled) <= ids
