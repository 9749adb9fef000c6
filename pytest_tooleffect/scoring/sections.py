"""The parts of the plugin that add to every record, behind one internal protocol.

A :class:`RecordSection` writes its part of a record on the process that scored the item (an
xdist worker under ``-n``), before the users' ``pytest_tooleffect_modify_record`` hooks, which
run last.  The plugin keeps its record sections under :data:`record_sections_key` in the config's
stash, in the order they write: the baseline's mark (``--tooleffect-baseline``), then the run's
selection (and the shard, under ``--tooleffect-shard``).
"""

from __future__ import annotations

from typing import Any, Protocol

import pytest

from pytest_tooleffect.collect.variants import PerturbedItem
from pytest_tooleffect.scoring.record import FingerprintRecord, PerturbationRecord, Record, SelectionRecord, ShardRecord

__all__ = ["PerturbationMark", "RecordSection", "SelectionMark", "record_sections_key"]


class RecordSection(Protocol):
    """A part of the plugin that adds to each record."""

    def modify_record(self, record: Record, item: pytest.Item) -> None:
        """Write its part of ``record`` (in place).

        Args:
            record: the item's record, as made by :func:`~pytest_tooleffect.scoring.build.build_record`.
            item: the case item it was made for.
        """


#: the plugin's record sections, in the order they write
record_sections_key = pytest.StashKey[list[RecordSection]]()


class Selection(Protocol):
    """What a run knows of its selection: :class:`~pytest_tooleffect.collect.sharding.RunSelection`."""

    sharded: bool
    index: int
    count: int
    fingerprints: dict[str, str]
    rules: dict[str, str]
    collected: int
    selected: int
    digest: str
    run_count: int
    run_digest: str


class SelectionMark:
    """Writes each record's ``selection`` (what the run selected), ``fingerprints`` (the labels and
    oracle rules its family was collected with) and, in a sharded run, ``shard``.

    Args:
        selection: the run's selection (known once collection is done).
    """

    def __init__(self, selection: Selection) -> None:
        self.selection = selection
        #: the parts written, by what they are made of: every record of a family gets the same ones
        self._made: dict[tuple[Any, ...], tuple[ShardRecord | None, SelectionRecord, FingerprintRecord | None]] = {}

    def modify_record(self, record: Record, item: pytest.Item) -> None:
        """Write ``record.selection``, ``record.fingerprints`` and (sharded) ``record.shard``."""
        s = self.selection
        labels = s.fingerprints.get(record.family)
        rules = s.rules.get(record.family)
        key = (s.sharded, s.index, s.count, labels, s.collected, s.selected, s.digest, s.run_count, s.run_digest,
               rules)
        made = self._made.get(key)
        if made is None:  # built once per family and run, not once per record
            made = self._made[key] = (
                ShardRecord(index=s.index, count=s.count, family_fingerprint=labels) if s.sharded else None,
                SelectionRecord(collected=s.collected, count=s.selected, digest=s.digest, run_count=s.run_count,
                                run_digest=s.run_digest),
                FingerprintRecord(labels=labels, rules=rules) if labels is not None and rules is not None else None)
        shard, selection, fingerprints = made
        if shard is not None:
            record.shard = shard
        record.selection = selection
        if fingerprints is not None:
            record.fingerprints = fingerprints


class PerturbationMark:
    """Writes a perturbed-catalog variant's ``perturbation`` (its catalog and the original it pairs
    with, ``docs/robustness.md``); an original's record is left as it is.
    """

    def modify_record(self, record: Record, item: pytest.Item) -> None:
        """Write ``record.perturbation`` when ``item`` is a perturbed-catalog variant."""
        if not isinstance(item, PerturbedItem):
            return
        p = item.perturbed
        base_id = item.record_id.replace(f"[{item.policy.name}", f"[{item.base_policy}", 1)
        record.perturbation = PerturbationRecord.model_validate({
            "name": item.variant, "kind": item.spec.kind, "base_policy": item.base_policy, "base_id": base_id,
            "base_class": item.base_class, "catalog_size": len(p.tools),
            "original_size": item.original_size, "nominal_size": item.size,
            "added": len(p.added), "removed": list(p.removed), "renamed": len(p.back)})
