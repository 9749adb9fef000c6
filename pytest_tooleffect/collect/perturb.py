"""Perturbed tool catalogs: the pure transforms of one state's catalog and label
(``docs/robustness.md``).

Each transform takes the tools offered at a state and its label and returns the catalog the
agent is offered instead, the label that is right there (in the original tool names: a renamed
call is mapped back before scoring) and the map from offered names back to the original ones.
Every random choice is seeded by the perturbation's seed and the case id, so a run is repeatable
and two runs offer the same catalog to the same case.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pytest_tooleffect.formats import Action, Label, ParallelGroup, ToolSpec
from pytest_tooleffect.formats.perturb import PerturbationSpec

__all__ = ["PerturbError", "Perturbed", "describe", "label_tools", "perturb", "remove_valid_label"]

#: words that praise a tool rather than say what it does (``describe`` with ``no-superlatives``)
_PRAISE = (r"(?:best|most\s+\w+|always|fastest|ultimate|perfect|powerful|recommended|preferred|optimal|greatest|"
           r"superior|leading|premier|unmatched|unparalleled|world-class|state-of-the-art|cutting-edge|extremely|"
           r"highly|ideal|excellent|amazing|incredible|definitive|essential|must-use)")
#: a run of words that praise a tool rather than say what it does (``describe`` with ``no-superlatives``),
#: joined by commas, "and" or "or", with the article before it
_SUPERLATIVES = re.compile(rf"\b(?:the\s+)?{_PRAISE}(?:\s*(?:,|and|or)?\s*{_PRAISE})*\b[ ,]*", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


class PerturbError(ValueError):
    """The perturbation cannot be applied to a state (a pool too small, a rewrite for no tool)."""


@dataclass(frozen=True)
class Perturbed:
    """One state's perturbed catalog.

    Attributes:
        tools: the catalog offered, in the order offered, under the names offered.
        label: the label that is right with that catalog, in the original tool names.
        back: offered name → original name, for every renamed tool (empty unless renamed).
        added: the original names of the tools added (distractors, a scale's fill).
        removed: the tools taken out of the catalog.
    """

    tools: tuple[ToolSpec, ...]
    label: Label
    back: Mapping[str, str] = field(default_factory=dict)
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()


def label_tools(label: Label) -> list[str]:
    """The tools the label's valid actions name, in the order of the label (each once)."""
    out: list[str] = []
    for action in label.valid_actions:
        for a in (action.parallel if isinstance(action, ParallelGroup) else [action]):
            if a.tool is not None and a.tool not in out:
                out.append(a.tool)
    return out


def _rng(spec: PerturbationSpec, case_id: str, variant: str) -> random.Random:
    return random.Random(f"{spec.seed}:{variant}:{case_id}")


def perturb(spec: PerturbationSpec, variant: str, size: int | None, case_id: str, tools: Sequence[ToolSpec],
            label: Label, unrelated: Sequence[ToolSpec] = (), same_domain: Sequence[ToolSpec] = ()) -> Perturbed | None:
    """The state's catalog and label under one variant of ``spec``.

    Args:
        spec: the perturbation.
        variant: the variant's name (``scale-32``): part of the seed.
        size: a ``scale`` variant's catalog size.
        case_id: the case's id (part of the seed).
        tools: the tools offered at the state.
        label: the state's label.
        unrelated: the pool of unrelated tools (other families', BFCL's).
        same_domain: the pool of near-miss tools (the family's own).

    Returns:
        The perturbed catalog, or ``None`` when the perturbation leaves the state as it is
        (a one-tool catalog shuffled, nothing to remove): the case gets no variant then.

    Raises:
        PerturbError: the pool holds fewer tools than asked for; a rewrite names no tool offered.
    """
    rng = _rng(spec, case_id, variant)
    tools = list(tools)
    names = {t.name for t in tools}
    if spec.kind == "shuffle":
        if len(tools) < 2:
            return None
        order = list(tools)
        rng.shuffle(order)
        if order[0].name == tools[0].name:  # the first tool always moves: an order-bound pick shows
            swap = rng.randrange(1, len(order))
            order[0], order[swap] = order[swap], order[0]
        return Perturbed(tuple(order), label)
    if spec.kind == "rename":
        width = max(2, len(str(len(tools))))
        numbers = list(range(1, len(tools) + 1))
        rng.shuffle(numbers)  # the neutral names carry no hint of the order either
        renamed = [t.model_copy(update={"name": f"tool_{k:0{width}d}"}) for t, k in zip(tools, numbers)]
        return Perturbed(tuple(renamed), label, back={r.name: t.name for r, t in zip(renamed, tools)})
    if spec.kind == "distractors":
        pool = _pool(spec, unrelated, same_domain, names)
        if len(pool) < spec.n:
            raise PerturbError(f"distractors: the {spec.pool} pool holds {len(pool)} tools not offered at the state, "
                               f"fewer than n = {spec.n}")
        added = rng.sample(pool, spec.n)
        return Perturbed((*tools, *added), label, added=tuple(t.name for t in added))
    if spec.kind == "remove-valid":
        return _remove_valid(spec, case_id, tools, label)
    if spec.kind == "describe":
        return describe(spec, tools, label)
    assert spec.kind == "scale" and size is not None
    return _scale(spec, size, rng, tools, label, _pool(spec, unrelated, same_domain, names))


def _pool(spec: PerturbationSpec, unrelated: Sequence[ToolSpec], same_domain: Sequence[ToolSpec],
          offered: set[str]) -> list[ToolSpec]:
    """The pool's tools not offered at the state, each name once, in pool order."""
    seen: set[str] = set(offered)
    out = []
    for t in (same_domain if spec.pool == "same-domain" else unrelated):
        if t.name not in seen:
            seen.add(t.name)
            out.append(t)
    return out


def remove_valid_label(label: Label, removed: set[str]) -> Label:
    """The label once the ``removed`` tools are no longer offered (the documented rule).

    The valid alternatives that call none of the removed tools stay valid (a ``tool: null``
    action always does); when none is left, a careful agent calls nothing and either tells the
    user it cannot (``reply: refuse``) or asks (``reply: ask``).  Forbidden actions stay.

    Args:
        label: the state's label.
        removed: the tool names taken out of the catalog.

    Returns:
        The derived label.
    """
    kept = [a for a in label.valid_actions
            if not any(x.tool in removed for x in (a.parallel if isinstance(a, ParallelGroup) else [a]))]
    if not kept:
        reason = "the tool that would do it is not offered"
        kept = [Action(tool=None, reply="refuse", reason=reason), Action(tool=None, reply="ask", reason=reason)]
    return label.model_copy(update={"valid_actions": kept})


def _remove_valid(spec: PerturbationSpec, case_id: str, tools: list[ToolSpec], label: Label) -> Perturbed | None:
    offered = {t.name for t in tools}
    if spec.remove == "all":
        removed = {n for n in label_tools(label) if n in offered}
    else:
        first = next((a for a in label.valid_actions
                      if not (isinstance(a, Action) and a.tool is None)), None)
        calls = [] if first is None else (first.parallel if isinstance(first, ParallelGroup) else [first])
        removed = {a.tool for a in calls if a.tool is not None and a.tool in offered}
    if not removed:
        return None
    derived = remove_valid_label(label, removed)
    override = spec.labels.get(case_id)
    if override is not None:
        derived = Label.model_validate(override)
    kept = tuple(t for t in tools if t.name not in removed)
    return Perturbed(kept, derived, removed=tuple(sorted(removed)))


def describe(spec: PerturbationSpec, tools: Sequence[ToolSpec], label: Label) -> Perturbed | None:
    """The catalog with each description rewritten by ``spec.rule`` (names, schemas and order kept).

    ``no-superlatives`` removes words that praise (best, most …, always, powerful, recommended…);
    ``first-sentence`` keeps the description up to its first ``.``, ``!`` or ``?``; ``family`` takes
    the family's ``rewrites`` (a tool it does not name keeps its description).

    Returns:
        The catalog, or ``None`` when no description changes.
    """
    out = []
    for t in tools:
        text = t.description
        if spec.rule == "no-superlatives":
            text = re.sub(r"\s{2,}", " ", _SUPERLATIVES.sub("", text)).strip()
            text = text[:1].upper() + text[1:]
        elif spec.rule == "first-sentence":
            text = _SENTENCE_END.split(text.strip(), maxsplit=1)[0]
        else:
            text = spec.rewrites.get(t.name, text)
        out.append(t.model_copy(update={"description": text}) if text != t.description else t)
    if all(a is b for a, b in zip(out, tools)):
        return None
    return Perturbed(tuple(out), label)


def _scale(spec: PerturbationSpec, size: int, rng: random.Random, tools: list[ToolSpec], label: Label,
           pool: list[ToolSpec]) -> Perturbed:
    """A catalog of ``size`` tools: the label's tools always, then the other offered tools (a
    seeded sample when there are too many), then tools from the pool; offered tools keep their
    order and the pool's come after them.  A label needing more tools than ``size`` keeps them all.
    """
    needed = set(label_tools(label))
    keep = [t for t in tools if t.name in needed]
    others = [t for t in tools if t.name not in needed]
    room = max(size - len(keep), 0)
    chosen = set(t.name for t in rng.sample(others, min(room, len(others))))
    kept = [t for t in tools if t.name in needed or t.name in chosen]
    fill = room - len(chosen)
    if fill > len(pool):
        raise PerturbError(f"scale {size}: the {spec.pool} pool holds {len(pool)} tools not offered at the state; "
                           f"{fill} more are needed")
    added = rng.sample(pool, fill) if fill else []
    removed = tuple(sorted(t.name for t in others if t.name not in chosen))
    return Perturbed((*kept, *added), label, added=tuple(t.name for t in added), removed=removed)
