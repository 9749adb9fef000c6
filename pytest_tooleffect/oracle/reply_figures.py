"""The reply checks' published figures: what ``tooleffect calibrate-replies`` measured on the labelled reply set.

One place for the numbers: docs/replies.md prints them (its "Published figures" table is checked
against this module by ``tests/test_reply_figures.py``), the same test fails when a measurement
falls under them, and :data:`pytest_tooleffect.oracle.reply.FALLBACK_PRECISION` (which marks a
fallback verdict ``low_precision``) is read from them.

They are measured on :data:`SPLIT`: the rows of the set's ``test`` split (never tuned on when the
``dev`` split was) that fall in its ``held`` half by the hash of the reply id (never read when the
``look`` half was): ``tooleffect calibrate-replies datasets/replies --split held+test``.  Each
figure is ``(precision, recall)`` rounded to two decimals (``tp / (tp + fp)``, ``tp / (tp + fn)``).
"""

from __future__ import annotations

__all__ = ["FIGURES", "SPLIT"]

#: the rows the published figures are measured on (``--split`` of ``tooleffect calibrate-replies``)
SPLIT = "held+test"
#: ``{check: (precision, recall)}``: the fallback per reply kind, the phantom-action check over every
#: reply and over the replies labelled with an action or a result claim
FIGURES: dict[str, tuple[float, float]] = {
    "ask": (0.95, 0.86),
    "refuse": (0.88, 0.44),
    "answer": (0.60, 0.94),
    "phantom_action": (0.71, 0.53),
    "phantom_action/action": (1.00, 0.70),
    "phantom_action/result": (0.75, 0.33),
}
