"""A record's pytest outcome, decided once: whether its decision passed and whether its failure was
expected (pytest's XFAIL).

The report's block header (``n_xfail``, printed as ``2 xfail``), the JSON report and a report made
from record logs count expected failures by :func:`expected_failure`, so their count is pytest's
``2 xfailed`` for the same items.
"""

from __future__ import annotations

from pytest_tooleffect.scoring.record import Record

__all__ = ["decision_passed", "expected_failure"]

_OK_KINDS = ("ok", "ok_no_tool")


def decision_passed(record: Record) -> bool | None:
    """Whether the record's decision passed, as the pytest outcome says.

    Args:
        record: one record.

    Returns:
        ``True`` when its kind is ``ok`` or ``ok_no_tool`` and, for a sandboxed decision, its effect
        passed; ``False`` when it failed; ``None`` for an error record (no verdict).
    """
    if record.outcome != "scored" or record.verdict is None:
        return None
    return record.verdict.kind in _OK_KINDS and (record.effect is None or record.effect.passed)


def expected_failure(record: Record) -> bool:
    """The record's decision failed and pytest counted it as an expected failure (XFAIL).

    A failure is expected when the baseline already knew it (``baseline.status`` ``known``: the
    baseline marked the item ``xfail``) or when the case file marks the case ``xfail`` and the
    failure is neither a ``regression`` nor ``changed`` against a baseline (those fail the run
    whatever ``xfail`` the case has).  A case marked ``xfail`` whose decision passes is XPASS, not
    counted; an error record is an error, never XFAIL.

    Args:
        record: one record.

    Returns:
        Whether pytest's outcome for the item is ``xfailed``.
    """
    if decision_passed(record) is not False:
        return False
    status = record.baseline.status if record.baseline is not None else None
    return status == "known" or (record.xfail and status not in ("regression", "changed"))
