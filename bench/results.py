"""The machine-readable result line every benchmark prints, read by ``bench/table.py``.

One line per figure: ``BENCH-RESULT {json}`` with ``figure`` (what was measured), ``peer`` (the
named peer or physical limit it is held against, measured in the same run), ``ratio`` (ours over
the peer or limit, or a count for a conformance figure), ``target`` (``"<= 2"``, ``">= 10"``,
``"== 0"``), ``met`` and ``note``.  ``make bench`` runs every script and prints the table.
"""

from __future__ import annotations

import json
import operator
from typing import Any

__all__ = ["PREFIX", "emit", "parse"]

PREFIX = "BENCH-RESULT "
_OPS = {"<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt, "==": operator.eq}


def emit(figure: str, peer: str, ratio: float, target: str, note: str = "") -> dict[str, Any]:
    """Print one result line and return it.

    Args:
        figure: what was measured (e.g. ``replay N=10000 half failing: wall``).
        peer: the peer or limit it is held against (e.g. ``plain pytest, 10000 trivial tests``).
        ratio: ours / peer (or the count the target is about).
        target: an operator and a bound, ``"<= 2"``; ``met`` is the ratio held against it.
        note: measured values behind the ratio, in words.

    Returns:
        The result as printed (a JSON object).

    Raises:
        ValueError: a target that is not an operator and a number.
    """
    op, _, bound = target.partition(" ")
    if op not in _OPS:
        raise ValueError(f"target {target!r}: an operator ({', '.join(_OPS)}) and a number")
    result = {"figure": figure, "peer": peer, "ratio": round(float(ratio), 3), "target": target,
              "met": bool(_OPS[op](float(ratio), float(bound))), "note": note}
    print(PREFIX + json.dumps(result), flush=True)
    return result


def parse(text: str) -> list[dict[str, Any]]:
    """The result lines in a benchmark's output, in order."""
    return [json.loads(line[len(PREFIX):]) for line in text.splitlines() if line.startswith(PREFIX)]
