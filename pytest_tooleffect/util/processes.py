"""Whether a process of this host is still running (psutil), for the leftovers of a run."""
from __future__ import annotations

import psutil

__all__ = ["is_running"]


def is_running(pid: int) -> bool:
    """Whether process ``pid`` exists on this host and has not exited.

    A zombie (exited, not yet reaped by its parent) has exited; a process this user may not
    inspect exists.  Never raises.
    """
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True
