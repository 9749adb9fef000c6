"""pytest-tooleffect: measure how well an LLM agent chooses its tools, including choosing none.

Public surface: :func:`score` (one decision against a label), the :class:`Verdict` it returns,
the comparison context and rules that predicates and rule files use (:class:`CompareContext`,
:class:`RuleSet`, :func:`parse_datetime`, :func:`parse_date`), and the models of the case
format.  The pytest plugin itself is :mod:`pytest_tooleffect.plugin`; its stages are described
in ``docs/design.md`` ("Architecture").
"""

from __future__ import annotations

from pytest_tooleffect.formats import Action, Case, Family, ForbiddenAction, Label, ParallelGroup, Policy, ToolSpec
from pytest_tooleffect.oracle import (
    KINDS,
    CompareContext,
    RuleSet,
    Verdict,
    load_rules,
    parse_date,
    parse_datetime,
    parse_emission,
    score,
)

#: The package's version: the one place it is written (pyproject.toml reads it, [tool.hatch.version]).
#: What a release bumps, and when the record, report, baseline and rules formats change their own
#: ``version``: CHANGELOG.md, "Versioning".
__version__ = "0.1.0"

__all__ = [
    "KINDS",
    "Action",
    "Case",
    "CompareContext",
    "Family",
    "ForbiddenAction",
    "Label",
    "ParallelGroup",
    "Policy",
    "RuleSet",
    "ToolSpec",
    "Verdict",
    "load_rules",
    "parse_date",
    "parse_datetime",
    "parse_emission",
    "score",
]
