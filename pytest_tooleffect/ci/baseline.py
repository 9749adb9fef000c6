"""Baselines: the per-decision verdicts of an accepted run, and a new run's decisions classified
against them (``docs/design.md``, words "baseline", "record id").

**The file** (:class:`Baseline`, versioned JSON): per record id whether the decision passed (the
verdict's kind is ``ok``/``ok_no_tool`` and, when the record has an effect, the effect passed:
the same pass/fail as the pytest outcome), its kind, its label hash and class; per family ×
policy the label-set fingerprint, computed as the report computes it
(:func:`pytest_tooleffect.report.fingerprint` over the ``(case_id, label_hash)`` of every record
of the block, errors included) and the policy.  An error outcome is no verdict: it is stored as
an error and never compared.

**Classification** (:func:`classify`): ``known`` (failed before, fails now the same way),
``changed`` (failed before, fails now with another kind: never hidden as known), ``fixed``
(failed, passes), ``regression`` (passed, fails), ``passing``, ``new``, ``label_changed`` (left
out unless asked), ``not_compared``.  The run-time plugin is :mod:`.regressions`; the comparison of two runs
is :mod:`.comparison`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pytest_tooleffect.collect.ids import record_id
from pytest_tooleffect.oracle.kinds import OK_KINDS as _OK_KINDS
from pytest_tooleffect.oracle.kinds import Kind, kind_problem
from pytest_tooleffect.report import fingerprint
from pytest_tooleffect.report.record_log import looks_like_record
from pytest_tooleffect.scoring.record import RECORD_VERSION
from pytest_tooleffect.util.display import json_safe, shown
from pytest_tooleffect.util.input_files import read_input_text
from pytest_tooleffect.util.jsonl import RepeatedKey, loads
from pytest_tooleffect.util.versions import version_problem

__all__ = [
    "BASELINE_KIND",
    "BASELINE_VERSION",
    "CHANGED_LABELS",
    "LEFT_OUT",
    "LEVELS",
    "STATUSES",
    "Baseline",
    "BaselineDecision",
    "BaselineError",
    "BaselineGroup",
    "classify",
    "load_runs",
    "record_passed",
]

BASELINE_VERSION: Final = 1
BASELINE_KIND: Final = "tooleffect-baseline"
#: A decision's status against the baseline (the record's ``baseline.status``).
STATUSES = ("regression", "changed", "known", "fixed", "passing", "new", "label_changed", "not_compared")
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


class BaselineError(ValueError):
    """A baseline file or record that cannot be used: names the file and the field.

    Args:
        path: the file (or ``None`` for records held in memory).
        field: where in it (``decisions.demo/a[replay].passed``, ``record 3``, ``version``).
        message: what is wrong.
    """

    def __init__(self, path: Path | str | None, field: str, message: str) -> None:
        # each may quote what the file holds (a key, a kind): shown, so no control character prints raw
        self.path = None if path is None else shown(path, limit=None)
        self.field = shown(field, limit=None)
        self.message = shown(message, limit=None)
        super().__init__(f"{self.path + ': ' if self.path else ''}{field}: {message}")


# ----------------------------------------------------------------------------------- the file


class BaselineDecision(BaseModel):
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
        label_hash: the label's hash (:func:`pytest_tooleffect.collect.cases.label_hash`).
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
    kind: Kind | None = None
    error: str | None = None
    label_hash: str = Field(min_length=1)
    label_class: Literal["single", "several", "no_tool"] = Field(alias="class")
    name_ok: bool | None = None
    name_args_ok: bool | None = None
    effect_ok: bool | None = None

    @model_validator(mode="after")
    def _verdict_or_error(self) -> BaselineDecision:
        if self.outcome == "scored":
            missing = [k for k in ("passed", "kind", "name_ok", "name_args_ok") if getattr(self, k) is None]
            if missing:
                raise ValueError(f"a scored decision needs {', '.join(missing)}")
            passed = self.kind in _OK_KINDS and self.effect_ok is not False
            if self.passed != passed:  # the entry says two things at once: which one is the accepted run's?
                effect = "" if self.effect_ok is None else f" and effect_ok {str(self.effect_ok).lower()}"
                raise ValueError(f"passed {str(self.passed).lower()} with kind {shown(self.kind)}{effect}: a decision "
                                 "passes exactly when its kind is ok or ok_no_tool and its effect, if any, passed")
            why = kind_problem(str(self.kind), bool(self.name_ok), bool(self.name_args_ok), None, self.label_class)
            if why is not None:  # the rule every verdict read back obeys (a record log's too)
                raise ValueError(shown(why))
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
    def from_record(cls, record: Mapping[str, Any], where: str = "record") -> BaselineDecision:
        """The decision a record states.

        Args:
            record: one record (``pytest_tooleffect.scoring.record``; ``verdict`` with ``kind``,
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
            ids = shown(" or ".join(decision.record_ids()))
            raise BaselineError(None, f"{where}.id", f"{shown(repr(record['id']))} is not the record id of its family, "
                                                     f"case, policy and trial ({ids})")
        return decision

    def record_ids(self) -> tuple[str, ...]:
        """The record ids this decision can have: ``family/case[policy]`` (trial 1 of an unrepeated run)
        and ``family/case[policy:trial]`` (under ``--tooleffect-repeats``).
        """
        repeated = record_id(self.family, self.case_id, self.policy, self.trial, repeats=max(self.trial, 2))
        return (record_id(self.family, self.case_id, self.policy), repeated) if self.trial == 1 else (repeated,)


class BaselineGroup(BaseModel):
    """One family × policy of the baseline.

    Attributes:
        family: the family's name.
        policy: the policy's name.
        models: the litellm models its records name (empty for replay and agent policies).
        policy_identity: what the policy was (``agent pkg.mod:decide (digest)``, from the records'
            ``policy_identity``); ``None`` for records that do not say.  A later run under the same
            name may be another policy (that is what a baseline compares); the file keeps what it was.
        label_set_fingerprint: the report's label-set fingerprint of the block (16 hex digits).
        decisions: records of the block (errors included).
        errors: of which error outcomes.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    family: str = Field(min_length=1)
    policy: str = Field(min_length=1)
    models: list[str] = Field(default_factory=list)
    policy_identity: str | None = None
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
        incomplete: what the run it was saved from lacked, one line each (shards missing, items without
            a record), when it was saved on purpose from a run that was not complete
            (``tooleffect baseline save --allow-incomplete``); absent for a complete run's.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["tooleffect-baseline"] = BASELINE_KIND
    version: Literal[1] = BASELINE_VERSION
    created: str
    source: str | None = None
    incomplete: list[str] | None = None
    groups: list[BaselineGroup]
    decisions: dict[str, BaselineDecision]

    @model_validator(mode="after")
    def _consistent(self) -> Baseline:
        groups = {(g.family, g.policy) for g in self.groups}
        if len(groups) != len(self.groups):
            raise ValueError("groups: a family × policy is listed twice")
        for rid, d in self.decisions.items():
            if rid not in d.record_ids():
                raise ValueError(f"decisions.{shown(rid)}: the key is not the record id of its family, case, policy "
                                 "and trial")
            if (d.family, d.policy) not in groups:
                raise ValueError(f"decisions.{shown(rid)}: no group for family {shown(repr(d.family))}, "
                                 f"policy {shown(repr(d.policy))}")
        return self

    @property
    def digest(self) -> str:
        """The baseline's identity: the first 16 hex digits of the SHA-256 of its content as JSON (the
        same content read from two files, or from one file indented otherwise, has one digest; a baseline
        saved again has another, its ``created`` differs).  A record's ``baseline.against`` names it.
        """
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:16]

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
        decisions: dict[str, BaselineDecision] = {}
        pairs: dict[tuple[str, str], list[tuple[str, str]]] = {}
        models: dict[tuple[str, str], set[str]] = {}
        identities: dict[str, tuple[str, int]] = {}
        for n, rec in enumerate(records, 1):
            why = version_problem(rec.get("version"), RECORD_VERSION) if "version" in rec else None
            if why is not None:
                raise BaselineError(source, f"record {n}.version", why)
            try:
                d = BaselineDecision.from_record(rec, f"record {n}")
            except BaselineError as exc:
                raise BaselineError(source, exc.field, exc.message) from None
            _one_policy(rec, n, identities, source)
            rid = str(rec["id"])
            if rid in decisions:
                raise BaselineError(source, f"record {n}.id", f"{shown(repr(rid))} appears twice: one run's records "
                                                              "hold each decision once")
            decisions[rid] = d
            key = (d.family, d.policy)
            pairs.setdefault(key, []).append((d.case_id, d.label_hash))
            if rec.get("model"):
                models.setdefault(key, set()).add(str(rec["model"]))
        groups = []
        for (family, policy), labels in sorted(pairs.items()):
            block = [d for d in decisions.values() if (d.family, d.policy) == (family, policy)]
            ident = identities.get(policy)
            groups.append(BaselineGroup(family=family, policy=policy, models=sorted(models.get((family, policy), ())),
                                        policy_identity=ident[0] if ident else None,
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
        text = _read_text(path)
        try:
            data = loads(text)
        except RepeatedKey as exc:
            raise BaselineError(path, "<file>", f"the key {exc.key!r} is given twice in one object: which "
                                                "entry is the accepted run's?") from None
        except json.JSONDecodeError as exc:
            if looks_like_record(_first_line_json(text)):
                raise BaselineError(path, "<file>", _RECORD_LOG) from None
            raise BaselineError(path, "<file>", f"not JSON ({exc.msg}, line {exc.lineno})") from None
        except ValueError as exc:
            raise BaselineError(path, "<file>", f"not JSON ({exc})") from None
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
            if looks_like_record(data):  # a log of one record
                raise BaselineError(path, "<file>", _RECORD_LOG)
            what = ("a JSON report (it has no per-decision verdicts: save a baseline from its record log)"
                    if "blocks" in data else f"kind {shown(repr(data.get('kind')))}")
            raise BaselineError(path, "kind", f"not a tooleffect baseline: {what}; save one with `tooleffect "
                                              "baseline save RECORDS`")
        why = version_problem(data.get("version"), BASELINE_VERSION)
        if why is not None:
            raise BaselineError(path, "version", why)
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            e = exc.errors()[0]
            loc, msg = _loc(e["loc"]), e["msg"].removeprefix("Value error, ")
            if not loc and ": " in msg and msg.split(": ", 1)[0].startswith(("decisions.", "groups")):
                loc, msg = msg.split(": ", 1)
            raise BaselineError(path, loc or "<file>", msg) from None

    def dumps(self) -> str:
        """The file's text (indented JSON, keys in field order; ``incomplete`` and a group's
        ``policy_identity`` only when set).
        """
        data = self.model_dump(mode="json", by_alias=True)
        if data.get("incomplete") is None:
            data.pop("incomplete", None)
        for group in data["groups"]:
            if group.get("policy_identity") is None:
                group.pop("policy_identity", None)
        return json_safe(json.dumps(data, indent=1, ensure_ascii=False, allow_nan=False)) + "\n"


_RECORD_LOG = ("this is a record log (one record per line), not a baseline: make the baseline from it with "
               "`tooleffect baseline save LOG --out FILE` and give FILE")
def policy_changes(before: Baseline, now: Mapping[str, str | None]) -> list[str]:
    """The policies of one name that are another policy now than in the baseline: said, never refused
    (comparing another agent, model or prompt with the accepted run under the same name is what a
    baseline is for).

    Args:
        before: the baseline.
        now: the identities now (``spec (digest)``, as a group's ``policy_identity``) by policy name.

    Returns:
        One line per such policy name, sorted.
    """
    was = {g.policy: g.policy_identity for g in before.groups if g.policy_identity}
    return [f"policy {name}: {was[name]} in the baseline, {ident} now (compared: another policy under the same name)"
            for name, ident in sorted(now.items()) if ident and name in was and was[name] != ident]


def _one_policy(rec: Mapping[str, Any], n: int, seen: dict[str, tuple[str, int]], source: str | None) -> None:
    """Refuse record ``n`` when an earlier record of its policy name was made by another policy (the
    records' ``policy_identity``: another agent, model, api base or settings): one run's records are of
    one policy per name.  Records that do not say are not checked.

    Raises:
        BaselineError: names both policies and both records.
    """
    ident = rec.get("policy_identity")
    if not isinstance(ident, Mapping) or not isinstance(rec.get("policy"), str):
        return
    said = f"{ident.get('spec')} ({ident.get('digest')})"
    first, at = seen.setdefault(rec["policy"], (said, n))
    if first != said:
        raise BaselineError(source, f"record {n}.policy_identity", f"policy {rec['policy']}: {first} in record {at} "
                                                                    f"but {said} here: one policy name, two policies; "
                                                                    "the records are not one run")


def _first_line_json(text: str) -> Any:
    """The first non-blank line of ``text`` as JSON, or ``None`` when it is not JSON."""
    line = next((x for x in text.splitlines() if x.strip()), "")
    try:
        return json.loads(line)
    except ValueError:
        return None


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


def classify(before: BaselineDecision | None, after: BaselineDecision, changed_labels: str = "skip") -> str:
    """A decision's status against the baseline (one of :data:`STATUSES`).

    Args:
        before: its decision in the baseline (same record id), or ``None``.
        after: its decision now.
        changed_labels: ``skip`` (a decision whose label hash changed is ``label_changed``, not
            compared) or ``compare``.

    Returns:
        ``new`` (not in the baseline), ``not_compared`` (an error on either side),
        ``label_changed``, else ``passing`` / ``regression`` (passed before) or ``fixed`` /
        ``known`` / ``changed`` (failed before: ``changed`` when it fails now in another way, its
        kind as :meth:`BaselineDecision.describe` says it differing from the baseline's).
    """
    if before is None:
        return "new"
    if before.outcome == "error" or after.outcome == "error":
        return "not_compared"
    if before.label_hash != after.label_hash and changed_labels != "compare":
        return "label_changed"
    if before.passed:
        return "passing" if after.passed else "regression"
    if after.passed:
        return "fixed"
    return "known" if before.describe() == after.describe() else "changed"


def load_runs(path: Path) -> Baseline:
    """A baseline file, or a record log read as a baseline (for ``tooleffect compare``).

    Raises:
        BaselineError: the file cannot be read or is neither (names the file and the field).
    """
    from pytest_tooleffect.report.record_log import read_records

    text = _read_text(path)
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and ("kind" in whole or "blocks" in whole):
        return Baseline.load(path)  # read again, refusing a key given twice
    try:
        records = read_records(path)
    except ValueError as exc:  # a record log whose line is not a record, or another file
        if looks_like_record(_first_value(text)):
            raise BaselineError(path, "record log", str(exc)) from None
        raise BaselineError(path, "<file>", f"neither a baseline file nor a record log: {exc}") from None
    if not records:
        raise BaselineError(path, "<file>", "no records")
    return Baseline.from_records(records, source=str(path))


# ---------------------------------------------------------------------------------- rendering


def _first_value(text: str) -> Any:
    """The JSON value on the first non-blank line of ``text`` (``None`` when it is not JSON)."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        return json.loads(first)
    except (ValueError, RecursionError):
        return None


def _read_text(path: Path) -> str:
    try:
        return read_input_text(path)
    except FileNotFoundError as exc:  # the first run of a repository: there is none yet
        raise BaselineError(path, "<file>", f"cannot be read ({exc.strerror or exc}); no baseline yet? "
                                            "tooleffect baseline init makes the first one") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BaselineError(path, "<file>", f"cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
