"""The report's CI sections, as typed data: the run against its baseline and the gates judged.

:class:`BaselineSection` is the report's ``baseline`` (written when the run had
``--tooleffect-baseline``: the comparison of :func:`pytest_tooleffect.ci.comparison.compare`, or
why the run's records could not be read as a baseline), :class:`GatesSection` its ``gates``
(written when gates in ``[tool.tooleffect.gates]`` judged the run).  The comparison and the
gates are computed in :mod:`pytest_tooleffect.ci`; these models only say what they look like.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from pytest_tooleffect.report.parts import Count, Part, is_none

__all__ = [
    "BaselineBlock",
    "BaselineComparison",
    "BaselineRate",
    "BaselineSection",
    "BaselineTotals",
    "BaselineUnreadable",
    "BeforeAfter",
    "ClassPairs",
    "FingerprintPair",
    "Flip",
    "GateCounts",
    "GateErrors",
    "GateResultEntry",
    "GatesApplied",
    "GatesNotApplied",
    "GatesSection",
    "McNemar",
    "PolicyMismatch",
    "RepeatsMismatch",
]


class BaselineRate(Part):
    """One side's rate on the paired decisions."""

    correct: Count
    """Paired decisions right at the level."""
    n: Count
    """Paired decisions judged at the level."""
    rate_pct: float | None
    """``correct / n`` as a percentage; ``null`` for no decision."""
    display: str
    """``rate_pct`` rounded half up to one digit, ``–`` for no decision."""


class BeforeAfter(Part):
    """A level's rate in the baseline and in this run, on the same paired decisions."""

    before: BaselineRate
    """In the baseline."""
    after: BaselineRate
    """In this run."""


class ClassPairs(Part):
    """The paired decisions of one class (or of ``all``) at each level."""

    n: Count
    """Paired decisions."""
    name: BeforeAfter
    """At the name level."""
    name_args: BeforeAfter
    """At the name + arguments level."""
    effect: BeforeAfter | None = Field(default=None, exclude_if=is_none)
    """At the effect level, over the pairs judged on it; absent when none was."""


class Flip(Part):
    """A decision whose verdict flipped between the baseline and this run."""

    model_config = ConfigDict(validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)

    id: str
    """The record id."""
    label_class: str = Field(alias="class")
    """The label's class in this run."""
    before: str
    """The baseline's verdict, in words."""
    after: str
    """This run's verdict, in words."""
    error: bool | None = Field(default=None, exclude_if=is_none)
    """``true``: a regression because this run's outcome is an error where the baseline passed
    (``tooleffect compare``, its default ``--errors regression``); absent otherwise."""


class McNemar(Part):
    """Exact McNemar test on the paired pass/fail of one family × policy."""

    table: list[list[int]]
    """``[[both pass, pass→fail], [fail→pass, both fail]]``."""
    b: Count
    """Passed before, fails now."""
    c: Count
    """Failed before, passes now."""
    p_value: float
    """Two-sided p-value in [0, 1]."""
    test: str
    """The test's name and source."""


class FingerprintPair(Part):
    """The label-set fingerprint of a family × policy on each side (``null``: the side has no decision)."""

    before: str | None
    """In the baseline."""
    after: str | None
    """In this run."""


class BaselineBlock(Part):
    """One family × policy of either side, compared decision by decision."""

    family: str
    """The family."""
    policy: str
    """The policy."""
    label_set_fingerprint: FingerprintPair
    """The label-set fingerprints before and after."""
    same_label_set: bool
    """Both sides have the family × policy, with the same fingerprint."""
    compared: Count
    """Paired decisions."""
    classes: dict[str, ClassPairs]
    """Per class, then ``all``."""
    regressions: list[Flip]
    """Passed in the baseline, fail now."""
    fixes: list[Flip]
    """Failed in the baseline, pass now."""
    changed: list[Flip] = Field(default_factory=list)
    """Failed in the baseline, fail now with another kind (status ``changed``; not among ``known``)."""
    known: Count
    """Failed in both, the same way."""
    passing: Count
    """Passed in both."""
    new: Count
    """Decisions of this run the baseline does not have."""
    left_out: dict[str, int]
    """Decisions not compared, by reason (the comparison's ``left_out_reasons``)."""
    label_changed_ids: list[str]
    """Record ids left out because their label changed."""
    label_changed_compared: Count
    """Pairs compared although their label changed (``--tooleffect-baseline-changed-labels compare``)."""
    mcnemar: McNemar
    """The exact McNemar test on the pairs."""
    errors_after_pass: Count | None = Field(default=None, exclude_if=is_none)
    """Of the regressions, the decisions that passed in the baseline and are errors now (outside the
    paired rates and McNemar's table); present when errors count as regressions."""


class BaselineTotals(Part):
    """The counts of every block summed (rates are never pooled across families)."""

    compared: Count
    """Paired decisions."""
    regressions: Count
    """Regressions."""
    fixes: Count
    """Fixes."""
    changed: Count = 0
    """Known failures whose kind changed."""
    known: Count
    """Known failures (the same kind in both)."""
    passing: Count
    """Passing in both."""
    new: Count
    """New decisions."""
    left_out: dict[str, int]
    """Decisions not compared, by reason."""
    errors_after_pass: Count | None = Field(default=None, exclude_if=is_none)
    """Regressions that are errors now where the baseline passed (present when they count)."""


class PolicyMismatch(Part):
    """A family both sides hold under different policy names: the decisions of a policy only one side
    ran pair with nothing (record ids name the policy).
    """

    family: str
    """The family."""
    baseline_policies: list[str]
    """The policies the baseline holds for it, sorted."""
    run_policies: list[str]
    """The policies this run ran for it, sorted."""
    compared: Count
    """Decisions of the family compared all the same (of the policies both sides ran)."""
    line: str
    """In words: ``family F: the baseline holds policy A; this run ran B: no decision compared (…)``."""


class RepeatsMismatch(Part):
    """A family × policy one side ran under ``--tooleffect-repeats`` and the other did not: record ids
    under repeats name the trial, so no decision of one side pairs with one of the other.
    """

    family: str
    """The family."""
    policy: str
    """The policy."""
    baseline_trials: Count
    """The baseline's most trials of a case (1 without repeats)."""
    run_trials: Count
    """This run's most trials of a case (1 without repeats; under adaptive repeats the most it could run)."""
    run_adaptive: bool
    """This run ran adaptive repeats (``--tooleffect-repeats adaptive``)."""
    compared: Count
    """Decisions of the block compared all the same."""
    line: str
    """In words: ``family F, policy P: the baseline holds 1 trial per case; this run ran up to 29 (adaptive): …``."""


class BaselineComparison(Part):
    """The run against its baseline (``--tooleffect-baseline``)."""

    path: str
    """The baseline file."""
    created: str
    """When the baseline was saved (ISO 8601, UTC)."""
    changed_labels: Literal["skip", "compare"]
    """What was done with decisions whose label changed (``--tooleffect-baseline-changed-labels``)."""
    left_out_reasons: dict[str, str]
    """What each ``left_out`` reason means."""
    blocks: list[BaselineBlock]
    """One per family × policy of either side, sorted."""
    totals: BaselineTotals
    """The blocks' counts summed."""
    policy_mismatches: list[PolicyMismatch] = Field(default_factory=list)
    """The families whose policy names differ between the baseline and this run (why their decisions
    are ``new`` and ``not_in_after`` rather than compared); empty when none does."""
    repeats_mismatches: list[RepeatsMismatch] = Field(default_factory=list)
    """The family × policy blocks one side ran under repeats and the other did not (why their decisions
    are ``new`` and ``not_in_after`` rather than compared); empty when none does."""


class BaselineUnreadable(Part):
    """A run whose records could not be read as a baseline: nothing was compared."""

    path: str
    """The baseline file."""
    error: str
    """Why the run's records could not be compared."""


BaselineSection = BaselineComparison | BaselineUnreadable
"""The report's ``baseline``: the comparison, or why there is none."""


class GateCounts(Part):
    """Gate results by status."""

    passed: Count
    """Gates passed."""
    failed: Count
    """Gates failed."""
    not_judged: Count
    """Gates that could not be judged (too few rows, no baseline, an unknown cost)."""
    not_applicable: Count = 0
    """Gates on a class, policy or family this run did not select (``-m``, ``-k``, a subset of the
    policies): neither passed nor failed."""


class GateErrors(Part):
    """What failed the run whatever the gates say, by kind."""

    decision_failures: Count
    """Failed items whose record is a scored decision (the gates judge these)."""
    error_records: Count
    """Failed items whose record is an error."""
    other_failures: Count
    """Every other failed report."""
    collection_errors: Count
    """Failed collection reports."""
    total: Count
    """``error_records + other_failures + collection_errors``."""


class GateResultEntry(Part):
    """One gate's verdict on one family × policy."""

    family: str
    """The family (``*`` in a key that matched no block)."""
    policy: str
    """The policy."""
    gate: str
    """What is judged, e.g. ``no_tool name`` or ``forbidden``."""
    op: Literal[">=", "<=", "at alpha"]
    """``>=`` (a floor), ``<=`` (a ceiling) or ``at alpha`` (a sequential gate, at its level)."""
    threshold: float
    """The floor (percent), the ceiling (decisions, USD or percentage points), or a sequential gate's alpha."""
    unit: Literal["%", "", "USD", "alpha", "pts"]
    """``%``, ``""`` (a count), ``USD``, ``alpha`` (a sequential gate) or ``pts`` (percentage points: a
    perturbation's drop)."""
    bound: Literal["point", "wilson"] | None
    """``point`` or ``wilson`` for a class rate; ``null`` otherwise."""
    status: Literal["passed", "failed", "not_judged", "not_applicable"]
    """The verdict (``not_applicable``: the gate's class, policy or family was not selected by this run)."""
    fails_run: bool
    """A failed gate, or a NOT JUDGED one under ``unjudged = "fail"`` (never a not applicable one)."""
    value: float | None
    """The judged value (percent, count or USD); ``null`` when not judged."""
    n: int | None
    """The rows behind the value."""
    detail: str
    """The parenthesised part of the line."""
    ids: list[str] | None
    """Record ids behind a count gate (regressions, changed known failures, decisions of a kind), sorted;
    ``null`` for a rate or a cost."""
    line: str
    """The terminal line."""


class GatesApplied(Part):
    """The gates judged on the run, and the exit status they decided."""

    applied: Literal[True]
    """The gates decided the exit status."""
    source: str
    """Where the gates were read: ``PATH [tool.tooleffect.gates]``."""
    passed: bool
    """No gate failed the run, and some gate was judged (or the gates let a run that judged nothing
    through with ``unjudged = "pass"``)."""
    counts: GateCounts
    """Results by status."""
    errors: GateErrors
    """What failed the run whatever the gates say."""
    exit_status: int
    """The session's exit status."""
    exit_reason: str
    """Why, in one line."""
    unmatched_tables: list[str]
    """Tables with a wildcard that matched no family × policy of the run (``FAMILY/POLICY``)."""
    filtered: str | None = None
    """What left case items out of the run (the gates judged the rest), with the filter as given:
    ``-k "not nt-read": 2 of 13 case items not selected``; ``null`` when the run selected every case
    item it collected (or the gates were judged on record logs)."""
    results: list[GateResultEntry]
    """Every gate's result, block by block."""


class GatesNotApplied(Part):
    """Gates are configured, and the run made no decision for them to judge (the Markdown summary only)."""

    applied: Literal[False]
    """The gates did not decide the exit status."""
    note: str
    """Why."""


GatesSection = GatesApplied | GatesNotApplied
"""The report's ``gates``: the gates judged, or why they were not."""
