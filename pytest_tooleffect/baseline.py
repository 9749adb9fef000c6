"""Baselines: the per-decision verdicts of an accepted run, a new run's outcomes classified
against them, and the comparison of two runs.

One job in three parts (``docs/design.md``, words "record", "record id", "report"):

* **The file** (:class:`Baseline`, versioned JSON): per record id whether the decision passed (the
  verdict's kind is ``ok``/``ok_no_tool`` and, when the record has an effect, the effect passed:
  the same pass/fail as the pytest outcome), its kind, its label hash and class; per family ×
  policy the label-set fingerprint, computed as the report computes it
  (:func:`pytest_tooleffect.report.fingerprint` over the ``(case_id, label_hash)`` of every record
  of the block, errors included) and the policy.  An error outcome is no verdict: it is stored as
  an error and never compared.
* **Classification** (:func:`classify`, :class:`BaselinePlugin`, under ``--tooleffect-baseline``):
  a decision that failed in the baseline is expected to fail (collection adds
  ``xfail(raises=DecisionFailed, strict=False)``): failing again is ``known`` (XFAIL), passing is
  ``fixed`` (XPASS, which does not fail the run).  One that passed and fails now is a
  ``regression``: its :class:`~pytest_tooleffect.outcomes.DecisionFailed` becomes a
  :class:`Regression` whose message starts with ``regression:``; no
  ``xfail(raises=DecisionFailed)`` (a case file's own ``xfail``) covers it.  Every record gets
  ``baseline: {"status": ...}`` on the process that scored it, so ``-n 2`` records say what
  ``-n 0`` records say.
* **Comparison** (:func:`compare`): per family × policy × class the rates before and after at
  each level on the paired decisions, the decisions that flipped (both ways), known failures, new
  and left-out decisions with the reason, and an exact McNemar test on the pairs
  (:func:`mcnemar_exact`).  The report's ``baseline`` block and ``tooleffect compare`` print it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Generator, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any, Final, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .cases import label_hash
from .collect import CaseItem
from .options import OPT_BASELINE, settings_key
from .outcomes import DecisionFailed
from .records import record_id
from .report import fingerprint, percent

__all__ = [
    "BASELINE_KIND",
    "BASELINE_VERSION",
    "CHANGED_LABELS",
    "LEFT_OUT",
    "LEVELS",
    "STATUSES",
    "Baseline",
    "BaselineError",
    "BaselineGroup",
    "BaselinePlugin",
    "Decision",
    "Regression",
    "classify",
    "compare",
    "fingerprint_mismatches",
    "load_runs",
    "mcnemar_exact",
    "record_passed",
    "render_comparison",
    "summary_lines",
]

BASELINE_VERSION: Final = 1
BASELINE_KIND: Final = "tooleffect-baseline"
#: A decision's status against the baseline (the record's ``baseline.status``).
STATUSES = ("regression", "known", "fixed", "passing", "new", "label_changed", "not_compared")
#: ``--tooleffect-baseline-changed-labels``: leave out (``skip``) or ``compare`` decisions whose label changed.
CHANGED_LABELS = ("skip", "compare")
#: The levels a rate counts as correct (``docs/design.md``, words): names, names and arguments, the world's end state.
LEVELS = ("name", "name_args", "effect")
#: Why a decision of either side is not in the paired comparison.
LEFT_OUT = {
    "label_changed": "the label changed since the baseline (compared only with --tooleffect-baseline-changed-labels "
                     "compare)",
    "error_before": "an error outcome in the baseline: no verdict to compare",
    "error_after": "an error outcome now: no verdict to compare",
    "not_in_after": "in the baseline, not in this run (deselected, skipped, or no longer a case)",
}
CLASSES = ("single", "several", "no_tool")
_OK_KINDS = ("ok", "ok_no_tool")


class BaselineError(ValueError):
    """A baseline file or record that cannot be used: names the file and the field.

    Args:
        path: the file (or ``None`` for records held in memory).
        field: where in it (``decisions.demo/a[replay].passed``, ``record 3``, ``version``).
        message: what is wrong.
    """

    def __init__(self, path: Path | str | None, field: str, message: str) -> None:
        self.path = None if path is None else str(path)
        self.field = field
        self.message = message
        super().__init__(f"{self.path + ': ' if self.path else ''}{field}: {message}")


# ----------------------------------------------------------------------------------- the file


class Decision(BaseModel):
    """One decision of a run, as the baseline keeps it (the record's verdict reduced to pass/fail).

    Attributes:
        family: the family's name.
        policy: the policy's name.
        case_id: the case's id.
        trial: 1…K under ``--tooleffect-repeats K``.
        outcome: ``scored`` (a verdict) or ``error`` (provider, agent, sandbox or oracle: no verdict).
        passed: the pytest outcome's pass/fail (kind ``ok``/``ok_no_tool``, and the effect when
            judged); ``None`` for an error.
        kind: the verdict's kind; ``None`` for an error.
        error: the error's type for an error outcome, else ``None``.
        label_hash: the label's hash (:func:`pytest_tooleffect.cases.label_hash`).
        label_class: the label's class (``class`` in JSON).
        name_ok: the ``name`` level; ``None`` for an error.
        name_args_ok: the ``name_args`` level; ``None`` for an error.
        effect_ok: the ``effect`` level; ``None`` for an error or a record with no effect.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    family: str = Field(min_length=1)
    policy: str = Field(min_length=1)
    case_id: str = Field(min_length=1)
    trial: int = Field(default=1, ge=1)
    outcome: Literal["scored", "error"]
    passed: bool | None
    kind: str | None = None
    error: str | None = None
    label_hash: str = Field(min_length=1)
    label_class: Literal["single", "several", "no_tool"] = Field(alias="class")
    name_ok: bool | None = None
    name_args_ok: bool | None = None
    effect_ok: bool | None = None

    @model_validator(mode="after")
    def _verdict_or_error(self) -> Decision:
        if self.outcome == "scored":
            missing = [k for k in ("passed", "kind", "name_ok", "name_args_ok") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"a scored decision needs {', '.join(missing)}")
        elif self.passed is not None:
            raise ValueError("an error outcome is no verdict: passed must be null")
        return self

    def level(self, level: str) -> bool | None:
        """The decision at ``level`` (``name``, ``name_args`` or ``effect``); ``None`` when not judged."""
        return {"name": self.name_ok, "name_args": self.name_args_ok, "effect": self.effect_ok}[level]

    def describe(self) -> str:
        """``ok``, the failing kind (with ``effect <kind>`` when only the effect failed), or ``error <type>``."""
        if self.outcome == "error":
            return f"error {self.error}"
        if self.kind in _OK_KINDS and self.effect_ok is False:
            return f"{self.kind}, effect failed"
        return str(self.kind)

    @classmethod
    def from_record(cls, record: Mapping[str, Any], where: str = "record") -> Decision:
        """The decision a record states.

        Args:
            record: one record (``pytest_tooleffect.records``; ``verdict`` with ``kind``,
                ``name_ok``, ``name_args_ok``; ``effect`` with ``passed`` for a world case).
            where: how error messages name the record (``record 3``).

        Returns:
            The decision.

        Raises:
            BaselineError: a field the decision needs is missing or of the wrong type (no path).
        """
        if not isinstance(record, Mapping):
            raise BaselineError(None, where, f"a record is a JSON object, got {type(record).__name__}")
        need = ("id", "family", "policy", "case_id", "outcome", "class", "label_hash")
        missing = [k for k in need if k not in record]
        if missing:
            raise BaselineError(None, where, f"not a tooleffect record (missing {', '.join(missing)})")
        outcome = record["outcome"]
        data: dict[str, Any] = {k: record[k] for k in ("family", "policy", "case_id", "outcome", "class",
                                                       "label_hash")}
        data["trial"] = record.get("trial") or 1
        if outcome == "scored":
            v = record.get("verdict")
            if not isinstance(v, Mapping) or any(k not in v for k in ("kind", "name_ok", "name_args_ok")):
                raise BaselineError(None, f"{where}.verdict", "a scored record needs a verdict with kind, name_ok "
                                                              "and name_args_ok")
            effect = record.get("effect")
            if effect is not None and not (isinstance(effect, Mapping) and isinstance(effect.get("passed"), bool)):
                raise BaselineError(None, f"{where}.effect", "an effect needs passed (true or false)")
            data.update(kind=v["kind"], name_ok=v["name_ok"], name_args_ok=v["name_args_ok"],
                        effect_ok=None if effect is None else effect["passed"], passed=record_passed(record))
        else:
            err = record.get("error")
            data.update(passed=None, error=str(err.get("type")) if isinstance(err, Mapping) else "error")
        try:
            decision = cls.model_validate(data)
        except ValidationError as exc:
            e = exc.errors()[0]
            raise BaselineError(None, f"{where}.{_loc(e['loc'])}".rstrip("."), e["msg"]) from None
        if record["id"] not in decision.record_ids():
            raise BaselineError(None, f"{where}.id", f"{record['id']!r} is not the record id of its family, case, "
                                                     f"policy and trial ({' or '.join(decision.record_ids())})")
        return decision

    def record_ids(self) -> tuple[str, ...]:
        """The record ids this decision can have: ``family/case[policy]`` (trial 1 of an unrepeated run)
        and ``family/case[policy:trial]`` (under ``--tooleffect-repeats``).
        """
        repeated = record_id(self.family, self.case_id, self.policy, self.trial, repeats=2)
        return (record_id(self.family, self.case_id, self.policy), repeated) if self.trial == 1 else (repeated,)


class BaselineGroup(BaseModel):
    """One family × policy of the baseline.

    Attributes:
        family: the family's name.
        policy: the policy's name.
        models: the litellm models its records name (empty for replay and agent policies).
        label_set_fingerprint: the report's label-set fingerprint of the block (16 hex digits).
        decisions: records of the block (errors included).
        errors: of which error outcomes.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    family: str = Field(min_length=1)
    policy: str = Field(min_length=1)
    models: list[str] = Field(default_factory=list)
    label_set_fingerprint: str = Field(pattern=r"^[0-9a-f]{16}$")
    decisions: int = Field(ge=0)
    errors: int = Field(ge=0)


class Baseline(BaseModel):
    """The per-decision verdicts of an accepted run (the baseline file, JSON, ``version`` 1).

    Attributes:
        kind: always ``tooleffect-baseline`` (tells a baseline from a record log or a report).
        version: the file format's version.
        created: when it was saved (ISO 8601, UTC).
        source: the record log it was saved from, if any.
        groups: one per family × policy, sorted.
        decisions: by record id (``family/case[policy]`` or ``family/case[policy:trial]``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["tooleffect-baseline"] = BASELINE_KIND
    version: Literal[1] = BASELINE_VERSION
    created: str
    source: str | None = None
    groups: list[BaselineGroup]
    decisions: dict[str, Decision]

    @model_validator(mode="after")
    def _consistent(self) -> Baseline:
        groups = {(g.family, g.policy) for g in self.groups}
        if len(groups) != len(self.groups):
            raise ValueError("groups: a family × policy is listed twice")
        for rid, d in self.decisions.items():
            if rid not in d.record_ids():
                raise ValueError(f"decisions.{rid}: the key is not the record id of its family, case, policy and "
                                 "trial")
            if (d.family, d.policy) not in groups:
                raise ValueError(f"decisions.{rid}: no group for family {d.family!r}, policy {d.policy!r}")
        return self

    def group(self, family: str, policy: str) -> BaselineGroup | None:
        """The family × policy's group, or ``None``."""
        return next((g for g in self.groups if (g.family, g.policy) == (family, policy)), None)

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]], source: str | None = None,
                     created: str | None = None) -> Baseline:
        """The baseline of a run's records.

        Args:
            records: the run's records (a record log's lines), one per decision.
            source: where they came from (the record log's path), kept in the file.
            created: ISO time of saving (default now, UTC).

        Returns:
            The baseline.

        Raises:
            BaselineError: a record is malformed or two records share an id (names the record).
        """
        decisions: dict[str, Decision] = {}
        pairs: dict[tuple[str, str], list[tuple[str, str]]] = {}
        models: dict[tuple[str, str], set[str]] = {}
        for n, rec in enumerate(records, 1):
            try:
                d = Decision.from_record(rec, f"record {n}")
            except BaselineError as exc:
                raise BaselineError(source, exc.field, exc.message) from None
            rid = str(rec["id"])
            if rid in decisions:
                raise BaselineError(source, f"record {n}.id", f"{rid!r} appears twice: one run's records hold each "
                                                              "decision once")
            decisions[rid] = d
            key = (d.family, d.policy)
            pairs.setdefault(key, []).append((d.case_id, d.label_hash))
            if rec.get("model"):
                models.setdefault(key, set()).add(str(rec["model"]))
        groups = []
        for (family, policy), labels in sorted(pairs.items()):
            block = [d for d in decisions.values() if (d.family, d.policy) == (family, policy)]
            groups.append(BaselineGroup(family=family, policy=policy, models=sorted(models.get((family, policy), ())),
                                        label_set_fingerprint=fingerprint(labels), decisions=len(block),
                                        errors=sum(1 for d in block if d.outcome == "error")))
        return cls(created=created or datetime.now(UTC).isoformat(timespec="seconds"), source=source,
                   groups=groups, decisions=dict(sorted(decisions.items())))

    @classmethod
    def load(cls, path: Path) -> Baseline:
        """Read a baseline file.

        Raises:
            BaselineError: the file is missing, not JSON, not a baseline, of another version, or a
                field is invalid (names the file and the field).
        """
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise BaselineError(path, "<file>", f"cannot be read ({exc.strerror or exc})") from None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BaselineError(path, "<file>", f"not JSON ({exc.msg}, line {exc.lineno})") from None
        return cls.from_json(data, path)

    @classmethod
    def from_json(cls, data: Any, path: Path | str | None = None) -> Baseline:
        """Validate a parsed baseline file.

        Raises:
            BaselineError: as :meth:`load`.
        """
        if not isinstance(data, dict):
            raise BaselineError(path, "<file>", f"a baseline is a JSON object, got {type(data).__name__}")
        if data.get("kind") != BASELINE_KIND:
            what = ("a JSON report (it has no per-decision verdicts: save a baseline from its record log)"
                    if "blocks" in data else f"kind {data.get('kind')!r}")
            raise BaselineError(path, "kind", f"not a tooleffect baseline: {what}; save one with `tooleffect "
                                              "baseline save RECORDS`")
        if data.get("version") != BASELINE_VERSION:
            raise BaselineError(path, "version", f"this plugin reads version {BASELINE_VERSION}, the file is "
                                                 f"{data.get('version')!r}")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            e = exc.errors()[0]
            loc, msg = _loc(e["loc"]), e["msg"].removeprefix("Value error, ")
            if not loc and ": " in msg and msg.split(": ", 1)[0].startswith(("decisions.", "groups")):
                loc, msg = msg.split(": ", 1)
            raise BaselineError(path, loc or "<file>", msg) from None

    def dumps(self) -> str:
        """The file's text (indented JSON, keys in field order)."""
        return json.dumps(self.model_dump(mode="json", by_alias=True), indent=1, ensure_ascii=False) + "\n"


def _loc(loc: Sequence[Any]) -> str:
    return ".".join(str(p) for p in loc)


def record_passed(record: Mapping[str, Any]) -> bool | None:
    """Whether a record's decision passed, as the pytest outcome says: the verdict's kind is ``ok`` or
    ``ok_no_tool`` and, when the record has an effect, the effect passed.  ``None`` for an error.
    """
    if record.get("outcome") != "scored":
        return None
    effect = record.get("effect")
    return bool(record["verdict"]["kind"] in _OK_KINDS and (effect is None or effect["passed"]))


# --------------------------------------------------------------------------- classification


def classify(before: Decision | None, after: Decision, changed_labels: str = "skip") -> str:
    """A decision's status against the baseline (one of :data:`STATUSES`).

    Args:
        before: its decision in the baseline (same record id), or ``None``.
        after: its decision now.
        changed_labels: ``skip`` (a decision whose label hash changed is ``label_changed``, not
            compared) or ``compare``.

    Returns:
        ``new`` (not in the baseline), ``not_compared`` (an error on either side),
        ``label_changed``, else ``passing`` / ``regression`` (passed before) or ``fixed`` /
        ``known`` (failed before).
    """
    if before is None:
        return "new"
    if before.outcome == "error" or after.outcome == "error":
        return "not_compared"
    if before.label_hash != after.label_hash and changed_labels != "compare":
        return "label_changed"
    if before.passed:
        return "passing" if after.passed else "regression"
    return "fixed" if after.passed else "known"


class Regression(pytest.fail.Exception):  # type: ignore[name-defined,misc]
    """A decision that passed in the baseline fails now: a test failure (message ``regression: …``).

    Not a :class:`~pytest_tooleffect.outcomes.DecisionFailed`, so no ``xfail(raises=DecisionFailed)``
    (a case file's ``xfail``) turns it into an expected failure.
    """


_before_key = pytest.StashKey[Decision | None]()
_status_key = pytest.StashKey[str]()


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

    def pytest_report_header(self) -> str:
        b = self.baseline
        return (f"tooleffect: baseline {self.path} (saved {b.created}, {len(b.decisions)} decisions; changed labels: "
                f"{self.changed_labels})")

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            if not isinstance(item, CaseItem) or item.case.label is None:
                continue
            before = self.baseline.decisions.get(item.record_id)
            item.stash[_before_key] = before
            if before is None or before.outcome == "error" or before.passed:
                continue
            if before.label_hash != label_hash(item.case.label) and self.changed_labels != "compare":
                continue
            item.add_marker(pytest.mark.xfail(
                reason=f"known failure: {before.describe()} in the baseline {self.path.name}",
                raises=DecisionFailed, strict=False))

    def pytest_tooleffect_modify_record(self, record: dict[str, Any], item: pytest.Item) -> None:
        if _before_key not in item.stash:
            return
        status = classify(item.stash[_before_key], Decision.from_record(record), self.changed_labels)
        record["baseline"] = {"status": status}
        item.stash[_status_key] = status

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        try:
            return (yield)
        except DecisionFailed as exc:
            if item.stash.get(_status_key, None) != "regression":
                raise
            before = item.stash[_before_key]
            assert before is not None
            raise Regression(f"regression: {exc.msg} (was {before.describe()} in the baseline {self.path.name})",
                             pytrace=False) from None

    def pytest_tooleffect_modifyreport(self, report: dict[str, Any], records: list[dict[str, Any]]) -> None:
        try:
            after = Baseline.from_records(records)
        except BaselineError as exc:
            report["baseline"] = {"path": str(self.path), "error": str(exc)}
            return
        comparison = compare(self.baseline, after, self.changed_labels)
        self.comparison = report["baseline"] = {"path": str(self.path), "created": self.baseline.created,
                                                **comparison}

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.comparison is None:
            return
        terminalreporter.write_sep("-", "tooleffect baseline")
        for line in summary_lines(self.comparison):
            red = line.startswith("regression")
            terminalreporter.write_line(line, red=red, green=line.startswith("fixed"), bold=red)


# ------------------------------------------------------------------------------- comparison


def mcnemar_exact(table: Sequence[Sequence[int]]) -> float:
    """Two-sided p-value of McNemar's test in its exact (binomial) form.

    McNemar, "Note on the sampling error of the difference between correlated proportions or
    percentages", Psychometrika 12(2), 153-157 (1947).  Of the paired decisions, ``b`` passed
    before and fail now and ``c`` failed before and pass now; under the null hypothesis (the same
    pass rate before and after) each discordant pair goes either way with probability 1/2, so
    ``min(b, c) ~ Binomial(b + c, 1/2)`` and ``p = min(1, 2 P[X <= min(b, c)])`` (``p = 1`` when
    ``b + c = 0``).  Computed by :func:`statsmodels.stats.contingency_tables.mcnemar` with
    ``exact=True``.

    Args:
        table: ``[[both pass, pass→fail], [fail→pass, both fail]]``, counts of decisions (rows:
            before; columns: after).

    Returns:
        The p-value in [0, 1].
    """
    from statsmodels.stats.contingency_tables import mcnemar

    return float(mcnemar([list(row) for row in table], exact=True).pvalue)


def _rate(correct: int, n: int) -> dict[str, Any]:
    r = Fraction(correct, n) if n else None
    return {"correct": correct, "n": n, "rate_pct": None if r is None else float(r * 100), "display": percent(r)}


def _rates(pairs: Sequence[tuple[Decision, Decision]]) -> dict[str, Any]:
    """Before and after at each level on paired decisions (``effect`` only over pairs judged on it)."""
    out: dict[str, Any] = {"n": len(pairs)}
    for level in LEVELS:
        judged = [(b, a) for b, a in pairs if b.level(level) is not None and a.level(level) is not None]
        if level == "effect" and not judged:
            continue
        out[level] = {"before": _rate(sum(1 for b, _ in judged if b.level(level)), len(judged)),
                      "after": _rate(sum(1 for _, a in judged if a.level(level)), len(judged))}
    return out


def _flip(rid: str, before: Decision, after: Decision) -> dict[str, Any]:
    return {"id": rid, "class": after.label_class, "before": before.describe(), "after": after.describe()}


def compare(before: Baseline, after: Baseline, changed_labels: str = "skip") -> dict[str, Any]:
    """Compare two runs' decisions, paired by record id, per family × policy.

    Args:
        before: the baseline (or an earlier run read as one).
        after: the new run.
        changed_labels: ``skip`` leaves out decisions whose label hash changed; ``compare`` pairs them.

    Returns:
        ``{"changed_labels", "blocks": [...], "totals": {...}}``.  A block per family × policy of
        either side: ``label_set_fingerprint`` ``{before, after}`` and ``same_label_set``;
        ``compared`` (paired decisions); ``classes`` (per class, and ``all``: ``n`` and per level
        ``{before, after}`` rates on the paired decisions: ``correct``, ``n``, ``rate_pct``,
        ``display``); ``regressions`` and ``fixes`` (``{id, class, before, after}``); ``known``,
        ``passing``, ``new`` counts; ``left_out`` counts by reason (:data:`LEFT_OUT`) and
        ``label_changed_ids``; ``label_changed_compared``; ``mcnemar`` (``table``, ``b``, ``c``,
        ``p_value``, ``test``).  ``totals`` sums the counts (rates are never pooled across
        families).
    """
    keys = sorted({(g.family, g.policy) for g in (*before.groups, *after.groups)})
    blocks: list[dict[str, Any]] = []
    for family, policy in keys:
        b_grp, a_grp = before.group(family, policy), after.group(family, policy)
        b_dec = {k: d for k, d in before.decisions.items() if (d.family, d.policy) == (family, policy)}
        a_dec = {k: d for k, d in after.decisions.items() if (d.family, d.policy) == (family, policy)}
        statuses: Counter[str] = Counter()
        left_out: Counter[str] = Counter({k: 0 for k in LEFT_OUT})
        pairs: list[tuple[Decision, Decision]] = []
        regressions, fixes, changed_ids = [], [], []
        changed_compared = 0
        for rid, a in a_dec.items():
            b = b_dec.get(rid)
            status = classify(b, a, changed_labels)
            statuses[status] += 1
            if b is None:
                continue
            if status == "not_compared":
                left_out["error_before" if b.outcome == "error" else "error_after"] += 1
            elif status == "label_changed":
                left_out["label_changed"] += 1
                changed_ids.append(rid)
            else:
                pairs.append((b, a))
                changed_compared += b.label_hash != a.label_hash
                if status == "regression":
                    regressions.append(_flip(rid, b, a))
                elif status == "fixed":
                    fixes.append(_flip(rid, b, a))
        left_out["not_in_after"] = sum(1 for rid in b_dec if rid not in a_dec)
        both = sum(1 for b, a in pairs if b.passed and a.passed)
        neither = sum(1 for b, a in pairs if not b.passed and not a.passed)
        table = [[both, len(regressions)], [len(fixes), neither]]
        classes = {cls: _rates([(b, a) for b, a in pairs if a.label_class == cls]) for cls in CLASSES}
        fp_b = b_grp.label_set_fingerprint if b_grp else None
        fp_a = a_grp.label_set_fingerprint if a_grp else None
        blocks.append({
            "family": family, "policy": policy,
            "label_set_fingerprint": {"before": fp_b, "after": fp_a},
            "same_label_set": fp_b is not None and fp_b == fp_a,
            "compared": len(pairs),
            "classes": {**classes, "all": _rates(pairs)},
            "regressions": regressions, "fixes": fixes,
            "known": statuses["known"], "passing": statuses["passing"], "new": statuses["new"],
            "left_out": dict(left_out), "label_changed_ids": changed_ids,
            "label_changed_compared": changed_compared,
            "mcnemar": {"table": table, "b": len(regressions), "c": len(fixes), "p_value": mcnemar_exact(table),
                        "test": "exact McNemar (binomial, two-sided) on the paired pass/fail; McNemar 1947; "
                                "statsmodels"},
        })
    totals: dict[str, Any] = {k: sum(len(b[k]) if isinstance(b[k], list) else b[k] for b in blocks)
                              for k in ("compared", "regressions", "fixes", "known", "passing", "new")}
    totals["left_out"] = {k: sum(b["left_out"][k] for b in blocks) for k in LEFT_OUT}
    return {"changed_labels": changed_labels, "left_out_reasons": LEFT_OUT, "blocks": blocks, "totals": totals}


def fingerprint_mismatches(before: Baseline, after: Baseline) -> list[tuple[str, str, str, str]]:
    """The family × policy blocks both sides hold whose label-set fingerprints differ.

    Returns:
        ``(family, policy, fingerprint before, fingerprint after)`` per such block, sorted.
    """
    out = []
    for g in before.groups:
        other = after.group(g.family, g.policy)
        if other is not None and other.label_set_fingerprint != g.label_set_fingerprint:
            out.append((g.family, g.policy, g.label_set_fingerprint, other.label_set_fingerprint))
    return sorted(out)


def load_runs(path: Path) -> Baseline:
    """A baseline file, or a record log read as a baseline (for ``tooleffect compare``).

    Raises:
        BaselineError: the file cannot be read or is neither (names the file and the field).
    """
    from .records import read_records

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BaselineError(path, "<file>", f"cannot be read ({exc.strerror or exc})") from None
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and ("kind" in whole or "blocks" in whole):
        return Baseline.from_json(whole, path)
    try:
        records = read_records(path)
    except ValueError as exc:
        raise BaselineError(path, "<file>", f"neither a baseline file nor a record log: {exc}") from None
    if not records:
        raise BaselineError(path, "<file>", "no records")
    return Baseline.from_records(records, source=str(path))


# ---------------------------------------------------------------------------------- rendering


def _counts(block: Mapping[str, Any]) -> str:
    left = {k: v for k, v in block["left_out"].items() if v}
    left_s = (f"left out {sum(left.values())} (" + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in left.items())
              + ")") if left else "none left out"
    return (f"{block['compared']} compared: {len(block['regressions'])} regressed, {len(block['fixes'])} fixed, "
            f"known failures {block['known']}, passing {block['passing']}; new {block['new']}; {left_s}")


def _mcnemar_line(block: Mapping[str, Any]) -> str:
    m = block["mcnemar"]
    return (f"{block['family']}/{block['policy']}: McNemar exact p = {m['p_value']:.4g} (pass→fail {m['b']}, "
            f"fail→pass {m['c']}, on {block['compared']} paired decisions)")


def summary_lines(comparison: Mapping[str, Any]) -> list[str]:
    """The few terminal lines of a run against its baseline: counts, regressions by record id,
    fixes, and McNemar's p-value per family × policy.
    """
    t = comparison["totals"]
    lines = [f"baseline {comparison.get('path', '')}: {t['compared']} decisions compared: {t['regressions']} "
             f"regressed, {t['fixes']} fixed, known failures {t['known']}, new {t['new']}"]
    left = {k: v for k, v in t["left_out"].items() if v}
    if left:
        lines.append("left out: " + "; ".join(f"{v} {LEFT_OUT[k]}" for k, v in left.items()))
    for block in comparison["blocks"]:
        for f in block["regressions"]:
            lines.append(f"regression {f['id']}: {f['before']} → {f['after']}")
        for f in block["fixes"]:
            lines.append(f"fixed {f['id']}: {f['before']} → {f['after']}")
    for block in comparison["blocks"]:
        if block["compared"]:
            lines.append(_mcnemar_line(block))
    return lines


def render_comparison(comparison: Mapping[str, Any], names: tuple[str, str] = ("A", "B")) -> str:
    """The comparison as text: per family × policy the class table at each level, the flips both
    ways, the counts and McNemar's p-value (``tooleffect compare``).

    Args:
        comparison: what :func:`compare` returns.
        names: what to call the two sides.
    """
    a, b = names
    out = []
    for block in comparison["blocks"]:
        fp = block["label_set_fingerprint"]
        same = "same label set" if block["same_label_set"] else "label sets differ"
        out.append(f"{block['family']} / {block['policy']}  label set {fp['before'] or '–'} ({a}) vs "
                   f"{fp['after'] or '–'} ({b}): {same}")
        out.append("  " + _counts(block))
        levels = [lv for lv in LEVELS if lv in block["classes"]["all"]]
        head = "".join(f"{lv + f' {a} → {b}':>24}" for lv in levels)
        out.append(f"  {'class':<9}{'n':>5}{head}")
        for cls, row in block["classes"].items():
            if not row["n"] and cls != "all":
                continue
            cells = "".join(f"{row[lv]['before']['display'] + ' → ' + row[lv]['after']['display'] + ' %':>24}"
                            if lv in row else f"{'–':>24}" for lv in levels)
            out.append(f"  {cls:<9}{row['n']:>5}{cells}")
        for what, flips in (("regressions", block["regressions"]), ("fixes", block["fixes"])):
            if flips:
                out.append(f"  {what} ({len(flips)}): " + ", ".join(f"{f['id']} ({f['before']} → {f['after']})"
                                                                   for f in flips))
        if block["label_changed_ids"]:
            out.append("  label changed, left out: " + ", ".join(block["label_changed_ids"]))
        out.append("  " + _mcnemar_line(block))
    return "\n".join(out) + "\n"
