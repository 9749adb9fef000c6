"""The report's ``needless_calls`` section: a hinted family's no-tool class graded by the MCP hints
of what its failures called (the records' ``no_tool_severity``).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from pytest_tooleffect.report.arithmetic import exact_pct, percent
from pytest_tooleffect.report.model import NeedlessCalls
from pytest_tooleffect.report.rows import Row

__all__ = ["needless_calls"]


def needless_calls(rows: Sequence[Row]) -> NeedlessCalls | None:
    """The section for one block's scored rows, or ``None`` when none carries a severity.

    Returns:
        Counts of failed no-tool rows by the most severe hint class called (``no_call`` for those
        that called none), the mean severity, and the weighted rate ``100 × (1 − mean severity)``
        (computed on exact fractions of the records' severities, displayed half up).
    """
    graded = [r.no_tool_severity for r in rows if r.no_tool_severity is not None]
    if not graded:
        return None
    failed = [g for g in graded if g.severity > 0]
    mean = sum((Fraction(g.severity) for g in graded), Fraction(0)) / len(graded)
    return NeedlessCalls(n=len(graded), read=sum(1 for g in failed if g.called == "read"),
                         write=sum(1 for g in failed if g.called == "write"),
                         destructive=sum(1 for g in failed if g.called == "destructive"),
                         no_call=sum(1 for g in failed if g.called is None), mean_severity=float(mean),
                         weighted_pct=exact_pct(1 - mean), weighted_display=percent(1 - mean))
