"""Exceptions as text, safely: an agent's or a provider's exception may have a ``__str__`` that
raises, a message holding text no writer accepts, or a whole Python traceback inside its message.

:func:`exception_text` is the message of any exception (``str``, else ``repr``, else
``<unprintable …>``); :func:`described` is ``Type: message`` on one line; :func:`without_traceback`
cuts a message at a traceback embedded in it (litellm puts one in some of its errors' messages);
:func:`first_problem` is a pydantic validation's first error on one line.

This module imports nothing of the plugin: every stage may use it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pytest_tooleffect.util.unicode import without_surrogates

if TYPE_CHECKING:
    from pydantic import ValidationError

__all__ = ["TRACEBACK_HEADER", "described", "exception_text", "first_problem", "without_traceback"]

#: the line that opens a Python traceback
TRACEBACK_HEADER = "Traceback (most recent call last):"
#: an exception's line inside a traceback squeezed onto one line (``… ~~~^^^ KeyError: 'message' …``)
_RAISED = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Timeout))(?=: |$)")


def exception_text(exc: BaseException) -> str:
    """The message of ``exc``, whatever its ``__str__`` does: ``str(exc)``; when that raises,
    ``repr(exc)``; when that raises too, ``<unprintable Type>``.  Lone surrogates become U+FFFD.
    """
    for show in (str, repr):
        try:
            text = show(exc)
        except Exception:  # noqa: S112 - the next way of showing it is tried
            continue
        if isinstance(text, str):
            return without_surrogates(str.__str__(text))
    return f"<unprintable {type(exc).__name__}>"


def described(exc: BaseException, limit: int = 500) -> str:
    """``Type: message`` of ``exc`` on one line (``Type`` alone for an empty message), at most
    ``limit`` characters, an embedded traceback cut (:func:`without_traceback`).
    """
    text = " ".join(without_traceback(exception_text(exc)).split())
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:limit]


def without_traceback(text: str) -> str:
    """``text`` cut where a Python traceback starts inside it, with the exception that traceback
    ended in: ``Invalid response object (KeyError: 'message'; its traceback left out)``.  A text
    without one is returned as it is.
    """
    at = text.find(TRACEBACK_HEADER)
    if at < 0:
        return text
    head = text[:at].rstrip()
    raised = _raised(text[at + len(TRACEBACK_HEADER):])
    note = f"{raised}; its traceback left out" if raised else "its traceback left out"
    return f"{head} ({note})" if head else f"({note})"


def _raised(tail: str) -> str | None:
    """The exception line a traceback's text ends its frames with (the first line not indented), or,
    in a traceback squeezed onto one line, the first exception type named in it.
    """
    lines = tail.splitlines()
    if len(lines) > 1:
        for line in lines[1:]:
            if line.strip() and not line[0].isspace():
                return line.strip()[:200]
    found = _RAISED.search(tail)
    return found.group(1) if found else None


def first_problem(exc: ValidationError, under: str = "") -> str:
    """``field.path: message`` of the first error, and how many more there are.

    Args:
        exc: a failed validation (of a record, a case, a file's entry).
        under: the path of what was validated inside its whole (``verdict``), put before the error's.

    Returns:
        One line: where the first error is and what it says, with the count of the others.
    """
    errors = exc.errors()
    first = errors[0]
    where = ".".join([*([under] if under else []), *(str(p) for p in first["loc"])]) or "record"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first['msg']}{more}"
