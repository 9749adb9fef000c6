"""One assembler: records in, the whole :class:`~.model.Report` out, its sections written in a fixed order.

The counting is :func:`~.summary.summarise`'s; the sections beyond it (the judge's, the shard's,
the baseline's, the gates') are written by the plugin's own parts through the internal
:class:`ReportSection` protocol, never through the users' ``pytest_tooleffect_modifyreport``
(which the plugin calls after, on the finished report).  The plugin's reporter and
``tooleffect report`` both call :func:`assemble`, so a report merged from record logs has the
sections a single run has, where its inputs allow.

The order is :data:`SECTION_ORDER`: ``judge`` (what judged free-text fields), ``shard`` (which
part of a sharded run this is), ``baseline`` (the run against an accepted one), ``sequential`` (the
sequential gates' verdicts and savings), ``repeats`` (adaptive repeats' trials, steps and savings,
written into each block's ``repeats``), ``gates`` (the
thresholds judged on everything before them, the baseline's regressions included).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pytest_tooleffect.report.model import Report
from pytest_tooleffect.report.robustness import robustness
from pytest_tooleffect.report.run_model import MergedSelection, MergedShards, ShardOf
from pytest_tooleffect.report.summary import summarise
from pytest_tooleffect.scoring.record import Record

__all__ = ["SECTION_ORDER", "ReportSection", "SectionName", "ShardSection", "assemble", "ordered"]

SectionName = Literal["judge", "shard", "baseline", "sequential", "repeats", "gates"]

#: the order sections are written in: a later section may read what an earlier one wrote
SECTION_ORDER: tuple[SectionName, ...] = ("judge", "shard", "baseline", "sequential", "repeats", "gates")


@runtime_checkable
class ReportSection(Protocol):
    """A part of the plugin that writes one section of the report."""

    @property
    def section(self) -> SectionName:
        """Which section it writes (one of :data:`SECTION_ORDER`)."""

    def contribute(self, report: Report, records: Sequence[Record]) -> None:
        """Write the section into ``report`` (in place), from the report so far and the run's records.

        Args:
            report: the report: its blocks, and the sections earlier in :data:`SECTION_ORDER`.
            records: every record of the run, in the order they arrived.
        """


class ShardSection:
    """The report's ``shard`` (this run is one shard: ``--tooleffect-shard I/N``), or ``shards`` (the
    shards ``tooleffect report`` merged) and ``selection`` (what their run selected, and how much of
    it the logs hold), a :class:`ReportSection`.

    Args:
        shard: the shard this run is.
        merged: the shards merged from record logs.
        selection: the selection of the run whose logs were merged.
    """

    section: Literal["shard"] = "shard"

    def __init__(self, shard: ShardOf | None = None, merged: MergedShards | None = None,
                 selection: MergedSelection | None = None) -> None:
        self.shard, self.merged, self.selection = shard, merged, selection

    def contribute(self, report: Report, records: Sequence[Record]) -> None:
        """Write ``report.shard``, ``report.shards`` and ``report.selection`` (each when given)."""
        if self.shard is not None:
            report.shard = self.shard
        if self.merged is not None:
            report.shards = self.merged
        if self.selection is not None:
            report.selection = self.selection


def ordered(sections: Iterable[ReportSection]) -> list[ReportSection]:
    """The sections in :data:`SECTION_ORDER`.

    Args:
        sections: the sections, in any order, each section name at most once.

    Returns:
        The same sections, sorted.

    Raises:
        ValueError: a section name twice, or one not in :data:`SECTION_ORDER`.
    """
    out = list(sections)
    names = [s.section for s in out]
    unknown = sorted(set(names) - set(SECTION_ORDER))
    if unknown:
        raise ValueError(f"unknown report sections {unknown}: the sections are {list(SECTION_ORDER)}")
    if len(set(names)) != len(names):
        raise ValueError(f"a report section given twice: {names}")
    return sorted(out, key=lambda s: SECTION_ORDER.index(s.section))


def assemble(records: Sequence[Record], families: Mapping[str, Mapping[str, Any]] | None = None,
             sections: Iterable[ReportSection] = (), **counting: Any) -> Report:
    """The report of a run: the counting of :func:`~.summary.summarise`, then each section in order.

    Args:
        records: the run's records, in the order they arrived.
        families: per-family metadata (``quota``, ``population``, ``production``) by family name.
        sections: the parts that write the report's further sections.
        **counting: :func:`~.summary.summarise`'s other arguments (``status``, ``invalid``,
            ``skipped``, ``unrecorded``, ``min_class_n``).

    Returns:
        The report, every section written.

    Raises:
        ValueError: an unknown status, or sections that are not one of each (:func:`ordered`).
    """
    chosen = ordered(sections)
    report = summarise(records, families, **counting)
    report.robustness = robustness(records)  # every variant paired with its original: gates read it
    for section in chosen:
        section.contribute(report, records)
    return report
