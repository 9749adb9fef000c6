"""Chunks of items for ``-n W --dist loadgroup``: each xdist worker is handed whole chunks, so it
knows in advance which live items it will run and can queue their model turns at once.

The run's items, in collection order, are cut into chunks of :data:`CHUNK` positions (chunk *k*
holds positions ``k × CHUNK`` to ``(k + 1) × CHUNK − 1``).  Both sides compute the same chunks
from the same list: the controller from the node ids the workers report (every worker collects
the same list, pytest-xdist checks it), a worker from its ``session.items``.

pytest-xdist's own ``loadgroup`` groups by ``xdist_group`` markers, which it writes into the node
ids (``…@group``) on the worker; with pytest 9's structured node ids that write no longer changes
the id, so every item is scheduled on its own and a worker cannot tell what it will run
(pytest-xdist issue #1386).  :func:`chunk_scheduler` is therefore the controller's scheduler of a
live run under ``--dist loadgroup``: an item whose id does carry a group (``…@name``, on a pytest
where the write works) keeps it; any other item is scheduled with its chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["CHUNK", "chunk_scheduler", "group_of"]

#: positions per chunk
CHUNK = 64


def group_of(nodeid: str, position: int) -> str:
    """The work unit the controller schedules the item in: the group its id carries (``…@name``,
    as pytest-xdist's ``loadgroup`` reads it), else its chunk, ``tooleffect-<position // CHUNK>``
    (``position``: 0-based, in collection order).  The worker prefetches by the same units, so it
    never queues a turn of an item another worker is handed.
    """
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return nodeid.split("@")[-1]
    return f"tooleffect-{position // CHUNK}"


def chunk_scheduler(config: Any, log: Any) -> Any:
    """pytest-xdist's ``LoadGroupScheduling``, with the chunks above as the groups of the items
    that carry no group of their own.  Imports pytest-xdist (called only by its hook).
    """
    from xdist.scheduler import LoadGroupScheduling  # type: ignore[import-untyped]

    class ChunkScheduling(LoadGroupScheduling):  # type: ignore[misc]
        """Schedules whole chunks (see the module's docstring)."""

        _chunks: dict[str, str] | None = None

        def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
            super().add_node_collection(node, collection)
            if self._chunks is None:
                self._chunks = {nodeid: group_of(nodeid, n) for n, nodeid in enumerate(collection)}

        def _split_scope(self, nodeid: str) -> str:
            return (self._chunks or {}).get(nodeid) or str(super()._split_scope(nodeid))

    return ChunkScheduling(config, log)
