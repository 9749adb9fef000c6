"""The report's robustness section: each perturbed-catalog variant paired with the original on the
same cases (``docs/robustness.md``).

For each family × policy × variant and each class of the original labels (and all of them), the
decisions of the original and of the variant on the same case and trial are paired; the rate of
each side at the ``name_args`` level (the decision passes), the drop in points, the exact
McNemar test on the discordant pairs (:func:`~.arithmetic.mcnemar_exact`; McNemar 1947) and the
decisions that flipped.  A row is **flagged** when the variant loses significantly: more pairs
broke than were fixed and ``p < alpha`` (0.05).  The ``scale`` variants also give a rate against
catalog size per class: the curve the HTML page draws.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction
from typing import Literal

from pydantic import Field

from pytest_tooleffect.formats.perturb import KINDS
from pytest_tooleffect.report.arithmetic import CLASSES, mcnemar_exact, percent
from pytest_tooleffect.report.parts import Count, Part, Pct
from pytest_tooleffect.report.store import RecordStore
from pytest_tooleffect.scoring.record import Record

__all__ = ["ALPHA", "FLIPS_LISTED", "CurvePoint", "Flip", "PairedRate", "Robustness", "RobustnessRow", "ScaleCurve",
           "robustness"]

#: the significance level a row is flagged at
ALPHA = 0.05
#: the flipped decisions a row lists at most (its counts always hold them all)
FLIPS_LISTED = 50


class PairedRate(Part):
    """One side's rate on the paired decisions."""

    correct: Count
    """Decisions that passed."""
    n: Count
    """Paired decisions."""
    rate_pct: Pct | None
    """``100 · correct / n``; ``null`` with no pair."""
    display: str
    """The rate as shown (one decimal, round-half-up)."""


class Flip(Part):
    """One paired decision whose verdict changed under the perturbation."""

    id: str
    """The variant's record id."""
    base_id: str
    """The original's record id."""
    direction: Literal["broke", "fixed"]
    """``broke``: passed on the original catalog, fails on the perturbed one; ``fixed``: the reverse."""
    before: str
    """The original's verdict kind."""
    after: str
    """The variant's verdict kind."""


class RobustnessRow(Part):
    """One variant against the original on one class (or ``all``) of one family × policy."""

    family: str
    """The family."""
    policy: str
    """The original policy (the variant's records carry ``policy+variant``)."""
    variant: str
    """The variant's name (``shuffle``, ``scale-32``)."""
    kind: Literal["shuffle", "rename", "distractors", "remove-valid", "describe", "scale"]
    """The kind of perturbation."""
    label_class: Literal["single", "several", "no_tool", "all"]
    """The original labels' class, or ``all``."""
    original: PairedRate
    """The original catalog's rate on the paired cases."""
    perturbed: PairedRate
    """The perturbed catalog's rate on the same cases."""
    drop_pct: float | None
    """``original − perturbed`` in percentage points (negative: the variant did better)."""
    broke: Count
    """Pairs that passed on the original and fail perturbed (McNemar's b)."""
    fixed: Count
    """Pairs that failed on the original and pass perturbed (McNemar's c)."""
    p_value: float
    """Two-sided exact McNemar p-value on ``broke`` and ``fixed`` (1 when both are 0)."""
    flagged: bool
    """``broke > fixed`` and ``p_value < alpha``: the perturbation costs this policy decisions."""
    flips: list[Flip] = Field(default_factory=list)
    """The flipped decisions (at most :data:`FLIPS_LISTED`, broke first)."""
    unpaired: Count = 0
    """Variant decisions left out: the original or the variant is an error, or not in the run."""


class CurvePoint(Part):
    """The rate at one catalog size for one class."""

    size: int
    """Tools offered (the ``scale`` variant's nominal size; ``0`` stands for the original catalogs)."""
    label_class: Literal["single", "several", "no_tool", "all"]
    """The original labels' class, or ``all``."""
    correct: Count
    """Decisions that passed."""
    n: Count
    """Decisions."""
    rate_pct: Pct | None
    """``100 · correct / n``."""


class ScaleCurve(Part):
    """Rate against catalog size for one family × policy (its ``scale`` variants)."""

    family: str
    """The family."""
    policy: str
    """The original policy."""
    original_size: float | None
    """The mean size of the original catalogs of the paired cases."""
    points: list[CurvePoint]
    """By size, then class."""


class Robustness(Part):
    """Every perturbed-catalog variant of the run against the original."""

    alpha: float = ALPHA
    """The significance level of ``flagged``."""
    level: Literal["name_args"] = "name_args"
    """The level the rates are counted at (names and arguments: the decision passes)."""
    rows: list[RobustnessRow]
    """Per family × policy × variant, a row per class then ``all``."""
    curves: list[ScaleCurve] = Field(default_factory=list)
    """The ``scale`` curves, one per family × policy that ran them."""


def _paired(correct: int, n: int) -> PairedRate:
    r = Fraction(correct, n) if n else None
    return PairedRate(correct=correct, n=n, rate_pct=None if r is None else float(r * 100), display=percent(r))


def _passed(rec: Record) -> bool:
    return rec.outcome == "scored" and rec.verdict is not None and rec.verdict.name_args_ok


def _kind(rec: Record) -> str:
    return rec.verdict.kind if rec.verdict is not None else "error"


def robustness(records: Sequence[Record]) -> Robustness | None:
    """The robustness section of a run's records.

    Args:
        records: every record of the run (originals and variants, any order).

    Returns:
        The section, or ``None`` when no record is a variant.
    """
    if isinstance(records, RecordStore) and not records.may_hold("perturbation"):
        return None  # no variant, and no record typed to know it
    groups: dict[tuple[str, str, str, str], list[Record]] = defaultdict(list)
    for r in records:
        if r.perturbation is not None:
            groups[(r.family, r.perturbation.base_policy, r.perturbation.name, r.perturbation.kind)].append(r)
    if not groups:
        return None
    bases = {v.perturbation.base_id for vs in groups.values() for v in vs if v.perturbation is not None}
    by_id = {r.id: r for r in records if r.id in bases}  # the originals the variants pair with, only
    rows: list[RobustnessRow] = []
    curves: dict[tuple[str, str], list[tuple[int, str, Record, Record]]] = defaultdict(list)
    for (family, policy, variant, kind), variants in sorted(groups.items(), key=_order):
        pairs: list[tuple[Record, Record]] = []
        unpaired = 0
        for v in variants:
            assert v.perturbation is not None
            base = by_id.get(v.perturbation.base_id)
            if base is None or base.outcome != "scored" or v.outcome != "scored":
                unpaired += 1
                continue
            pairs.append((base, v))
            if kind == "scale" and v.perturbation.nominal_size is not None:
                curves[(family, policy)].append((v.perturbation.nominal_size, v.perturbation.base_class, base, v))
        for cls in (*CLASSES, "all"):
            chosen = [(b, v) for b, v in pairs if cls == "all" or (v.perturbation and v.perturbation.base_class == cls)]
            if not chosen and cls != "all":
                continue
            rows.append(_row(family, policy, variant, kind, cls, chosen, unpaired if cls == "all" else 0))
    return Robustness(rows=rows, curves=[_curve(f, p, pts) for (f, p), pts in sorted(curves.items())])


def _order(item: tuple[tuple[str, str, str, str], list[Record]]) -> tuple[str, str, int, int, str]:
    """Rows by family, policy, kind (in the docs' order), then a scale's size, then the name."""
    (family, policy, variant, kind), variants = item
    size = next((v.perturbation.nominal_size or 0 for v in variants if v.perturbation is not None), 0)
    return (family, policy, KINDS.index(kind) if kind in KINDS else len(KINDS), size, variant)


def _row(family: str, policy: str, variant: str, kind: str, cls: str, pairs: list[tuple[Record, Record]],
         unpaired: int) -> RobustnessRow:
    before = sum(_passed(b) for b, _ in pairs)
    after = sum(_passed(v) for _, v in pairs)
    broke = [(b, v) for b, v in pairs if _passed(b) and not _passed(v)]
    fixed = [(b, v) for b, v in pairs if not _passed(b) and _passed(v)]
    n = len(pairs)
    p = mcnemar_exact([[0, len(broke)], [len(fixed), 0]])
    drop = float(Fraction(before - after, n) * 100) if n else None
    flips = [Flip.model_validate({"id": v.id, "base_id": b.id, "direction": d, "before": _kind(b), "after": _kind(v)})
             for d, group in (("broke", broke), ("fixed", fixed)) for b, v in group][:FLIPS_LISTED]
    return RobustnessRow.model_validate({
        "family": family, "policy": policy, "variant": variant, "kind": kind, "label_class": cls,
        "original": _paired(before, n), "perturbed": _paired(after, n), "drop_pct": drop,
        "broke": len(broke), "fixed": len(fixed), "p_value": p,
        "flagged": len(broke) > len(fixed) and p < ALPHA, "flips": flips, "unpaired": unpaired})


def _curve(family: str, policy: str, points: list[tuple[int, str, Record, Record]]) -> ScaleCurve:
    """The curve: at size 0 the original catalogs (each case once), then each scale size."""
    cells: dict[tuple[int, str], list[bool]] = defaultdict(list)
    originals: dict[str, Record] = {}
    for size, cls, base, v in points:
        originals[base.id] = base
        for c in (cls, "all"):
            cells[(size, c)].append(_passed(v))
    classes = {base.id: cls for _, cls, base, _ in points}
    for bid, base in originals.items():
        for c in (classes[bid], "all"):
            cells[(0, c)].append(_passed(base))
    sizes = {base.id: v.perturbation.original_size for *_, base, v in points if v.perturbation is not None}
    known = [n for n in sizes.values() if n is not None]
    order = {c: i for i, c in enumerate((*CLASSES, "all"))}
    out = [CurvePoint.model_validate({"size": size, "label_class": c, "correct": sum(ok), "n": len(ok),
                                      "rate_pct": 100 * sum(ok) / len(ok) if ok else None})
           for (size, c), ok in sorted(cells.items(), key=lambda kv: (kv[0][0], order[kv[0][1]]))]
    return ScaleCurve(family=family, policy=policy, original_size=sum(known) / len(known) if known else None,
                      points=out)
