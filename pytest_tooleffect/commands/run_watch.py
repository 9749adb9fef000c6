"""A pytest plugin ``tooleffect baseline init`` loads into the run it makes (``-p``): it writes,
when the session finishes, whether the session ran to its end, to the file the environment
variable ``TOOLEFFECT_INIT_WATCH`` names.

No file written means pytest made no session (``--help``, ``--version``, a usage error): the run
recorded nothing.  The file is JSON: ``{"stopped": str | null}``, ``stopped`` being pytest's reason
when the session was cut short (``-x``, ``--maxfail``, ``--stepwise``, a plugin asking to stop).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

#: the environment variable naming the file the session's end is written to
WATCH_ENV = "TOOLEFFECT_INIT_WATCH"


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write ``{"stopped": reason or null}`` to the file ``TOOLEFFECT_INIT_WATCH`` names (nothing when unset)."""
    path = os.environ.get(WATCH_ENV)
    if not path:
        return
    stopped = session.shouldfail or session.shouldstop
    Path(path).write_text(json.dumps({"stopped": str(stopped) if stopped else None}), encoding="utf-8")
