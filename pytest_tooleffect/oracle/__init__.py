"""The oracle: pure scoring of tool decisions.

Imports no pytest, litellm or docker (a subprocess test holds this boundary).  Entry point:
:func:`score`.
"""

from __future__ import annotations

from .compare import ANY_OF, OMITTED, CompareContext, FieldResult, compare_args
from .emission import Call, Emission, parse_emission
from .rules import Rule, RuleError, RuleSet, load_rules
from .verdict import KINDS, PARALLEL_CONVENTION, Verdict, compile_label, score

__all__ = [
    "ANY_OF",
    "KINDS",
    "OMITTED",
    "PARALLEL_CONVENTION",
    "Call",
    "CompareContext",
    "Emission",
    "FieldResult",
    "Rule",
    "RuleError",
    "RuleSet",
    "Verdict",
    "compare_args",
    "compile_label",
    "load_rules",
    "parse_emission",
    "score",
]
