"""A pytest plugin of the throughput bench: the run's CPU seconds once it is ready to send its first
request, the same span a bare loop's CPU is counted over (after ``import litellm``).

Loaded with ``-p cpu_after_start`` (this folder on ``PYTHONPATH``) in a live run at ``-n 0``.  At
the end of collection it waits for the model-turn child's litellm import (one ``keys`` question to
the child, which the child answers once imported: the run's first request waits for that import
too), then reads the CPU time (user + system) of this process and of its child; at the start of
``pytest_unconfigure``, before the plugin's objects close and the child exits, it reads them again.
Everything between is counted: every item's turn, scoring and record, the session's end (the
report built, the terminal summary written).  Left out on both sides: imports (litellm's here and
in the bare loop; this run's own late ones, the report's modules, are imported before the count
starts), and for pytest its collection (the bare loop's requests are read before its count
starts).  litellm's lazy imports at its first request are counted on both sides.

Writes ``{"parent_cpu_s", "child_cpu_s", "children"}`` (seconds; the number of child processes
read) as JSON to the file named by ``TOOLEFFECT_BENCH_CPU_OUT``.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

_MARKS: dict[str, tuple[float, float, int]] = {}
OUT_ENV = "TOOLEFFECT_BENCH_CPU_OUT"

#: the modules the run imports only when it builds the report (0.15 to 0.3 s of CPU, once per run)
_LATE_IMPORTS = ("numpy", "pytest_tooleffect.report.model", "pytest_tooleffect.report.run_model",
                 "pytest_tooleffect.report.summary", "pytest_tooleffect.report.terminal")


def _read() -> tuple[float, float, int]:
    """(this process's CPU seconds, its children's CPU seconds, how many children)."""
    children = psutil.Process().children()
    total = 0.0
    for child in children:
        times = child.cpu_times()
        total += times.user + times.system
    return time.process_time(), total, len(children)


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "numprocesses", None) or os.environ.get("PYTEST_XDIST_WORKER"):
        raise pytest.UsageError("cpu_after_start: reads one process and its child: run it at -n 0")


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    from pytest_tooleffect.decide.decision import pool_key
    from pytest_tooleffect.options import OPT_API_BASE

    out = os.environ.get(OUT_ENV)
    if not out:
        raise pytest.UsageError(f"cpu_after_start: set {OUT_ENV} to the file the CPU figures go to")
    pool: Any = session.config.stash.get(pool_key, None)
    if pool is None or not session.items or session.config.option.collectonly:
        raise pytest.UsageError("cpu_after_start: this run makes no model turns")
    if os.path.exists(out) and not os.path.isfile(out):  # a FIFO would block, /dev/full takes the probe
        raise pytest.UsageError(f"cpu_after_start: {OUT_ENV}={out} is not a regular file")
    try:
        Path(out).write_text("")  # the figures' file can be written: found now, not after the run
    except OSError as exc:
        raise pytest.UsageError(f"cpu_after_start: {OUT_ENV}={out} cannot be written: {exc}") from None
    pool.keys_found("openai/bench", session.config.getoption(OPT_API_BASE) or "")  # once the child has imported litellm
    for module in _LATE_IMPORTS:  # what the run imports at its end (the report's modules): an import, not a decision
        importlib.import_module(module)
    _MARKS["start"] = _read()


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if "start" not in _MARKS:
        return
    (p0, c0, _), (p1, c1, n) = _MARKS["start"], _read()
    try:
        Path(os.environ[OUT_ENV]).write_text(
            json.dumps({"parent_cpu_s": p1 - p0, "child_cpu_s": c1 - c0, "children": n}))
    except OSError as exc:  # never in the way of the plugin's own unconfigure (its child, its folders)
        print(f"cpu_after_start: the CPU figures could not be written: {exc}", file=sys.stderr)
