"""Why an item's model turn need not be sent: the question a later stage answers before each turn.

A sequential gate (``ci/sequential_gate.py``) may settle its block's verdict before the block's
last items ran; from then on no model turn of that block is worth paying for.  The decision stage
asks :data:`stop_key`'s callable before it queues a turn (the prefetch of
:class:`~pytest_tooleffect.decide.decision.ModelTurns`), and the gate skips the item in its setup
after :meth:`~pytest_tooleffect.decide.decision.ModelTurns.withdraw` took back a turn queued before
the verdict.  This module names the question, so the decision stage imports no later one.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pytest_tooleffect.collect.items import CaseItem

__all__ = ["stop_key", "stopped"]

#: the callable that says why an item's turn need not be sent (a skip reason), or ``None``: send it
stop_key = pytest.StashKey[Callable[[CaseItem], str | None]]()


def stopped(config: pytest.Config, item: CaseItem) -> str | None:
    """Why ``item``'s model turn need not be sent, or ``None`` (no later stage said so).

    Args:
        config: the run's config (its stash holds the callable, when a sequential gate is set).
        item: the case item about to have its turn queued.

    Returns:
        The skip reason, or ``None``.
    """
    ask = config.stash.get(stop_key, None)
    return None if ask is None else ask(item)
