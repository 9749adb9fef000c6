"""Records in, the per-class report out: the typed report, its JSON and its terminal tables.

One block per family × policy: families are separate populations and are never pooled.

Modules: :mod:`.arithmetic` (rates, micro- and macro-averages, Wilson intervals, round-half-up
display, the label-set fingerprint), :mod:`.model` (the :class:`Report` models, :func:`dumps`
and the generated JSON Schema), :mod:`.summary` (records → :class:`Report`), :mod:`.terminal`
(:func:`render_terminal`).
"""

from __future__ import annotations

from .arithmetic import fingerprint, percent, rate_table, wilson_interval
from .model import CLASSES, REPORT_VERSION, Block, Report, RunInfo, dumps, report_schema
from .summary import summarise
from .terminal import render_terminal

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
