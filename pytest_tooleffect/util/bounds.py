"""Text kept to a bounded size, with the cut said.

A policy's reply (or a call it wrote in text) may be of any length; what a record, a failure line or
a page keeps of it is bounded.  :func:`bounded` keeps the first characters and says how long the
whole was, so a cut text is never mistaken for the whole one.

This module imports nothing of the plugin: every stage may use it.
"""

from __future__ import annotations

import math

__all__ = ["MAX_COST_USD", "MAX_PRICE_PER_MTOK", "MAX_TOKENS", "bounded", "bounded_cost", "one_line", "usage_problem"]

#: the most one decision (or one judge's usage) may cost, in US dollars: far above any real answer's
#: price, and low enough that no sum of them over a run overflows a float (a JSON report has no
#: ``Infinity``)
MAX_COST_USD = 1e9
#: the most tokens one decision may count, each way: a hundred times the largest context window
#: offered in 2025 (10 million tokens); a count past it is a provider's or an agent's bug, not usage
MAX_TOKENS = 1_000_000_000
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


def usage_problem(input_tokens: object, output_tokens: object, cost_usd: object) -> str | None:
    """What is wrong with one decision's usage, in one line, or ``None`` when it can be used.

    Tokens are whole numbers from 0 to :data:`MAX_TOKENS` (``None``: unknown); money is a number of US
    dollars from 0 to :data:`MAX_COST_USD` (``None``: unknown).  The same rule holds for an agent's
    usage and a provider's.

    Returns:
        ``input_tokens -5: a whole number of tokens from 0 to 1,000,000,000, or None when unknown``, or ``None``.
    """
    for key, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 0 <= value <= MAX_TOKENS):
            return f"{key} {_value(value)}: a whole number of tokens from 0 to {MAX_TOKENS:,}, or None when unknown"
    money = cost_usd
    if money is not None and (isinstance(money, bool) or not isinstance(money, (int, float))
                              or not math.isfinite(money) or not 0 <= money <= MAX_COST_USD):
        return (f"cost_usd {_value(money)}: a number of US dollars from 0 to {MAX_COST_USD:,.0f} (one decision's "
                "cost), or None when unknown")
    return None


def _value(value: object) -> str:
    """``repr(value)`` for a message, at most 60 characters (an object whose ``repr`` raises, by its type)."""
    try:
        text = repr(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"
    return text if len(text) <= 60 else text[:59] + "…"
