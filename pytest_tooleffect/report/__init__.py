"""Records in, the per-class report out: the typed report, its JSON and its terminal tables.

One block per family × policy: families are separate populations and are never pooled.

Modules: :mod:`.arithmetic` (rates, micro- and macro-averages, Wilson intervals, round-half-up
display, the label-set fingerprint), :mod:`.model` (the :class:`Report` models, :func:`dumps`
and the generated JSON Schema; their effect-level and run-level parts in :mod:`.effects_model`
and :mod:`.run_model`, their shared bases in :mod:`.parts`), :mod:`.summary` (records →
:class:`Report`), :mod:`.terminal` (:func:`render_terminal`).

Each name is imported from its module on first use: building the report models takes a good part
of a second, which a process that only gates or compares (or an xdist worker, which makes no
report) does not pay at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_tooleffect.report.arithmetic import CLASSES, fingerprint, percent, rate_table, wilson_interval
    from pytest_tooleffect.report.model import REPORT_VERSION, Block, Report, dumps, report_schema
    from pytest_tooleffect.report.run_model import RunInfo
    from pytest_tooleffect.report.summary import summarise
    from pytest_tooleffect.report.terminal import render_terminal

_HOME = {"CLASSES": "arithmetic", "fingerprint": "arithmetic", "percent": "arithmetic", "rate_table": "arithmetic",
         "wilson_interval": "arithmetic", "REPORT_VERSION": "model", "Block": "model", "Report": "model",
         "RunInfo": "run_model", "dumps": "model", "report_schema": "model", "summarise": "summary",
         "render_terminal": "terminal"}


def __getattr__(name: str) -> Any:
    """A public name, imported from its module the first time it is asked for (PEP 562)."""
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    globals()[name] = value
    return value

__all__ = [
    "CLASSES",
    "REPORT_VERSION",
    "Block",
    "Report",
    "RunInfo",
    "dumps",
    "fingerprint",
    "percent",
    "rate_table",
    "render_terminal",
    "report_schema",
    "summarise",
    "wilson_interval",
]
