"""Argument types shared by the ``tooleffect`` commands and the run's options (argparse ``type=``
callables): every number and every output file path is checked when the command line is parsed,
so a bad value is one usage line naming the option, before any work.

* :func:`whole_number` builds a type for whole numbers in a range (a count, a limit, a port);
* :func:`seconds` is a number of seconds: finite, above 0, at most a day;
* :func:`output_file` is a file to write: a path that ends in a separator (``newdir/``) names a
  folder, not a file, and is refused (the command would otherwise write a *file* named ``newdir``).

This module imports only the standard library.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable

__all__ = ["MAX_SECONDS", "ends_in_separator", "output_file", "seconds", "whole_number"]

#: a day, in seconds: the longest timeout accepted
MAX_SECONDS = 86_400.0


def whole_number(minimum: int, maximum: int | None = None, what: str = "") -> Callable[[str], int]:
    """An argparse ``type=`` for whole numbers from ``minimum`` to ``maximum`` (inclusive).

    Args:
        minimum: the smallest value accepted.
        maximum: the largest (``None``: no bound).
        what: what the number is, added to the message (``"a port"``).

    Returns:
        The parser of one value: it returns the ``int``, or raises ``argparse.ArgumentTypeError``
        (argparse prints it as ``argument --x: …`` and exits 2; pytest as a usage error, exit 4).
    """
    about = f" ({what})" if what else ""

    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number{about}") from None
        if n < minimum:
            raise argparse.ArgumentTypeError(f"{value!r} must be at least {minimum}{about}")
        if maximum is not None and n > maximum:
            raise argparse.ArgumentTypeError(f"{value!r} must be at most {maximum:,}{about}")
        return n

    return parse


def seconds(value: str) -> float:
    """An argparse ``type=`` for a number of seconds: finite, above 0, at most :data:`MAX_SECONDS`.

    Raises:
        argparse.ArgumentTypeError: not a number, not above 0, infinite or NaN, or over a day.
    """
    try:
        f = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not math.isfinite(f) or f <= 0:
        raise argparse.ArgumentTypeError(f"{value!r} must be a number of seconds above 0")
    if f > MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{value!r} must be at most {MAX_SECONDS:g} (a day, in seconds)")
    return f


def ends_in_separator(value: str) -> bool:
    """``value`` ends in a path separator (``/``, or the backslash where it is one): it names a folder."""
    seps = {os.sep, os.altsep} - {None}
    return bool(value) and value[-1] in seps


def output_file(value: str) -> str:
    """An argparse ``type=`` for a file a command writes (``--out``): the path, unchanged.

    Raises:
        argparse.ArgumentTypeError: the path ends in a separator (``reports/``): it names a folder,
            and this option writes one file; the message asks for the file's name.
    """
    if ends_in_separator(value):
        raise argparse.ArgumentTypeError(f"{value!r} ends in {value[-1]!r}, so it names a folder; this option writes "
                                         f"one file: give its name (e.g. {value}NAME)")
    return value
