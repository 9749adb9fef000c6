"""Gates: thresholds in ``pyproject.toml`` that decide the session's exit status.

Read from the rootdir's ``pyproject.toml``, table ``[tool.tooleffect.gates]``: one sub-table
per family × policy, keyed ``"FAMILY/POLICY"`` (split at the first ``/``; either part may be
``*``, and ``"*"`` alone is ``"*/*"``).  A block of the report takes every table that matches
it, the more specific over the less (``*/*`` < ``*/POLICY`` < ``FAMILY/*`` < ``FAMILY/POLICY``),
key by key::

    [tool.tooleffect.gates."*"]
    bound = "wilson"          # judge a class rate's Wilson 95 % lower bound ("point": the rate)
    min_n = 20                # a class with fewer rows is NOT JUDGED
    unjudged = "fail"         # a NOT JUDGED gate fails the run ("pass": it does not)
    min_pct.no_tool = {name = 85, name_args = 80}      # percent, per class and level
    min_pct.micro = {name = 90}                        # and per average and level
    max_count = {forbidden = 0, malformed_call = 0, phantom_action = 0}    # per kind
    max_approximate_reply_verdicts = 0                 # fallback reply verdicts of a low-precision kind
    max_regressions = 0       # records whose baseline status is "regression"
    max_changed = 0           # known failures of another kind now (baseline status "changed")
    max_cost_usd = 5.0        # the family × policy's cost in all (USD)
    max_drop = {shuffle = 2}  # points a perturbed-catalog variant may cost, paired (docs/robustness.md)
    max_cost_usd_per_decision = 0.01                   # its mean per scored decision (USD)
    max_destructive_unneeded = 0                       # MCP hints: needless calls of a destructive tool
    min_pct_weighted_no_tool = 90                      # MCP hints: the severity-weighted no-tool rate
    sequential = {alpha = 0.05, margin = 0.02, effect = 0.05, budget_decisions = 400, budget_usd = 2.0}
                              # decided as paired decisions complete (ci/sequential_gate.py)

    [tool.tooleffect.gates."tau-airline/replay"]
    min_pct.no_tool.name = 90
    max_cost_usd = "off"      # "off" removes a gate a less specific table set

This module reads and checks the configuration (:func:`load_gates`); :mod:`.gating` judges the
report against it and decides the exit status.  Its plugin object ``GateKeeper`` lives on the
controller only (``plugin.py``): it judges
the report as one of its sections (writing the report's ``gates``, which the reporter writes out,
the Markdown summary of ``--tooleffect-summary-md`` included), prints one line per gate, and sets
``session.exitstatus`` by :func:`decide_exit` in a ``pytest_sessionfinish`` wrapper.

Rates are the report's own (``docs/design.md``, "Report arithmetic"): the class rate, its
Wilson 95 % interval (Wilson, JASA 22(158), 1927, as the report computes it) and the micro-
and macro-averages; nothing here recomputes them.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, PlainValidator, ValidationError

from pytest_tooleffect.settings import Settings, read_config_file, read_pyproject
from pytest_tooleffect.util.display import shown

__all__ = ["AVERAGES", "EFFECT_KINDS", "GATES_TABLE", "LEVELS", "CountCaps", "GateSet", "GatesConfig", "LevelFloors",
           "RateFloors", "SequentialSpec", "gates_of", "load_gates", "load_gates_file", "parse_gates"]

GATES_TABLE = "tool.tooleffect.gates"
LEVELS = ("name", "name_args", "effect")
AVERAGES = ("micro", "macro")
#: failure kinds of the sandbox's effect verdict (the report's ``effects.kinds``)
EFFECT_KINDS = ("forbidden_effect", "unexpected_change", "effect_missing")

# ------------------------------------------------------------------------------ config


def _percent(value: Any) -> float | str:
    if value == "off":
        return "off"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f'expected a percentage from 0 to 100 or "off", got {value!r}')
    if not 0 <= value <= 100:
        raise ValueError(f"{value!r} is not a percentage from 0 to 100")
    if 0 < value < 1:
        raise ValueError(f"{value!r} reads as {value} %, not {value * 100:g} %: rates are percentages "
                         f"(write {value * 100:g})")
    return float(value)


def _count(value: Any) -> int | str:
    if value == "off":
        return "off"
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f'expected a whole number >= 0 or "off", got {value!r}')
    return value


def _usd(value: Any) -> float | str:
    if value == "off":
        return "off"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f'expected an amount in USD >= 0 or "off", got {value!r}')
    return float(value)


def _budget_usd(value: Any) -> float | str:
    if value == "off":
        return "off"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f'expected an amount in USD > 0 or "off" (a budget of 0 would stop before the first '
                         f'decision), got {value!r}')
    return float(value)


def _min_n(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"expected a whole number of rows >= 1, got {value!r}")
    return value


#: a rate floor in percent (0-100), or ``"off"``
Pct = Annotated[float | str, PlainValidator(_percent)]
#: a count ceiling, or ``"off"``
Count = Annotated[int | str, PlainValidator(_count)]
#: an amount in USD, or ``"off"``
Usd = Annotated[float | str, PlainValidator(_usd)]
MinN = Annotated[int, PlainValidator(_min_n)]


def _fraction(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 < value < 1:
        raise ValueError(f"expected a fraction between 0 and 1 (0.05 is 5 points), got {value!r}")
    return float(value)


def _margin(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value < 1:
        raise ValueError(f"expected a fraction from 0 to below 1 (0.02 is 2 points), got {value!r}")
    return float(value)


def _share(value: Any) -> float:
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not number or not 0 <= value <= 1:
        raise ValueError(f"expected a share from 0 to 1 (0.04: 4 % of pairs flip), got {value!r}")
    return float(value)


def _budget(value: Any) -> int | str:
    if value == "off":
        return "off"
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f'expected a whole number of decisions >= 1 or "off", got {value!r}')
    return value


#: a probability or a rate difference as a fraction in (0, 1)
Fraction01 = Annotated[float, PlainValidator(_fraction)]
Margin = Annotated[float, PlainValidator(_margin)]
Share = Annotated[float, PlainValidator(_share)]
Budget = Annotated[int | str, PlainValidator(_budget)]
#: a sequential gate's budget in USD, above 0, or ``"off"`` (as ``Budget``: 0 is no budget to run on)
BudgetUsd = Annotated[float | str, PlainValidator(_budget_usd)]


class _Table(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LevelFloors(_Table):
    """Floors of one class or average, per level, in percent (``None``: not set here)."""

    name: Pct | None = None
    name_args: Pct | None = None
    effect: Pct | None = None


class RateFloors(_Table):
    """``min_pct``: floors per class (``single``, ``several``, ``no_tool``) and average."""

    single: LevelFloors | None = None
    several: LevelFloors | None = None
    no_tool: LevelFloors | None = None
    micro: LevelFloors | None = None
    macro: LevelFloors | None = None


class CountCaps(_Table):
    """``max_count``: ceilings per failure kind (the decision's kinds and the effect's)."""

    wrong_tool: Count | None = None
    tool_when_none_needed: Count | None = None
    none_when_tool_needed: Count | None = None
    forbidden: Count | None = None
    right_tool_wrong_args: Count | None = None
    malformed_call: Count | None = None
    wrong_reply: Count | None = None
    phantom_action: Count | None = None
    forbidden_effect: Count | None = None
    unexpected_change: Count | None = None
    effect_missing: Count | None = None


class SequentialSpec(_Table):
    """``sequential``: a gate decided as paired decisions complete (``None``: inherited or default).

    Attributes:
        alpha: the false-regression rate it holds at every stopping time (default 0.05).
        margin: the regression (a fraction of paired decisions, 0.02 = 2 points) still called "no
            regression beyond the margin" (default 0).
        beta: one minus the power against ``effect`` (default 0.2).
        effect: the regression it is designed to find (a fraction, 0.05 = 5 points; default 0.05).
        discordance: the share of pairs an unchanged agent flips (``tooleffect plan`` measures it): the
            test's bets are tuned for it (faster verdicts, the same error bounds); default unset.
        budget_decisions: the most decisions of the block it may spend; reached before a verdict, the
            gate is NOT SETTLED (``"off"``: none; default none).
        budget_usd: the most USD the block's decisions may cost, above 0; likewise.
        off: ``true`` removes a sequential gate a less specific table set.
    """

    alpha: Fraction01 | None = None
    margin: Margin | None = None
    beta: Fraction01 | None = None
    effect: Fraction01 | None = None
    discordance: Share | None = None
    budget_decisions: Budget | None = None
    budget_usd: BudgetUsd | None = None
    off: bool | None = None


class GateSet(_Table):
    """One ``[tool.tooleffect.gates."FAMILY/POLICY"]`` table (``None``: inherited or default).

    Attributes:
        bound: ``point`` judges a class rate itself, ``wilson`` the lower end of its Wilson 95 %
            interval (default ``point``); averages have no interval and are judged as points.
        min_n: a class (or an average's rows) with fewer rows is NOT JUDGED (default 1).
        unjudged: ``fail`` (default) or ``pass``: whether a NOT JUDGED gate fails the run.
        min_pct: rate floors, percent.
        max_count: kind ceilings, decisions.
        max_regressions: ceiling on records whose ``baseline.status`` is ``regression``.
        max_changed: ceiling on records whose ``baseline.status`` is ``changed`` (failed in the
            baseline, fail now with another kind).
        max_approximate_reply_verdicts: ceiling on reply kinds judged by the deterministic fallback
            where its measured precision for the kind is under 0.8 (the report's
            ``approximate_replies.low_precision``): ``0`` refuses to rest on them (configure a judge).
        max_cost_usd: ceiling on the family × policy's cost in all, USD.
        max_cost_usd_per_decision: ceiling on its mean cost per scored decision, USD.
        max_drop: per perturbation variant or kind, the most percentage points it may cost the
            family × policy on the same cases (:mod:`.gate_drops`).
        max_destructive_unneeded: ceiling on the no-tool decisions that called a destructive tool
            (the report's ``needless_calls.destructive``; a family whose tools carry MCP hints).
        min_pct_weighted_no_tool: floor on the severity-weighted no-tool rate, percent (the
            report's ``needless_calls.weighted_pct``), judged as a point.
        sequential: a sequential paired gate (:class:`SequentialSpec`).
    """

    bound: Literal["point", "wilson"] | None = None
    min_n: MinN | None = None
    unjudged: Literal["fail", "pass"] | None = None
    min_pct: RateFloors | None = None
    max_count: CountCaps | None = None
    max_regressions: Count | None = None
    max_changed: Count | None = None
    max_approximate_reply_verdicts: Count | None = None
    max_cost_usd: Usd | None = None
    max_cost_usd_per_decision: Usd | None = None
    max_drop: dict[str, Pct] | None = None
    max_destructive_unneeded: Count | None = None
    min_pct_weighted_no_tool: Pct | None = None
    sequential: SequentialSpec | None = None

    def merged(self, over: GateSet) -> GateSet:
        """This set with ``over``'s keys on top (key by key, into ``min_pct`` and ``max_count``)."""
        return GateSet.model_validate(_deep_merge(self.model_dump(exclude_none=True),
                                                  over.model_dump(exclude_none=True)))

    @property
    def thresholds(self) -> bool:
        """Some gate is set (not only settings, not only ``"off"``)."""
        data = self.model_dump(exclude_none=True, include={"min_pct", "max_count", "max_regressions", "max_changed",
                                                            "max_approximate_reply_verdicts", "max_cost_usd",
                                                            "max_cost_usd_per_decision", "max_drop",
                                                            "max_destructive_unneeded", "min_pct_weighted_no_tool"})
        return any(v != "off" for v in _leaves(data)) or self.sequential_on

    @property
    def sequential_on(self) -> bool:
        """A sequential gate is set (and not removed with ``off = true``)."""
        return self.sequential is not None and not self.sequential.off


def _deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def _leaves(data: Any) -> Iterable[Any]:
    if isinstance(data, Mapping):
        for v in data.values():
            yield from _leaves(v)
    else:
        yield data


@dataclass(frozen=True)
class GatesConfig:
    """The gate tables of a ``pyproject.toml``.

    Attributes:
        path: the file they were read from.
        tables: ``(family, policy)`` → its table; ``*`` is a wildcard part.
    """

    path: Path
    tables: Mapping[tuple[str, str], GateSet]

    @property
    def configured(self) -> bool:
        """Some table sets a gate: the gates then decide the exit status."""
        return any(t.thresholds for t in self.tables.values())

    def for_block(self, family: str, policy: str) -> GateSet:
        """The gates of one family × policy: every matching table, the more specific on top."""
        out = GateSet()
        for key in (("*", "*"), ("*", policy), (family, "*"), (family, policy)):
            if key in self.tables:
                out = out.merged(self.tables[key])
        return out


def gates_of(settings: Settings) -> GatesConfig | None:
    """The run's gates: ``[tool.tooleffect.gates]`` as the run's settings read it (the one reading
    of ``pyproject.toml`` in a run), validated.

    Returns:
        The gates, or ``None`` when the file or the table is absent.

    Raises:
        pytest.UsageError: the table is not as documented (as :func:`parse_gates`).
    """
    return None if settings.gates_table is None else parse_gates(settings.gates_table, settings.pyproject)


def load_gates(rootpath: Path) -> GatesConfig | None:
    """Read ``[tool.tooleffect.gates]`` from ``rootpath/pyproject.toml`` (outside a run; a run takes
    them from its settings, :func:`gates_of`).

    Args:
        rootpath: pytest's rootdir.

    Returns:
        The gates, or ``None`` when the file or the table is absent.

    Raises:
        pytest.UsageError: the file cannot be read, or the table is not as documented (the message
            names the file, the table and the key).
    """
    path, doc = read_pyproject(rootpath)
    return _gates_in(doc, path)


def load_gates_file(path: Path) -> GatesConfig | None:
    """Read ``[tool.tooleffect.gates]`` from a TOML file: a ``pyproject.toml``, or any file that
    holds the table (``tooleffect report --gates FILE``).

    Args:
        path: the file.

    Returns:
        The gates, or ``None`` when the file has no such table.

    Raises:
        pytest.UsageError: the file is missing, a folder or a device, is not UTF-8 TOML, or its
            table is not as documented (one line naming the file, the table and the key).
    """
    return _gates_in(read_config_file(path), path)


def _gates_in(doc: Mapping[str, Any], path: Path) -> GatesConfig | None:
    table: Any = doc
    for part in GATES_TABLE.split("."):
        if not isinstance(table, Mapping) or part not in table:
            return None
        table = table[part]
    return parse_gates(table, path)


def parse_gates(table: Any, path: Path) -> GatesConfig:
    """Validate the ``[tool.tooleffect.gates]`` table.

    Args:
        table: the table as TOML reads it.
        path: the file, for messages.

    Returns:
        The gates.

    Raises:
        pytest.UsageError: a key is not ``"FAMILY/POLICY"``, a value is not a table, or a key or
            value inside one is unknown or invalid.
    """
    if not isinstance(table, Mapping):
        raise pytest.UsageError(f'{path}: [{GATES_TABLE}] must be a table of tables keyed "FAMILY/POLICY" or "*"')
    tables: dict[tuple[str, str], GateSet] = {}
    for key, spec in table.items():
        where = f'{path}: [{GATES_TABLE}."{shown(key)}"]'
        family, slash, policy = str(key).partition("/")
        if not slash and family == "*":
            policy = "*"
        if not family or not policy or (not slash and family != "*"):
            raise pytest.UsageError(f'{where}: the key must be "FAMILY/POLICY" (either part may be *) or "*"')
        if not isinstance(spec, Mapping):
            raise pytest.UsageError(f"{where}: must be a table of gates, got {shown(repr(spec))}")
        if (family, policy) in tables:
            raise pytest.UsageError(f"{where}: the same family × policy as another key of [{GATES_TABLE}]")
        try:
            tables[(family, policy)] = GateSet.model_validate(spec)
        except ValidationError as exc:
            raise pytest.UsageError(f"{where}: " + "; ".join(_explain(e) for e in exc.errors())) from None
    return GatesConfig(path, tables)


def _explain(error: Mapping[str, Any]) -> str:
    loc = [str(p) for p in error["loc"]]
    key = shown(".".join(loc) or "(table)")
    if error["type"] == "extra_forbidden":
        model: type[BaseModel] = GateSet
        for part in loc[:-1]:
            ann = model.model_fields[part].annotation
            model = next(a for a in getattr(ann, "__args__", (ann,))
                         if isinstance(a, type) and issubclass(a, BaseModel))
        return f"{key}: unknown key (known here: {', '.join(model.model_fields)})"
    if error["type"] == "model_type":
        return f"{key}: must be a table, got {shown(repr(error['input']))}"
    msg = str(error["msg"]).removeprefix("Value error, ")
    return f"{key}: {shown(msg)}"
