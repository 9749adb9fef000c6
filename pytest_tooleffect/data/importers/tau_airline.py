"""Build the ``tau-airline`` family from τ-bench's historical GPT-4o airline trajectories.

Source: ``sierra-research/tau-bench`` ``historical_trajectories/gpt-4o-airline.json`` and the
environment's tool schemas (``airline_tools.json``), MIT License, Copyright (c) 2024 Sierra.

Every assistant turn is a decision point (the final one included); a stratified sample by
position bucket becomes the family's cases, each with ``recorded`` = what GPT-4o did there.
Labels come from :mod:`pytest_tooleffect.data.importers.tau_airline_rules` (a rule labeller that
never looks at ``recorded``) and an independent manual pass, adjudicated.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pytest_tooleffect.collect.traces import (
    DecisionPoint,
    Run,
    decision_points,
    position_bucket,
    read_tau_bench,
    recorded_from_message,
)
from pytest_tooleffect.data.importers import oracle_reference
from pytest_tooleffect.data.importers.tau_airline_rules import rule_label
from pytest_tooleffect.data.importers.tau_airline_tools import READ_ONLY, WRITE_TOOLS
from pytest_tooleffect.data.labelling import merge_agreeing, read_labels, render, revise
from pytest_tooleffect.data.sampling import StratifiedSample, stratified_sample

__all__ = ["READ_ONLY", "WRITE_TOOLS", "annotate_tools", "render_state", "sample_states"]

DEFAULT_QUOTA = {"first": 60, "middle": 90, "last": 60}

_DESTRUCTIVE = frozenset({"cancel_reservation", "update_reservation_flights", "update_reservation_passengers"})


def annotate_tools(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Add MCP annotations to τ-bench's OpenAI-form tool specs (which carry none)."""
    out = []
    for spec in specs:
        fn = spec.get("function", spec)
        name = fn["name"]
        ann = {
            "readOnlyHint": name in READ_ONLY,
            "destructiveHint": name in _DESTRUCTIVE,
            "idempotentHint": name in READ_ONLY,
            "openWorldHint": name == "transfer_to_human_agents",
        }
        out.append({"name": name, "description": fn.get("description", ""),
                    "parameters": fn.get("parameters", {}), "annotations": ann})
    return out


def _keyed_points(path: Path) -> Iterator[tuple[str, tuple[Run, DecisionPoint]]]:
    for run in read_tau_bench(path):
        for dp in decision_points(run):
            yield position_bucket(dp.step, dp.run_length), (run, dp)


def case_id(run: Run, dp: DecisionPoint) -> str:
    """``tNN-rT-sSS``: task, trial, step."""
    task = run.run_id.split("-")[0].removeprefix("task")
    trial = run.run_id.split("trial")[-1]
    return f"t{int(task):02d}-r{trial}-s{dp.step:02d}"


def sample_states(
    trajectories: Path, quota: dict[str, int] | None = None, seed: int = 20241122
) -> tuple[list[dict[str, Any]], StratifiedSample[tuple[Run, DecisionPoint]]]:
    """Sample decision points stratified by position bucket and build unlabelled case dicts.

    Returns:
        ``(cases, sample)``: case dicts (``label`` absent) sorted by id, and the raw sample with
        the quota and the population count per bucket.

    """
    sample = stratified_sample(_keyed_points(trajectories), quota or DEFAULT_QUOTA, seed=seed)
    cases = []
    for bucket, drawn in sample.items.items():
        for run, dp in drawn:
            cases.append({
                "id": case_id(run, dp),
                "placement": {"step": dp.step, "run_length": dp.run_length, "bucket": bucket},
                "messages": dp.messages,
                "recorded": recorded_from_message(dp.recorded),
                "source": {"kind": "trace", "dataset": "tau-bench/gpt-4o-airline",
                           "trace_id": run.run_id, "position": dp.position},
                "_gold": run.info.get("task", {}).get("actions", []),
            })
    cases.sort(key=lambda c: c["id"])
    return cases, sample


def render_state(case: dict[str, Any], gold: list[dict[str, Any]] | None = None, width: int = 2500) -> str:
    """Render a τ-bench state for a labeller, with the task's gold actions as a reference."""
    header = []
    if gold is not None:
        header.append("Task's gold actions (reference for arguments; the task's end result):")
        header += [f"  - {a['name']} {json.dumps(a.get('kwargs', {}), sort_keys=True)}" for a in gold]
    return render(case["id"], case["placement"], case["messages"], header, width)


FAMILY_TEMPLATE = """\
# tau-airline: GPT-4o's real decisions in tau-bench's airline domain.
# Source: sierra-research/tau-bench historical_trajectories/gpt-4o-airline.json and the airline
# tools' schemas; MIT License, Copyright (c) 2024 Sierra (see NOTICE.md).
# Written by `tooleffect import tau-airline`; labels in labels/ (see LABELLING.md).
name: tau-airline
description: >
  Decision points of GPT-4o acting as tau-bench's airline agent, sampled stratified by position
  in the run (first / middle / last assistant turn), labelled as sets of acceptable actions.
system_prompt_file: system_prompt.md
tools_file: tools.json
oracle: {oracle}
licence: MIT (tau-bench, Copyright (c) 2024 Sierra); see NOTICE.md
seed: {seed}
quota: {quota}
population: {population}
"""


# the relabelling passes under ``labels/``, applied in this order after adjudication (LABELLING.md)
REVISION_PASSES = ("revisions.jsonl", "revisions-2.jsonl")


def build_family(trajectories: Path, tools: Path, out: Path, quota: dict[str, int] | None = None,
                 seed: int = 20241122) -> dict[str, Any]:
    """Write the ``tau-airline`` family into ``out``.

    Writes ``family.yaml`` (with quota and population per bucket), ``tools.json``,
    ``system_prompt.md``, ``labels/rules.jsonl`` (pass 1) and ``cases.jsonl``.  Final labels:
    ``labels/adjudicated.jsonl`` where present, else the merge of pass 1 and
    ``labels/manual.jsonl`` where their valid sets agree; other states stay unlabelled.  Then
    the relabelling passes (:data:`REVISION_PASSES`, in order; each file one line per state,
    :func:`~pytest_tooleffect.data.labelling.revise`) are applied to the labels they name.

    Returns:
        Counts: ``{"cases", "labelled", "adjudicated", "agreed", "unlabelled", "revised"}``
        (``revised``: states that at least one pass revised).

    Raises:
        ValueError: a revision names an unlabelled or unknown state, or cannot be applied.

    """
    from pytest_tooleffect.data.labelling import action_set

    cases, sample = sample_states(trajectories, quota, seed)
    out.mkdir(parents=True, exist_ok=True)
    (out / "labels").mkdir(exist_ok=True)
    first = next(read_tau_bench(trajectories))
    (out / "system_prompt.md").write_text(first.system_prompt or "", encoding="utf-8")
    specs = annotate_tools(json.loads(tools.read_text(encoding="utf-8")))
    (out / "tools.json").write_text(json.dumps(specs, indent=1) + "\n", encoding="utf-8")
    (out / "family.yaml").write_text(FAMILY_TEMPLATE.format(
        seed=seed, quota=json.dumps(sample.quota), population=json.dumps(sample.population),
        oracle=oracle_reference(out, "tau-airline")), encoding="utf-8")
    rules = {c["id"]: {"id": c["id"], **rule_label(c["messages"], c["_gold"])} for c in cases}
    with open(out / "labels" / "rules.jsonl", "w", encoding="utf-8") as fh:
        for cid in sorted(rules):
            fh.write(json.dumps(rules[cid], ensure_ascii=False, sort_keys=True) + "\n")
    manual = read_labels(out / "labels" / "manual.jsonl")
    adjudicated = read_labels(out / "labels" / "adjudicated.jsonl")
    passes = [(out / "labels" / name, read_labels(out / "labels" / name)) for name in REVISION_PASSES]
    for path, revisions in passes:
        stray = sorted(set(revisions) - {c["id"] for c in cases})
        if stray:
            raise ValueError(f"{path}: revisions for states not in the sample: {stray}")
    counts = {"cases": len(cases), "labelled": 0, "adjudicated": 0, "agreed": 0, "unlabelled": 0, "revised": 0}
    with open(out / "cases.jsonl", "w", encoding="utf-8") as fh:
        for c in cases:
            c.pop("_gold")
            cid = c["id"]
            label = None
            if cid in adjudicated:
                label = {k: v for k, v in adjudicated[cid].items() if k != "id"}
                counts["adjudicated"] += 1
            elif cid in manual and action_set(manual[cid]) == action_set(rules[cid]):
                label = merge_agreeing(rules[cid], manual[cid])
                counts["agreed"] += 1
            revised = False
            for path, revisions in passes:
                if cid in revisions:
                    where = f"{path}: {cid}"
                    if label is None:
                        raise ValueError(f"{where}: the state has no label to revise")
                    label = revise(label, revisions[cid], where)
                    revised = True
            counts["revised"] += revised
            if label is not None:
                c["label"] = label
                counts["labelled"] += 1
            else:
                counts["unlabelled"] += 1
            fh.write(json.dumps(c, ensure_ascii=False, sort_keys=True) + "\n")
    return counts
