"""The oracle: pure scoring of tool decisions.

Imports no pytest, litellm or docker (a subprocess test holds this boundary).  Entry point:
:func:`score`.

Modules, each importing only those listed before it: :mod:`.values` (normalisers, dates and
instants, JSON equality), :mod:`.rules` (the rule language), :mod:`.rulecheck` (rules against the tools' schemas: each
takes effect or is refused at load), :mod:`.schema` (a tool's schema
compiled under a rule set), :mod:`.context` (what a comparison reads from the state),
:mod:`.predicates` (the constraint predicates), :mod:`.compare` (the comparator),
:mod:`.compiled` (label calls compiled for repeated scoring), :mod:`.emission` (provider
output to calls), :mod:`.reply` (what a no-tool reply must do), :mod:`.kinds` (the verdict kinds and their
consistency rule), :mod:`.verdict` (the verdict
on a decision); :mod:`.effects` judges a sandbox's world changes and :mod:`.conversation` a
whole self-steered conversation against a reference trajectory.
"""

from __future__ import annotations

from pytest_tooleffect.oracle.compare import FieldResult, compare_args
from pytest_tooleffect.oracle.compiled import ArgsPlan, compile_call
from pytest_tooleffect.oracle.context import CompareContext
from pytest_tooleffect.oracle.emission import Call, Emission, parse_emission, tool_aliases
from pytest_tooleffect.oracle.kinds import Kind, kind_problem
from pytest_tooleffect.oracle.rules import Rule, RuleError, RuleSet, load_rules
from pytest_tooleffect.oracle.values import ANY_OF, OMITTED, normalise_string, parse_date, parse_datetime
from pytest_tooleffect.oracle.verdict import KINDS, PARALLEL_CONVENTION, Verdict, compile_label, score

__all__ = [
    "ANY_OF",
    "KINDS",
    "OMITTED",
    "PARALLEL_CONVENTION",
    "ArgsPlan",
    "Call",
    "CompareContext",
    "Emission",
    "FieldResult",
    "Kind",
    "Rule",
    "RuleError",
    "RuleSet",
    "Verdict",
    "compare_args",
    "compile_call",
    "compile_label",
    "kind_problem",
    "load_rules",
    "normalise_string",
    "parse_date",
    "parse_datetime",
    "parse_emission",
    "score",
    "tool_aliases",
]
