"""Authored families: notes × placements → cases, to fill the rare classes deliberately.

A spec (YAML) names the family, a set of *placements* (conversation prefixes at chosen positions
in a run, each with the label rule that applies there per kind of note) and a set of *notes*
(user messages of a kind: ``confirm``, ``decline``, ``out_of_scope``, ``missing_detail``, or
any kind the spec uses).  Every placement × note whose kind the placement has a rule for
becomes one case: the prefix, then the note as the user's message, labelled by the rule, with
``source: {kind: generated}`` saying which note and placement made it::

    family: {name: scheduling-notes, tools_file: ../../cases/scheduling/tools.json}
    timezone: Europe/Madrid
    placements:
      - id: after-booking
        step: 4
        run_length: 5
        prefix: [{role: user, content: ...}, {role: assistant, content: ...}]
        rules:
          confirm: {valid_actions: [{tool: null}], forbidden_actions: [calendar.create_event]}

Notes:
      - {id: thanks, kind: confirm, text: "thanks, that works for me"}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field

from pytest_tooleffect.collect.traces import position_bucket
from pytest_tooleffect.formats import Count, Label
from pytest_tooleffect.oracle.rules import UniqueKeyLoader
from pytest_tooleffect.util.input_files import read_input_text

__all__ = ["GENERATE", "AuthoredSpec", "generate"]

#: the command as the family files it writes name it: running it again may replace them
GENERATE = "tooleffect generate"


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Note(_Spec):
    """A user message of a kind."""

    id: str
    kind: str
    text: str


class Placement(_Spec):
    """A conversation prefix at a position, with the label rule for each kind of note."""

    id: str
    step: Count = Field(ge=0)
    run_length: Count = Field(ge=1)
    prefix: list[dict[str, Any]] = Field(default_factory=list)
    rules: dict[str, Label]


class AuthoredSpec(_Spec):
    """The spec of a generated family."""

    family: dict[str, Any]
    timezone: str | None = None
    state: dict[str, Any] = Field(default_factory=dict)
    placements: list[Placement] = Field(min_length=1)
    notes: list[Note] = Field(min_length=1)


def _family(given: dict[str, Any], spec_dir: Path, out: Path) -> dict[str, Any]:
    """The family mapping to write; ``base: path/to/family.yaml`` copies that family's tools,
    prompt and rules (paths rewritten relative to ``out``) under the spec's own name.
    """
    import os

    family = dict(given)
    base_ref = family.pop("base", None)
    if base_ref is None:
        return family
    base_path = (spec_dir / base_ref).resolve()
    try:
        base = yaml.load(read_input_text(base_path), Loader=UniqueKeyLoader) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"family.base {base_path}: {exc}") from exc
    merged = {k: v for k, v in base.items() if k not in ("quota", "population", "policies", "seed")}
    for key in ("tools_file", "system_prompt_file", "oracle"):
        if isinstance(merged.get(key), str):
            target = (base_path.parent / merged[key]).resolve()
            merged[key] = os.path.relpath(target, out.resolve())
    merged.update(family)
    return merged


def generate(spec_path: Path, out: Path) -> dict[str, Any]:
    """Write ``out/family.yaml`` and ``out/cases.jsonl`` from a spec.

    Returns:
        ``{"cases": n, "by_kind": {...}}`` counts.

    Raises:
        pydantic.ValidationError: the spec is not valid (field named).
        ValueError: the spec cannot be read, is empty or not a mapping, or a placement's step is outside
            its run.
    """
    try:
        raw = yaml.load(read_input_text(spec_path), Loader=UniqueKeyLoader)
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{spec_path}: {exc}") from exc
    if not isinstance(raw, dict):  # an empty file reads as null: pydantic would name no field
        what = "is empty" if raw is None else f"holds a YAML {type(raw).__name__}"
        raise ValueError(f"{spec_path}: {what}, not a spec: an authored family spec is a mapping of its family, notes "
                         "and placements (see examples/authored/scheduling-notes.yaml)")
    spec = AuthoredSpec.model_validate(raw)
    cases = []
    by_kind: dict[str, int] = {}
    for p in spec.placements:
        if p.step >= p.run_length:
            raise ValueError(f"{spec_path}: placement {p.id}: step {p.step} is outside a run of {p.run_length}")
        for note in spec.notes:
            rule = p.rules.get(note.kind)
            if rule is None:
                continue
            label = rule.model_dump(mode="json", exclude_defaults=True)
            label["labelled_by"] = [*label.get("labelled_by", []), f"generated:{p.id}/{note.kind}"]
            case: dict[str, Any] = {
                "id": f"{p.id}--{note.id}",
                "placement": {"step": p.step, "run_length": p.run_length,
                              "bucket": position_bucket(p.step, p.run_length)},
                "messages": [*p.prefix, {"role": "user", "content": note.text}],
                "label": label,
                "source": {"kind": "generated", "note": f"note {note.id} ({note.kind}) at placement {p.id}"},
            }
            if spec.timezone:
                case["timezone"] = spec.timezone
            if spec.state:
                case["state"] = spec.state
            cases.append(case)
            by_kind[note.kind] = by_kind.get(note.kind, 0) + 1
    out.mkdir(parents=True, exist_ok=True)
    family = _family(spec.family, spec_path.parent, out)
    buckets: dict[str, int] = {}
    for c in cases:
        buckets[c["placement"]["bucket"]] = buckets.get(c["placement"]["bucket"], 0) + 1
    family.setdefault("quota", buckets)
    family.setdefault("population", buckets)
    (out / "family.yaml").write_text(f"# Written by `{GENERATE}` from a spec.\n"
                                     + yaml.safe_dump(family, sort_keys=False, allow_unicode=True), encoding="utf-8")
    with open(out / "cases.jsonl", "w", encoding="utf-8") as fh:
        for c in sorted(cases, key=lambda c: c["id"]):
            fh.write(json.dumps(c, ensure_ascii=False, sort_keys=True) + "\n")
    return {"cases": len(cases), "by_kind": by_kind}
