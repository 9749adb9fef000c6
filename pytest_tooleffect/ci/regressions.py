"""The run-time side of ``--tooleffect-baseline``: a new run's outcomes against an accepted run.

A decision that failed in the baseline is expected to fail (collection adds
``xfail(raises=DecisionFailed, strict=False)``): failing again is ``known`` (XFAIL), passing is
``fixed`` (XPASS, which does not fail the run).  One that passed and fails now is a
``regression``: its :class:`~pytest_tooleffect.outcomes.DecisionFailed` becomes a
:class:`Regression` whose message starts with ``regression:``; no
``xfail(raises=DecisionFailed)`` (a case file's own ``xfail``) covers it.  A known failure
that fails now with another kind (``wrong_reply`` then, ``forbidden`` now) is ``changed``: it
is not hidden as an expected failure, its failure becomes a :class:`Changed` (a failed test,
message ``changed: wrong_reply in the baseline …, forbidden now: …``), which gates count apart
(``max_changed``).  Every record gets
``baseline: {"status": ...}`` on the process that scored it, so ``-n 2`` records say what
``-n 0`` records say.  On the controller the report's ``baseline`` block (:mod:`.comparison`) is
written through the report's section protocol (:mod:`pytest_tooleffect.report.assembly`).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any, Literal

import pytest

from pytest_tooleffect.ci.baseline import Baseline, BaselineDecision, BaselineError, classify, policy_changes
from pytest_tooleffect.ci.comparison import compare, summary_lines
from pytest_tooleffect.collect.items import CaseItem
from pytest_tooleffect.options import OPT_BASELINE
from pytest_tooleffect.outcomes import DecisionFailed
from pytest_tooleffect.report.ci_model import BaselineComparison, BaselineUnreadable
from pytest_tooleffect.report.model import Report
from pytest_tooleffect.scoring.record import BaselineMark, Record
from pytest_tooleffect.settings import settings_key
from pytest_tooleffect.util.display import shown

__all__ = ["BaselineContributor", "BaselinePlugin", "Changed", "Regression"]


class Regression(pytest.fail.Exception):  # type: ignore[name-defined,misc]
    """A decision that passed in the baseline fails now: a test failure (message ``regression: …``).

    Not a :class:`~pytest_tooleffect.outcomes.DecisionFailed`, so no ``xfail(raises=DecisionFailed)``
    (a case file's ``xfail``) turns it into an expected failure.
    """


class Changed(pytest.fail.Exception):  # type: ignore[name-defined,misc]
    """A decision that failed in the baseline fails now with another kind (status ``changed``): a test
    failure (message ``changed: <kind then> in the baseline <file>, <kind now> now: …``), not the
    expected failure the baseline's ``xfail`` mark stands for.

    Not a :class:`~pytest_tooleffect.outcomes.DecisionFailed`, so neither the baseline's nor a case
    file's ``xfail(raises=DecisionFailed)`` turns it into an expected failure.
    """


_before_key = pytest.StashKey[BaselineDecision | None]()
_mark_key = pytest.StashKey[BaselineMark]()


def baseline_mark(status: str, before: BaselineDecision | None, after: BaselineDecision,
                  against: str) -> BaselineMark:
    """A record's ``baseline`` section: the status, for ``changed`` the verdicts before and after in words,
    and the digest of the baseline it was judged against (``against``).
    """
    if status == "changed":
        assert before is not None
        return BaselineMark(status="changed", before=before.describe(), after=after.describe(), against=against)
    return BaselineMark.model_validate({"status": status, "against": against})


class BaselinePlugin:
    """The plugin object of ``--tooleffect-baseline`` (built at configure time, on workers too).

    Each process reads the baseline; collection marks the decisions that failed in it
    ``xfail(raises=DecisionFailed, strict=False)``; each record gets ``baseline: {"status"}``; a
    regression's failure becomes a :class:`Regression`.  On the controller it writes the report's
    ``baseline`` block and prints the regressions and McNemar's p-value.

    Args:
        config: pytest's config (its settings name the baseline file and the changed-label mode).

    Raises:
        pytest.UsageError: the baseline file is missing or malformed (before any test runs).
    """

    section: Literal["baseline"] = "baseline"

    def __init__(self, config: pytest.Config) -> None:
        settings = config.stash[settings_key]
        assert settings.baseline is not None
        self.config = config
        self.path = settings.baseline
        self.changed_labels = settings.baseline_changed_labels
        try:
            self.baseline = Baseline.load(self.path)
        except BaselineError as exc:
            raise pytest.UsageError(f"{OPT_BASELINE} {exc}") from None
        self.comparison: dict[str, Any] | None = None
        #: the policies that are another policy now than in the baseline, said in the summary
        self.policy_notes: list[str] = []

    def pytest_report_header(self) -> str:
        b = self.baseline
        return (f"tooleffect: baseline {self.path} (saved {b.created}, {len(b.decisions)} decisions; changed labels: "
                f"{self.changed_labels})")

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            if not isinstance(item, CaseItem) or item.ref.label_class is None:
                continue
            before = self.baseline.decisions.get(item.record_id)
            item.stash[_before_key] = before
            if before is not None and before.label_hash == item.ref.label_hash \
                    and before.label_class != item.ref.label_class:  # the case's label, by its digest, says otherwise
                raise pytest.UsageError(shown(
                    f"{OPT_BASELINE} {self.path}: decisions.{item.record_id}.class: {before.label_class}, but the case "
                    f"has that label (hash {before.label_hash}) and its class is {item.ref.label_class}: the baseline "
                    "was edited"))
            if before is None or before.outcome == "error" or before.passed:
                continue
            if before.label_hash != item.ref.label_hash and self.changed_labels != "compare":
                continue
            item.add_marker(pytest.mark.xfail(
                reason=shown(f"known failure: {before.describe()} in the baseline {self.path.name}"),  # a file's kind
                raises=DecisionFailed, strict=False))

    def modify_record(self, record: Record, item: pytest.Item) -> None:
        """Write ``record.baseline`` (a :class:`~pytest_tooleffect.scoring.sections.RecordSection`, on the
        process that scored the item).
        """
        if _before_key not in item.stash:
            return
        before = item.stash[_before_key]
        after = BaselineDecision.from_record(record.to_json())
        status = classify(before, after, self.changed_labels)
        record.baseline = item.stash[_mark_key] = baseline_mark(status, before, after, self.baseline.digest)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        try:
            return (yield)
        except DecisionFailed as exc:
            mark = item.stash.get(_mark_key, None)
            if mark is None or mark.status not in ("regression", "changed"):
                raise
            before = item.stash[_before_key]
            assert before is not None
            if mark.status == "changed":
                raise Changed(shown(f"changed: {mark.before} in the baseline {self.path.name}, {mark.after} now: "
                                    f"{exc.msg}", limit=None, lines=True), pytrace=False) from None
            raise Regression(shown(f"regression: {exc.msg} (was {before.describe()} in the baseline {self.path.name})",
                                   limit=None, lines=True), pytrace=False) from None

    def contribute(self, report: Report, records: Sequence[Record]) -> None:
        """Write ``report.baseline`` (a :class:`~pytest_tooleffect.report.assembly.ReportSection`, on the
        controller).
        """
        settings = self.config.stash[settings_key]
        adaptive = settings.repeats if settings.adaptive_repeats else None
        self.comparison = BaselineContributor(self.baseline, self.path, self.changed_labels,
                                              adaptive).write(report, records)
        now = {r.policy: f"{r.policy_identity.spec} ({r.policy_identity.digest})" for r in records
               if r.policy_identity is not None}
        self.policy_notes = policy_changes(self.baseline, now)

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.comparison is None or not self.config.stash[settings_key].summary:
            return
        terminalreporter.write_sep("-", "tooleffect baseline")
        for line in self.policy_notes:
            terminalreporter.write_line(line)
        for line in summary_lines(self.comparison):
            red = line.startswith(("regression", "changed"))
            terminalreporter.write_line(line, red=red, green=line.startswith("fixed"), bold=red)


class BaselineContributor:
    """The report's ``baseline`` section: the run's records against a baseline (a
    :class:`~pytest_tooleffect.report.assembly.ReportSection`).  Used by the plugin and by
    ``tooleffect report --baseline``.

    Args:
        baseline: the baseline, read.
        path: its file (named in the section).
        changed_labels: ``skip`` or ``compare`` decisions whose label changed.
        adaptive: the run's most trials of a case under adaptive repeats (``None``: fixed repeats or
            none, or not known).
    """

    section: Literal["baseline"] = "baseline"

    def __init__(self, baseline: Baseline, path: Path, changed_labels: str = "skip",
                 adaptive: int | None = None) -> None:
        self.baseline, self.path, self.changed_labels, self.adaptive = baseline, path, changed_labels, adaptive

    def mark(self, records: Sequence[Record]) -> list[tuple[BaselineMark, BaselineMark]]:
        """Give every record its ``baseline`` status against this baseline, in place of the mark it was
        read with: the report's ``baseline`` section, its gates, its expected failures and a sequential
        gate judged again all count this one comparison, never a mark a run made against another
        baseline (or an edited one).

        Args:
            records: the records read from the logs.

        Returns:
            ``(as read, now)`` for each record read with a mark that says otherwise (another status, or
            another baseline or none named), in the records' order.
        """
        digest = self.baseline.digest
        replaced: list[tuple[BaselineMark, BaselineMark]] = []
        for record in records:
            after = BaselineDecision.from_record(record.to_json())
            before = self.baseline.decisions.get(record.id)
            mark = baseline_mark(classify(before, after, self.changed_labels), before, after, digest)
            if record.baseline is not None and record.baseline != mark:
                replaced.append((record.baseline, mark))
            record.baseline = mark
        return replaced

    def contribute(self, report: Report, records: Sequence[Record]) -> None:
        """Write ``report.baseline``."""
        self.write(report, records)

    def write(self, report: Report, records: Sequence[Record]) -> dict[str, Any] | None:
        """Write ``report.baseline``.

        Returns:
            The comparison as a JSON object (``path``, ``created``, then :func:`.comparison.compare`'s
            keys), or ``None`` when the records could not be read as a run.
        """
        try:  # read as the record log's lines are, by the baseline's own reader
            after = Baseline.from_records(r.to_json() for r in records)
        except BaselineError as exc:
            report.baseline = BaselineUnreadable(path=str(self.path), error=str(exc))
            return None
        comparison = {"path": str(self.path), "created": self.baseline.created,
                      **compare(self.baseline, after, self.changed_labels, adaptive_after=self.adaptive)}
        report.baseline = BaselineComparison.model_validate(comparison)
        return comparison

