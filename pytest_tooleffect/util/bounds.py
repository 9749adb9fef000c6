"""Text kept to a bounded size, with the cut said.

A policy's reply (or a call it wrote in text) may be of any length; what a record, a failure line or
a page keeps of it is bounded.  :func:`bounded` keeps the first characters and says how long the
whole was, so a cut text is never mistaken for the whole one.

This module imports nothing of the plugin: every stage may use it.
"""

from __future__ import annotations

import math

__all__ = ["MAX_COST_USD", "MAX_PRICE_PER_MTOK", "bounded", "bounded_cost", "one_line"]

#: the most one decision (or one judge's usage) may cost, in US dollars: far above any real answer's
#: price, and low enough that no sum of them over a run overflows a float (a JSON report has no
#: ``Infinity``)
MAX_COST_USD = 1e9
#: the highest user price, in US dollars per million tokens (a dollar a token)
MAX_PRICE_PER_MTOK = 1e6


def bounded(text: str, limit: int) -> str:
    """``text`` when it holds at most ``limit`` characters; else its first ``limit`` characters
    followed by `` … (12,345 characters, cut)``, the whole text's length in characters.

    Redact before cutting (:func:`~pytest_tooleffect.util.redaction.redact`): a secret cut in two
    is no longer found.

    Args:
        text: the text.
        limit: how many characters of it to keep (≥ 0).

    Returns:
        The text, or its head and the note of the cut (``limit`` + about 30 characters).

    Raises:
        ValueError: ``limit`` is negative.
    """
    if limit < 0:
        raise ValueError(f"a text cannot be cut at {limit} characters")
    if len(text) <= limit:
        return text
    head = text[:limit]
    return f"{head} … ({len(text):,} characters, cut)" if head else f"… ({len(text):,} characters, cut)"


def bounded_cost(value: float | None) -> float | None:
    """``value`` (US dollars, ``None``: unknown) when it is a finite number from 0 to :data:`MAX_COST_USD`.

    Raises:
        ValueError: it is not (the message says the bound).
    """
    if value is not None and not (math.isfinite(value) and 0 <= value <= MAX_COST_USD):
        raise ValueError(f"{value!r} US dollars: one decision's cost is from 0 to {MAX_COST_USD:,.0f}")
    return value


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines included) made one space, ends stripped."""
    return " ".join(text.split())
