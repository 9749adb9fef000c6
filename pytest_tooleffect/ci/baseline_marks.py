"""The records' own ``baseline`` marks as ``tooleffect report`` reads them: one source of truth for
every figure and gate about regressions.

With ``--baseline`` the report compares every record with that baseline and replaces the marks the
records were read with (:meth:`pytest_tooleffect.ci.regressions.BaselineContributor.mark`);
:func:`replaced_line` says so when they said otherwise.  Without it the marks stand for the
comparison the run made, and :func:`own_marks` accepts them only when they are one comparison: every
mark names one baseline (its digest, ``baseline.against``) and says what the record's own verdict
says (a ``passing`` mark on a failed decision was edited, or belongs to another record).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pytest_tooleffect.scoring.outcome import decision_passed
from pytest_tooleffect.scoring.record import BaselineMark, Record
from pytest_tooleffect.util.display import shown

__all__ = ["own_marks", "replaced_line"]

#: the statuses that say the decision passes now, and those that say it fails now
_PASS_NOW = ("passing", "fixed")
_FAIL_NOW = ("regression", "known", "changed")


def own_marks(records: Sequence[Record]) -> tuple[int, str] | None:
    """What the records' own ``baseline`` marks stand for, when no ``--baseline`` recomputes them.

    Args:
        records: the records read from the logs.

    Returns:
        ``None`` when no record has a mark; else ``(status, line)``: ``(2, why)`` when the marks name
        more than one baseline (or some name one and some none: the shards of a run made against two
        baselines, logs of two runs) or a mark contradicts its record's verdict (the first such record
        and field named); ``(0, note)`` when they are one comparison (the note names its baseline's
        digest, or says the marks name none: written before marks did).
    """
    named: Counter[str | None] = Counter()
    for r in records:
        if r.baseline is None:
            continue
        named[r.baseline.against] += 1
        passed = decision_passed(r)
        status = r.baseline.status
        if (status in _PASS_NOW and passed is not True) or (status in _FAIL_NOW and passed is not False):
            now = "an error" if passed is None else "passes" if passed else f"fails ({r.verdict and r.verdict.kind})"
            return 2, shown(f"record {r.id}: baseline.status {status!r} contradicts its own verdict (the decision "
                            f"{now}): the mark was edited or is another record's; give --baseline FILE to compare "
                            "every record with one baseline", limit=None)
    if not named:
        return None
    if len(named) > 1:
        parts = [f"{digest or 'none named'} in {n} record{'s' if n != 1 else ''}"
                 for digest, n in sorted(named.items(), key=lambda kv: (kv[0] is None, kv[0] or ""))]
        return 2, (f"the records' baseline marks were made against {len(named)} baselines ({', '.join(parts)}): "
                   "their regressions are not one comparison; give --baseline FILE to compare every record with one")
    (digest,) = named
    if digest is None:
        return 0, ("regressions and changed from the records' own baseline marks, which name no baseline (written "
                   "before marks did): --baseline FILE compares them with one")
    return 0, (f"regressions and changed from the records' own baseline marks (baseline {digest}); "
               "--baseline FILE compares them with another")


def replaced_line(replaced: Sequence[tuple[BaselineMark, BaselineMark]], path: Path, digest: str) -> str:
    """The line ``tooleffect report --baseline`` says when records were read with marks that say otherwise.

    Args:
        replaced: ``(as read, now)`` for each such record
            (:meth:`~pytest_tooleffect.ci.regressions.BaselineContributor.mark`'s return).
        path: the ``--baseline`` file.
        digest: its digest.

    Returns:
        ``the records' baseline marks are replaced by the comparison with --baseline PATH (DIGEST): N made
        against another baseline (…), K with another status (old → new in M)``, the parts that apply.
    """
    others = sorted({old.against or "none named" for old, _ in replaced if old.against != digest})
    flips = Counter(f"{old.status} → {new.status}" for old, new in replaced if old.status != new.status)
    said = []
    if others:
        n = sum(1 for old, _ in replaced if old.against != digest)
        said.append(f"{n} made against another baseline ({', '.join(others)})")
    if flips:
        said.append(f"{sum(flips.values())} with another status now ("
                    + ", ".join(f"{flip} in {n}" for flip, n in sorted(flips.items())) + ")")
    return shown(f"the records' baseline marks are replaced by the comparison with --baseline {path} ({digest}): "
                 + "; ".join(said or ["they differed in the words of a changed verdict"]), limit=None)
