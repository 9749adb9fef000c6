"""The parts of the plugin that add to every record, behind one internal protocol.

A :class:`RecordSection` writes its part of a record on the process that scored the item (an
xdist worker under ``-n``), before the users' ``pytest_tooleffect_modify_record`` hooks, which
run last.  The plugin keeps its record sections under :data:`record_sections_key` in the config's
stash, in the order they write: the baseline's mark (``--tooleffect-baseline``), then the shard
(``--tooleffect-shard``).
"""

from __future__ import annotations

from typing import Protocol

import pytest

from pytest_tooleffect.scoring.record import Record, ShardRecord

__all__ = ["RecordSection", "ShardMark", "record_sections_key"]


class RecordSection(Protocol):
    """A part of the plugin that adds to each record."""

    def modify_record(self, record: Record, item: pytest.Item) -> None:
        """Write its part of ``record`` (in place).

        Args:
            record: the item's record, as made by :func:`~pytest_tooleffect.scoring.record.build_record`.
            item: the case item it was made for.
        """


#: the plugin's record sections, in the order they write
record_sections_key = pytest.StashKey[list[RecordSection]]()


class Shards(Protocol):
    """What a sharded run knows of its shard: :class:`~pytest_tooleffect.collect.sharding.ShardSelector`."""

    index: int
    count: int
    fingerprints: dict[str, str]


class ShardMark:
    """Writes each record's ``shard``: the shard the run is and the label-set fingerprint of the
    family the shard collected.

    Args:
        shards: the run's shard selector (its fingerprints are known once collection is done).
    """

    def __init__(self, shards: Shards) -> None:
        self.shards = shards

    def modify_record(self, record: Record, item: pytest.Item) -> None:
        """Write ``record.shard``."""
        s = self.shards
        record.shard = ShardRecord(index=s.index, count=s.count, family_fingerprint=s.fingerprints.get(record.family))
