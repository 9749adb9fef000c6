"""The run's output files, checked when the run is configured, before anything is read for it or
written: no output may be an input.

:func:`check_run_outputs` lists every file the run writes (the record log, the JSON report, the
Markdown summary, the HTML page, pytest's JUnit XML and pytest-json-report's file) and every file
it reads (the case files, family files and the files they name in every family the run's
arguments address and in every output's own folder; ``pyproject.toml`` and pytest's
configuration file; the baseline, the prices, the judge's calibration, the rate limiter's state),
with what a new output would be collected as (a case-file name in a family's folder: the next run
would read the record log or the report as cases) and the kind of file each output writes (it
replaces only a file of its own kind), and hands them to
:func:`~pytest_tooleffect.util.output_files.check_outputs`, the one check every writer uses.  Then it
locks each output for the run (:class:`~pytest_tooleffect.util.output_files.OutputLock`): a second
run at once naming one of them as any of its outputs is refused and says which process holds it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_tooleffect.collect.family import collected_as, family_dirs, family_inputs, is_family_dir
from pytest_tooleffect.options import (
    DEFAULT_RECORDS,
    INI_RATE_FILE,
    INI_RECORDS,
    OPT_BASELINE,
    OPT_HTML,
    OPT_JUDGE_CAL,
    OPT_PRICES,
    OPT_RECORDS,
    OPT_REPORT,
    OPT_SUMMARY_MD,
)
from pytest_tooleffect.settings import Settings, settings_key
from pytest_tooleffect.util.output_files import DISCARD, OutputLock, OutputPathError, check_outputs
from pytest_tooleffect.util.own_outputs import HTML_PAGE, JUNIT_XML, PYTEST_JSON, RECORD_LOG, REPORT, SUMMARY_MD

__all__ = ["RUN_OUTPUT_KINDS", "check_run_outputs", "records_lock_key", "release_records_lock", "run_inputs",
           "run_outputs"]

#: option → the kind of file it writes: an output replaces only a file of its own kind (an earlier
#: run's record log named as the page is refused; the record log the default path names every run
#: is replaced by the next one)
RUN_OUTPUT_KINDS = {OPT_RECORDS: RECORD_LOG, OPT_REPORT: REPORT, OPT_SUMMARY_MD: SUMMARY_MD, OPT_HTML: HTML_PAGE,
                    "--junitxml": JUNIT_XML, "--json-report-file": PYTEST_JSON}

#: the locks on the run's outputs (the record log, the report, the page, …), held from configure time to
#: ``pytest_unconfigure``
records_lock_key = pytest.StashKey[list[OutputLock]]()


def run_outputs(config: pytest.Config, settings: Settings) -> list[tuple[str, Path | None]]:
    """``(option, path)`` of every file the run writes (``None``: not written)."""
    out: list[tuple[str, Path | None]] = [(OPT_RECORDS, settings.records), (OPT_REPORT, settings.report),
                                          (OPT_SUMMARY_MD, settings.summary_md), (OPT_HTML, settings.html)]
    here = Path(config.invocation_params.dir)
    xml = getattr(config.option, "xmlpath", None)
    if xml:
        out.append(("--junitxml", here / os.path.expanduser(xml)))
    if getattr(config.option, "json_report", False) and getattr(config.option, "json_report_file", None):
        if config.option.json_report_file != "none":
            out.append(("--json-report-file", here / config.option.json_report_file))
    return out


def run_inputs(config: pytest.Config, settings: Settings,
               outputs: list[tuple[str, Path | None]]) -> list[tuple[str, Path | None]]:
    """``(what, path)`` of every file the run reads that an output could name.

    The families are those the run's arguments address (as collection finds them) and those in
    each output's own folder, read or not: a case file is never an output.
    """
    prices = config.getoption(OPT_PRICES)
    reads: list[tuple[str, Path | None]] = [
        (f"the baseline ({OPT_BASELINE})", settings.baseline),
        (f"the prices file ({OPT_PRICES})", Path(prices) if prices is not None else None),
        (f"the judge's calibration ({OPT_JUDGE_CAL})", settings.judge_calibration),
        ("the project's configuration (its [tool.tooleffect] tables, gates included)", settings.pyproject),
        ("pytest's configuration file", Path(config.inipath) if config.inipath else None),
        (f"the rate limit's state (ini {INI_RATE_FILE})", settings.rate_file),
    ]
    here = Path(config.invocation_params.dir)
    dirs = set(family_dirs(here / arg.split("::")[0] for arg in config.args))
    for _, path in outputs:
        if path is not None:
            folder = Path(os.path.realpath(path)).parent
            if is_family_dir(folder):
                dirs.add(folder)
    reads.extend(family_inputs(sorted(dirs)))
    return reads


def check_run_outputs(config: pytest.Config) -> None:
    """Refuse the run's outputs that are no place to write, then lock each of them.

    Call it on the controller, at configure time, before anything else is read or written.

    Raises:
        pytest.UsageError: an output is a folder or not a regular file (``/dev/null`` excepted), a
            file the run reads, a new file the next run would collect as a case file (a case-file
            name in a family's folder), an existing file the plugin wrote of another kind than the
            output (an earlier record log named as the page), the file of another output, or cannot
            be written; or one of its outputs is held by another run (its pid said).
    """
    settings = config.stash[settings_key]
    outputs = run_outputs(config, settings)
    try:
        check_outputs(outputs, run_inputs(config, settings, outputs), becomes=collected_as, kinds=RUN_OUTPUT_KINDS)
        locks = config.stash[records_lock_key] = []
        for option, path in outputs:  # every output: a second run at once may neither interleave nor replace it
            if path is None or Path(os.path.realpath(path)) == DISCARD or (
                    option == OPT_RECORDS and not _may_write_records(config)):
                continue
            locks.append(OutputLock.acquire(option, path))
    except OutputPathError as exc:
        release_records_lock(config)
        raise pytest.UsageError(str(exc)) from None


def _may_write_records(config: pytest.Config) -> bool:
    """The run names its record log (option or ini), or its arguments address a family folder: a
    run of the project's own unit tests (``pytest tests/``) takes no lock on the default log, so it
    never stops another run that does.
    """
    if config.getoption(OPT_RECORDS) is not None or config.getini(INI_RECORDS) != DEFAULT_RECORDS:
        return True
    here = Path(config.invocation_params.dir)
    return bool(family_dirs(here / str(arg).split("::")[0] for arg in config.args))


def release_records_lock(config: pytest.Config) -> None:
    """Let the outputs' locks go (at ``pytest_unconfigure``; nothing when none is held)."""
    for lock in config.stash.get(records_lock_key, []):
        lock.release()
    if records_lock_key in config.stash:
        del config.stash[records_lock_key]
