"""The shipped tau-airline family: reproducible from the public data, labelled, and scored."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_tooleffect.importers.tau_airline import build_family, sample_states
from pytest_tooleffect.importers.tau_airline_rules import rule_label
from pytest_tooleffect.options import OPT_RECORDS, OPT_REPORT
from pytest_tooleffect.traces import Run, decision_points, position_bucket
from tests.conftest import REPO, SHARED

FAMILY = REPO / "cases" / "tau-airline"
TRAJ = SHARED / "datasets" / "tau-bench" / "historical_trajectories" / "gpt-4o-airline.json"
TOOLS = SHARED / "datasets" / "tau-bench" / "airline_tools.json"


def test_family_rebuilds_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "tau-airline"
    (out / "labels").mkdir(parents=True)
    for name in ("manual.jsonl", "adjudicated.jsonl"):
        shutil.copy(FAMILY / "labels" / name, out / "labels" / name)
    counts = build_family(TRAJ, TOOLS, out)
    assert counts == {"cases": 210, "labelled": 210, "adjudicated": 99, "agreed": 111, "unlabelled": 0}
    for name in ("cases.jsonl", "family.yaml", "tools.json", "system_prompt.md", "labels/rules.jsonl"):
        assert (out / name).read_bytes() == (FAMILY / name).read_bytes(), name


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


def test_main_job_scores_gpt4o_with_a_no_tool_class(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    out = subprocess.run([sys.executable, "-m", "pytest", "cases/tau-airline", "-q", "-p", "no:cacheprovider",
                          f"{OPT_REPORT}={report}", f"{OPT_RECORDS}={tmp_path / 'r.jsonl'}"],
                         cwd=REPO, capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stdout[-3000:] + out.stderr[-3000:]
    (block,) = json.loads(report.read_text())["blocks"]
    assert block["family"] == "tau-airline" and block["policy"] == "replay"
    assert block["n_scored"] == 210 and block["n_errors"] == 0
    assert sum(block["classes"][c]["n"] for c in ("single", "several", "no_tool")) == 210
    assert block["classes"]["no_tool"]["n"] > 0
    assert "tooleffect: family tau-airline" in out.stdout


@pytest.mark.parametrize("name", ["labels/manual.jsonl", "labels/adjudicated.jsonl", "labels/rules.jsonl"])
def test_label_files_cover_every_state(name: str) -> None:
    ids = {json.loads(line)["id"] for line in (FAMILY / "cases.jsonl").read_text().splitlines()}
    labelled = [json.loads(line)["id"] for line in (FAMILY / name).read_text().splitlines()]
    assert len(ids) == 210 and labelled  # both files read
    assert len(labelled) == len(set(labelled)) and set(labelled) <= ids
