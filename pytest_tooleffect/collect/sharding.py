"""Shards: ``--tooleffect-shard I/N`` runs a deterministic, stable part of a run's items.

Part of the collection stage (``docs/design.md``, "Architecture").  An item belongs to shard
``jump_hash(sha256(key), N) + 1``, where ``key`` is a case item's record id
(:func:`~pytest_tooleffect.scoring.record.record_id`) and any other item's node id.  Jump consistent
hashing (Lamping and Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm", 2014) gives:

* every item in exactly one shard, decided by its own id alone (no shared state, the same on
  every machine, process and Python version: SHA-256, not ``hash()``);
* adding or removing cases moves no other item, and going from ``N`` to ``N + 1`` shards moves
  only about ``1 / (N + 1)`` of the items (all of them into the new shard).

The other items are deselected (pytest's ``pytest_deselected``, as ``-k`` does), once every
other deselection is done (``-k``, ``-m``, ``--lf``): the split depends on each item's id alone,
so where it happens changes no shard's items, and the run's whole selection is known before it.
Each record of a shard carries ``shard``: ``{index, count, family_fingerprint}``, the last being
the label-set fingerprint of every case of the family the shard *collected* (before anything
was deselected), so that ``tooleffect report`` can refuse to merge shards that ran different
label sets.

Every run, sharded or not, says on each record what it selected (:class:`RunSelection`: the
record's ``selection``, the count and digest of the items this run selected and of the whole
run's selection) and what its family was scored under (``fingerprints``: the labels' and the
oracle rules'), so that a merge of logs can tell a complete run from a shard cut short, two
partial runs or a shard run under other rules.
"""

from __future__ import annotations

import hashlib
from collections.abc import Generator, Iterable
from typing import Any

import pytest

from pytest_tooleffect import wire
from pytest_tooleffect.collect.ids import record_id
from pytest_tooleffect.collect.items import CaseItem, InvalidCaseItem
from pytest_tooleffect.collect.scope import RunScope, count_classes, defined_policies

__all__ = ["RunSelection", "family_fingerprint", "selection_digest", "shard_of"]

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


def _shard_key(item: pytest.Item, together: bool) -> str:
    """The key an item is sharded by: its :func:`_key`, or with ``together`` (adaptive repeats) its case's
    record id without the trial, so that every trial of a case is in one shard.
    """
    if together and isinstance(item, CaseItem):
        return record_id(item.family.name, item.ref.id, item.policy.name)
    return _key(item)


def _case_keys(items: Iterable[pytest.Item]) -> list[str]:
    """The keys of the case items among ``items`` (record ids; an invalid case's node id)."""
    return [_key(item) for item in items if isinstance(item, (CaseItem, InvalidCaseItem))]


def selection_digest(keys: Iterable[str]) -> str:
    """SHA-256 (16 hex digits) over the sorted keys, one per line: the digest a record's
    ``selection`` carries.
    """
    h = hashlib.sha256()
    for key in sorted(keys):
        h.update(key.encode("utf-8") + b"\n")
    return h.hexdigest()[:16]


class RunSelection:
    """The plugin object that knows what the run selected (registered at configure time, on workers
    too: each collects the same items and makes records), and, under ``--tooleffect-shard I/N``,
    takes the shard's part.

    Its ``pytest_collection_modifyitems`` wraps every other plugin's: before them it notes what
    was collected (each family's label-set and rules fingerprints, the count of case items); after
    them (``-k``, ``-m``, ``--lf`` done) the run's selection, then the shard's part of it.

    Args:
        shard: ``(index, count)`` of a sharded run, or ``None``.
        together: a case's trials go to one shard (adaptive repeats: a trial runs after the one before it).
    """

    def __init__(self, shard: tuple[int, int] | None = None, together: bool = False) -> None:
        self.index, self.count = shard if shard is not None else (0, 0)
        self.together = together
        self.sharded = shard is not None
        self.fingerprints: dict[str, str] = {}
        self.rules: dict[str, str] = {}
        self.collected = self.run_count = self.selected = 0
        self.run_digest = self.digest = selection_digest([])
        self.kept = self.items_collected = 0
        #: what the run collected and selected by family × policy and class (``None`` until known: on
        #: the xdist controller, until a worker reported it)
        self.scope: RunScope | None = None

    def pytest_report_header(self) -> str | None:
        if not self.sharded:
            return None
        return f"tooleffect: shard {self.index}/{self.count} (items by a hash of their record id)"

    @pytest.hookimpl(wrapper=True, tryfirst=True)  # around -k / -m / --lf: before them and after them
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> Generator[None, None, None]:
        self.fingerprints = family_fingerprint(items)
        rules: dict[str, str] = {}
        for item in items:
            if isinstance(item, CaseItem) and item.family.name not in rules:
                rules[item.family.name] = item.family.rules_fingerprint
        self.rules = rules
        self.collected = len(_case_keys(items))
        self.items_collected = len(items)
        by_class, defined = count_classes(items), defined_policies(items)
        result = yield
        run = _case_keys(items)
        self.run_count, self.run_digest = len(run), selection_digest(run)
        if self.sharded:
            keep: list[pytest.Item] = []
            drop: list[pytest.Item] = []
            for item in items:
                (keep if shard_of(_shard_key(item, self.together), self.count) == self.index else drop).append(item)
            if drop:
                config.hook.pytest_deselected(items=drop)
                items[:] = keep
            mine = _case_keys(items)
            self.selected, self.digest = len(mine), selection_digest(mine)
        else:
            self.selected, self.digest = self.run_count, self.run_digest
        self.kept = len(items)
        self.scope = RunScope.of(by_class, items, defined, config)
        output: Any = getattr(config, "workeroutput", None)
        if output is not None:  # an xdist worker: the controller collects nothing, and learns it from here
            output[wire.WORKER_SCOPE] = self.scope.to_json()
        return result

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """On the xdist controller: the run's scope, from the first worker that collected (they all
        collect and deselect alike).
        """
        sent = getattr(node, "workeroutput", {}).get(wire.WORKER_SCOPE)
        if sent is not None and self.scope is None:
            self.scope = RunScope.from_json(sent)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.sharded:
            return
        counts = f": {self.kept} of {self.items_collected} items collected" if self.items_collected else ""
        terminalreporter.write_line(f"tooleffect: this run is shard {self.index}/{self.count}{counts}")
