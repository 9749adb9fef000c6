"""The run-level parts of a report, as typed data: what was not scored, the judge, the shards and the run.

Invalid cases (:class:`InvalidFamily`), skipped items (:class:`SkippedItems`) and items that ended
without a record (:class:`UnrecordedItems`), the judge of
free-text fields (:class:`JudgeSection`), the shard a run was or the shards a report merged
(:class:`ShardOf`, :class:`MergedShards`), what the run whose logs were merged selected and which
part of it has no record (:class:`MergedSelection`), and when and how the run was made (:class:`RunInfo`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from pytest_tooleffect.report.parts import Count, Number, Part, is_none

__all__ = [
    "GitState",
    "InvalidCase",
    "InvalidFamily",
    "JudgeCalibration",
    "JudgeSection",
    "JudgeUsage",
    "MergedSelection",
    "MergedShards",
    "RateLimiterFailures",
    "RunInfo",
    "ShortPart",
    "ShardOf",
    "SkippedItems",
    "UnrecordedItems",
    "Versions",
]


class InvalidCase(Part):
    """A case (or a file, a family file, a family's policies) that failed validation and was not run."""

    case_id: str | None
    """The case's id; ``null`` for a problem of the file, the family file or the family's policies."""
    file: str
    """The file the problem is in."""
    problems: list[str]
    """One line per problem, naming the file, the case id and the field."""


class InvalidFamily(Part):
    """A family's invalid cases: collected, never scored, counted here so they cannot vanish."""

    family: str
    """The family (its folder's name when the family file itself is invalid)."""
    count: Count
    """Invalid entries (cases, or a file or family that could not be read)."""
    ids: list[str | None]
    """Their case ids, sorted, ``null`` last for entries that are not one case."""
    cases: list[InvalidCase]
    """Each entry with its problems, in ``ids`` order."""


class SkippedItems(Part):
    """Items of one family × policy that were collected and skipped (nothing to replay, no label, a skip marker)."""

    family: str
    """The family."""
    policy: str
    """The policy."""
    count: Count
    """Items skipped."""
    reasons: dict[str, int]
    """Items per reason, most first."""
    ids: list[str]
    """Their record ids, sorted."""


class UnrecordedItems(Part):
    """Items of one family that were collected and ended with no record: their xdist worker crashed,
    pytest failed them outside the plugin, or the run stopped before them (``-x``, ``--maxfail``,
    xdist's ``--max-worker-restart``, Ctrl-C).
    """

    family: str
    """The family (its folder's name when no record of the family came in)."""
    count: Count
    """Items without a record."""
    reasons: dict[str, int]
    """Items per reason, most first."""
    ids: list[str]
    """Their pytest node ids, sorted."""


class RateLimiterFailures(Part):
    """The run's rate limiter failed (its Redis could not be reached or went away, its state file
    could not be used): decisions it kept from being made, each an error record of type
    ``RateLimiterError``.  Not a provider's failure: no request was sent for them.
    """

    decisions: Count
    """Decisions not made because the limiter failed (each also in its block's ``errors``)."""
    blocks: dict[str, int]
    """Those decisions per ``family / policy``, most first."""
    first: str
    """The message of the first of them in record id order (the backend, its URL without a password
    or its state file, and what failed)."""


class JudgeCalibration(Part):
    """The judge's last measured agreement with hand labels (``tooleffect calibrate-judge``)."""

    n: int | None = None
    """Hand-labelled pairs."""
    agreement: float | None = None
    """Share of pairs where judge and hand label agree."""
    kappa: float | None = None
    """Cohen's kappa."""
    kappa_ci95: list[float] | None = None
    """95 % interval of kappa."""
    measured_at: str | None = None
    """When it was measured."""


class JudgeUsage(Part):
    """What the judge spent over the run (apart from the agent's cost)."""

    calls: Number
    """Judge calls."""
    cached: Number
    """Answers from the judge's cache."""
    input_tokens: Number
    """Prompt tokens."""
    output_tokens: Number
    """Completion tokens."""
    cost_usd: Number | None
    """US dollars; ``null`` when any call is unpriced (or reported no usage)."""
    tokens_unknown: Number = 0
    """Judge calls whose provider reported no usage: their tokens are not in the counts."""
    input_tokens_unknown: Number = 0
    """Judge calls with no prompt token count (no usage included): not in ``input_tokens``."""
    output_tokens_unknown: Number = 0
    """Judge calls with no completion token count (no usage included): not in ``output_tokens``."""


class JudgeSection(Part):
    """The LLM judge of free-text fields (written by :class:`~pytest_tooleffect.report.reporter.JudgeContributor`)."""

    model: str | None
    """The judge's model; ``null`` when there is none."""
    note: str | None = Field(default=None, exclude_if=is_none)
    """Without a judge: what judged free-text fields instead."""
    calibration: JudgeCalibration | str | None = Field(default=None, exclude_if=is_none)
    """With a judge: its calibration, or why there is none."""
    usage: JudgeUsage | None = Field(default=None, exclude_if=is_none)
    """With a judge: what it spent."""


class ShardOf(Part):
    """One shard of a run."""

    index: int
    """The shard, 1…``count``."""
    count: int
    """How many shards the run was split into."""


class MergedShards(Part):
    """The shards whose record logs were merged into one report."""

    count: int
    """How many shards the run was split into (from the records)."""
    merged: list[int]
    """The shards that have records, sorted."""
    missing: list[int]
    """The shards with no record: the report's status is then ``incomplete`` (not listed: a shard whose
    items were all skipped as settled by a sequential gate, counted in ``selection.settled``, and a
    shard that selected no item, in ``empty``)."""
    empty: list[int] = Field(default_factory=list, exclude_if=lambda v: not v)
    """The shards with no record that selected no item (the run's selection less the other shards'
    is 0): nothing of the run is missing with them."""
    logs: list[str]
    """The record logs read, in the order given."""
    duplicates_dropped: int = 0
    """Records left out as repeats of one already read (same id and trial; ``--duplicates``)."""


class ShortPart(Part):
    """A part of the run whose logs hold fewer records than it selected."""

    shard: int | None
    """The shard (``null``: an unsharded run)."""
    selected: Count
    """The case items it selected."""
    recorded: Count
    """Those with a record in the logs merged."""


class MergedSelection(Part):
    """What the run whose record logs ``tooleffect report`` merged selected, as its records say, and
    how much of it the logs hold (absent when the records do not say: logs written before they did).
    """

    collected: Count
    """The case items the run collected, before any was deselected."""
    selected: Count
    """The case items it selected (``-k``, ``-m``, ``--lf`` applied; every shard together)."""
    digest: str
    """SHA-256 (16 hex digits) of their record ids, sorted: the same in every shard's records."""
    recorded: Count
    """The records merged (each item once)."""
    not_recorded: Count
    """Selected items with no record (a missing shard's, a shard's cut short, skipped or invalid ones):
    the report's status is ``incomplete`` when this is not 0, unless all of them are ``settled``."""
    settled: Count = Field(default=0, exclude_if=lambda v: v == 0)
    """Of those, the items skipped as settled by a sequential gate (the baseline's decisions of a block
    whose gate the merged records settle; ``ci/sequential_merged.py``) and the trials adaptive repeats did not
    need (a settled case's items less its records; ``ci/adaptive_merged.py``): no gap."""
    short: list[ShortPart] = Field(default_factory=list)
    """The shards (or the unsharded run) whose logs hold fewer records than they selected; a shard with
    no record at all is in ``shards.missing``."""


class Versions(Part):
    """The versions of the packages the run used, from their installed metadata (never imported to read them)."""

    plugin: str | None
    """pytest-tooleffect."""
    pytest: str | None
    """pytest."""
    litellm: str | None
    """litellm (``null`` when it is not installed)."""
    pytest_xdist: str | None
    """pytest-xdist (``null`` when it is not installed)."""
    python: str
    """The Python interpreter (``3.11.7``)."""


class GitState(Part):
    """The commit a family's folder was checked out at."""

    commit: Annotated[str, Field(pattern=r"^[0-9a-f]{40}$")]
    """``HEAD``'s commit."""
    dirty: bool
    """A tracked file under the folder differed from the commit, or an untracked one was there."""


class RunInfo(Part):
    """When and how the run was made (written by the plugin; absent from ``tooleffect report``)."""

    started_at: str
    """When the session started, ISO 8601 in UTC (``2026-12-01T22:51:00.123Z``)."""
    ended_at: str
    """When the report was made, ISO 8601 in UTC."""
    command: list[str]
    """The arguments pytest was run with (``config.invocation_params.args``)."""
    directory: str
    """The folder pytest was run from."""
    versions: Versions
    """The plugin's, pytest's, litellm's, pytest-xdist's and Python's versions."""
    cases_git: dict[str, GitState]
    """By family, the git commit of its folder; a family whose folder is in no git work tree is absent."""
    policies: dict[str, dict[str, Any]]
    """By policy name, its parameters (model or agent, api base, sampling parameters, overrides, settings);
    never an api key or another secret."""
