"""logging's registry of loggers, safe to walk while a background import adds to it."""
from __future__ import annotations

import logging
from typing import Any

__all__ = ["snapshot_logger_registry"]


class _SnapshotLoggers(dict):  # type: ignore[type-arg]  # logging's own registry type is a plain dict
    """logging's registry of loggers whose ``values()`` is a copy taken at once.

    pytest's log capture iterates ``logging.Logger.manager.loggerDict.values()`` each time it
    attaches its handlers (session start, collection, every test phase); the background import
    creates litellm's, httpx's and openai's loggers meanwhile, and a plain dict's view then raises
    ``RuntimeError: dictionary changed size during iteration`` (an INTERNALERROR).  ``list()`` of
    the values runs in C without releasing the GIL, so the copy cannot see a half-made change.
    """

    def values(self) -> list[Any]:  # type: ignore[override]
        return list(super().values())


def snapshot_logger_registry() -> None:
    """Make logging's registry of loggers safe to iterate while another thread adds to it (once)."""
    manager = logging.Logger.manager
    if type(manager.loggerDict) is dict:
        manager.loggerDict = _SnapshotLoggers(manager.loggerDict)
