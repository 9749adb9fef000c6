"""Shards: ``--tooleffect-shard I/N`` runs a deterministic, stable part of a run's items.

Part of the collection stage (``docs/design.md``, "Architecture").  An item belongs to shard
``jump_hash(sha256(key), N) + 1``, where ``key`` is a case item's record id
(:func:`~pytest_tooleffect.scoring.record.record_id`) and any other item's node id.  Jump consistent
hashing (Lamping and Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm", 2014) gives:

* every item in exactly one shard, decided by its own id alone (no shared state, the same on
  every machine, process and Python version: SHA-256, not ``hash()``);
* adding or removing cases moves no other item, and going from ``N`` to ``N + 1`` shards moves
  only about ``1 / (N + 1)`` of the items (all of them into the new shard).

The other items are deselected (pytest's ``pytest_deselected``, as ``-k`` does), so a shard's
run reports them as deselected, not as lost.  Each record of a shard carries ``shard``:
``{index, count, family_fingerprint}``, the last being the label-set fingerprint of every case
of the family the shard *collected* (before the shard was taken), so that ``tooleffect
report`` can refuse to merge shards that ran different label sets.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from pytest_tooleffect.collect.items import CaseItem

__all__ = ["ShardSelector", "family_fingerprint", "shard_of"]

_JUMP = 2862933555777941757
_MASK = (1 << 64) - 1


def shard_of(key: str, count: int) -> int:
    """The shard (``1…count``) an item with this key belongs to.

    Args:
        key: the item's record id (a case item) or node id.
        count: the number of shards, at least 1.

    Returns:
        The 1-based shard, by jump consistent hashing of the first 8 bytes of SHA-256 of ``key``.

    Raises:
        ValueError: ``count`` below 1.
    """
    if count < 1:
        raise ValueError("the number of shards is at least 1")
    h = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")
    b, j = -1, 0
    while j < count:
        b = j
        h = (h * _JUMP + 1) & _MASK
        j = int((b + 1) * (float(1 << 31) / float((h >> 33) + 1)))
    return b + 1


def family_fingerprint(items: list[pytest.Item]) -> dict[str, str]:
    """The label-set fingerprint of each family among the items, over every labelled case collected.

    Returns:
        By family name, SHA-256 (16 hex digits) over the sorted distinct ``(case id, label hash)``
        pairs: the same formula as the report's ``label_set_fingerprint``.
    """
    pairs: dict[str, set[tuple[str, str]]] = {}
    for item in items:
        if isinstance(item, CaseItem) and item.ref.label_class is not None:
            pairs.setdefault(item.family.name, set()).add((item.ref.id, item.ref.label_hash))
    out = {}
    for fam, labels in pairs.items():
        h = hashlib.sha256()
        for cid, lh in sorted(labels):
            h.update(f"{cid}\t{lh}\n".encode())
        out[fam] = h.hexdigest()[:16]
    return out


def _key(item: pytest.Item) -> str:
    return item.record_id if isinstance(item, CaseItem) else item.nodeid


class ShardSelector:
    """The plugin object of a sharded run (registered at configure time, on workers too).

    Args:
        index: the shard this run is, 1…``count``.
        count: how many shards the run is split into.
    """

    def __init__(self, index: int, count: int) -> None:
        self.index, self.count = index, count
        self.fingerprints: dict[str, str] = {}
        self.kept = self.collected = 0

    def pytest_report_header(self) -> str:
        return f"tooleffect: shard {self.index}/{self.count} (items by a hash of their record id)"

    @pytest.hookimpl(tryfirst=True)  # before -k / -m: the fingerprint covers every case collected
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        self.fingerprints = family_fingerprint(items)
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        for item in items:
            (keep if shard_of(_key(item), self.count) == self.index else drop).append(item)
        self.collected, self.kept = len(items), len(keep)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        counts = f": {self.kept} of {self.collected} items collected" if self.collected else ""
        terminalreporter.write_line(f"tooleffect: this run is shard {self.index}/{self.count}{counts}")
