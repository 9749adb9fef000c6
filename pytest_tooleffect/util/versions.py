"""The version a file of pytest-tooleffect says it is written in, checked by every reader.

Records, reports and baselines start with a ``version``; a reader that met a version it does not
know and read on would take a newer format's fields for its own, or drop them, in silence.  Every
reader refuses such a file with the one line :func:`version_problem` gives.
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_version", "version_problem"]


def version_problem(value: Any, known: int) -> str | None:
    """What is wrong with a file's ``version``, or ``None`` when it is the one this plugin reads.

    Args:
        value: the ``version`` the file holds (any JSON value).
        known: the version this plugin reads.

    Returns:
        ``"written by a newer pytest-tooleffect: version 99; this one reads 1"`` for a higher
        integer, ``"version 0 is not one pytest-tooleffect wrote; this one reads 1"`` for anything else.
    """
    if type(value) is int and value == known:
        return None
    if type(value) is int and value > known:
        return f"written by a newer pytest-tooleffect: version {value}; this one reads {known}"
    return f"version {value!r} is not one pytest-tooleffect wrote; this one reads {known}"


def check_version(value: Any, known: int) -> Any:
    """``value`` when it is ``known``.

    Raises:
        ValueError: :func:`version_problem`'s line (a pydantic validator's error, when called in one).
    """
    why = version_problem(value, known)
    if why is not None:
        raise ValueError(why)
    return value
