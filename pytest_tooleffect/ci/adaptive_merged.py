"""Adaptive repeats in a report made from record logs (``tooleffect report LOGS``): one run's log, or the
shards' logs of a run merged.

Every record of an adaptive run carries the run's design (its ``adaptive``: alpha, tolerance, max_trials;
:class:`~pytest_tooleffect.scoring.record.AdaptiveDesignRecord`), so the report rebuilds each block's
``repeats`` as the run did (:func:`~.adaptive_run.adaptive_summary`): each case's trials in the order the
logs hold them (a case's trials ran one after another, all in one shard, so its records are in the order
they ran), its step, first-k pass^k and the trials saved.

The trials a case did not need were skipped as ``repeats settled`` and wrote no record: for each case whose
records settle it (``stable`` or ``flaky``), its trials 1…``min(k*, max_trials)`` that have no record.  Those are no
gap, as a sequential gate's settled skips are not (:mod:`.sequential_merged`): a shard (or the unsharded
run) short of records by no more than its settled skips is whole.  A case its records do not settle (a log
cut inside it) explains nothing: its missing trials stay missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pytest_tooleffect.ci.adaptive_repeats import RepeatDesign
from pytest_tooleffect.ci.adaptive_run import adaptive_summary, items_per_case, summary_line
from pytest_tooleffect.collect.ids import record_id
from pytest_tooleffect.report.merging import Merged
from pytest_tooleffect.report.model import Report
from pytest_tooleffect.scoring.record import AdaptiveDesignRecord, Record

__all__ = ["MergedAdaptive", "design_of_record", "merged_adaptive"]


def design_of_record(stamp: AdaptiveDesignRecord) -> RepeatDesign:
    """The design a record's ``adaptive`` says its run had.

    Raises:
        ValueError: a value :class:`RepeatDesign` refuses (named in the message).
    """
    return RepeatDesign(alpha=stamp.alpha, tolerance=stamp.tolerance, max_trials=stamp.max_trials)


@dataclass
class MergedAdaptive:
    """The ``repeats`` of a report made from record logs (a report section).

    Attributes:
        designs: each adaptive block's design, by (family, policy).
        skipped: each adaptive block's trials skipped as settled, by (family, policy).
        by_part: the trials skipped as settled by the part of the run that would have run them (the shard,
            0 for an unsharded run).
        skipped_ids: the record ids those trials would have had (a sequential gate judged on the same logs
            leaves them out of its own settled skips).
        lines: the terminal's lines (``family/policy: …``), once contributed.
    """

    designs: dict[tuple[str, str], RepeatDesign]
    skipped: dict[tuple[str, str], int]
    by_part: dict[int, int] = field(default_factory=dict)
    skipped_ids: set[str] = field(default_factory=set)
    lines: list[str] = field(default_factory=list)
    section: Literal["repeats"] = "repeats"

    @property
    def settled_skips(self) -> int:
        """The trials no case needed, over all blocks."""
        return sum(self.skipped.values())

    def explain(self, merged: Merged) -> None:
        """Drop from ``merged.short`` each part whose missing records are all trials skipped as settled."""
        merged.short = [p for p in merged.short if p.recorded + self.by_part.get(p.shard or 0, 0) < p.selected]

    def contribute(self, report: Report, records: Sequence[Record]) -> None:
        """Rewrite each adaptive block's ``repeats`` from its records, in the order read."""
        self.lines = []
        for block in report.blocks:
            key = (block.family, block.policy)
            design = self.designs.get(key)
            if design is None:
                continue
            mine = [r for r in records if (r.family, r.policy) == key]
            block.repeats = adaptive_summary(design, mine, self.skipped.get(key, 0))
            self.lines.append(f"{block.family}/{block.policy}: " + summary_line(block.repeats))


def merged_adaptive(records: Sequence[Record]) -> MergedAdaptive | None:
    """The adaptive repeats of merged records, and the trials their cases did not need.

    Args:
        records: the merged records, in the order read.

    Returns:
        The section, or ``None`` when no record says its run was adaptive.

    Raises:
        ValueError: a record's design that :class:`RepeatDesign` refuses.
    """
    designs: dict[tuple[str, str], RepeatDesign] = {}
    cases: dict[tuple[str, str, str], list[Record]] = {}
    for r in records:
        if r.adaptive is None:
            continue
        if (r.family, r.policy) not in designs:
            designs[(r.family, r.policy)] = design_of_record(r.adaptive)
        cases.setdefault((r.family, r.policy, r.case_id), []).append(r)
    if not designs:
        return None
    section = MergedAdaptive(designs=designs, skipped=dict.fromkeys(designs, 0))
    for (family, policy, case_id), mine in cases.items():
        design = designs[(family, policy)]
        ada = adaptive_summary(design, mine).adaptive  # one case: its trials, errors and step
        if ada is None or ada.cases[0].step == "not_settled":
            continue
        items = items_per_case(design)
        ran = {r.trial or 1 for r in mine}
        ids = {record_id(family, case_id, policy, t, items) for t in range(1, items + 1) if t not in ran}
        section.skipped_ids |= ids
        section.skipped[(family, policy)] += len(ids)
        part = mine[0].shard.index if mine[0].shard else 0
        section.by_part[part] = section.by_part.get(part, 0) + len(ids)
    return section
