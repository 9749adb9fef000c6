"""Chunks of items for ``-n W --dist loadgroup``, and for ``-n W`` alone (``--dist load``) in a
live run: each xdist worker is handed whole chunks, so it knows in advance which live items it
will run and can queue their model turns at once.

The run's N items, in collection order, are cut into chunks of *s* positions (chunk *k* holds
positions ``k × s`` to ``(k + 1) × s − 1``), *s* = :func:`chunk_size` of N and the W workers: at
most :data:`CHUNK`, and small enough that there are at least 2 W chunks (so a run of a few dozen
items still spreads over every worker).  Both sides compute the same chunks from the same list
and the same W: the controller from the node ids the workers report (every worker collects the
same list, pytest-xdist checks it) and its ``--tx`` specs, a worker from its ``session.items``
and ``workerinput["workercount"]`` (pytest-xdist sets both from the same specs).

pytest-xdist's own ``loadgroup`` groups by ``xdist_group`` markers, which it writes into the node
ids (``…@group``) on the worker; with pytest 9's structured node ids that write no longer changes
the id, so every item is scheduled on its own and a worker cannot tell what it will run
(pytest-xdist issue #1386).  :func:`chunk_scheduler` is therefore the controller's scheduler of a
live run under ``--dist loadgroup`` or ``load``: an item whose id does carry a group (``…@name``, on a pytest
where the write works) keeps it; any other item is scheduled with its chunk.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pytest_tooleffect.compat import unit_scheduler

__all__ = ["CHUNK", "case_positions", "chunk_scheduler", "chunk_size", "group_of"]

#: positions per chunk at the most
CHUNK = 64


def chunk_size(items: int, workers: int) -> int:
    """Positions per chunk for ``items`` items over ``workers`` workers: ``⌈items / 2 W⌉``, at
    least 1 and at most :data:`CHUNK`.
    """
    return max(1, min(CHUNK, -(-items // (2 * max(1, workers)))))


def group_of(nodeid: str, position: int, size: int = CHUNK) -> str:
    """The work unit the controller schedules the item in: the group its id carries (``…@name``,
    as pytest-xdist's ``loadgroup`` reads it), else its chunk, ``tooleffect-<position // size>``
    (``position``: 0-based, in collection order; ``size``: :func:`chunk_size`).  The worker
    prefetches by the same units, so it never queues a turn of an item another worker is handed.
    """
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return nodeid.split("@")[-1]
    return f"tooleffect-{position // size}"


#: a trial's suffix in an item's id (``case[policy:3]``, ``collect/ids.py``)
_TRIAL = re.compile(r":\d+\]$")


def case_positions(nodeids: Sequence[str]) -> list[int]:
    """Each item's position for :func:`group_of` when a case's trials must stay together (adaptive
    repeats: a trial is run only once the one before it was scored): the position of the first item
    of its case (its id without the trial, ``case[policy:3]`` → ``case[policy]``), so that all the
    trials of a case fall in one chunk, and so on one worker, in their order.
    """
    first: dict[str, int] = {}
    return [first.setdefault(_TRIAL.sub("]", nodeid), n) for n, nodeid in enumerate(nodeids)]


def chunk_scheduler(config: Any, log: Any, together: bool = False) -> Any:
    """pytest-xdist's ``LoadGroupScheduling``, with the chunks above as the groups of the items
    that carry no group of their own (:func:`~pytest_tooleffect.compat.unit_scheduler`); with
    ``together``, a case's trials in the chunk of its first (:func:`case_positions`).  Imports
    pytest-xdist (called only by its hook).
    """
    def units(collection: Sequence[str], workers: int) -> dict[str, str]:
        size = chunk_size(len(collection), workers)
        at = case_positions(collection) if together else range(len(collection))
        return {nodeid: group_of(nodeid, n, size) for n, nodeid in zip(at, collection, strict=True)}

    return unit_scheduler(config, log, units)
