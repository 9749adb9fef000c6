"""Which existing files are the plugin's own outputs: the only files a run or a command replaces
without ``--force``.

An output path that names an existing file written by something else (``Makefile``,
``requirements.txt``, ``.github/workflows/ci.yml``, ``README.md``) is refused by
:func:`~pytest_tooleffect.util.output_files.check_outputs`; one that names a file the plugin wrote
(the record log every run rewrites, a report, a baseline, a page) is written over as before.  The
file is recognised by its first bytes (at most :data:`SNIFF_BYTES`), never by its name:

* a record log: JSON lines whose first object (sorted keys) holds ``"case_id"`` and ``"class"``
  in what was read;
* the run's JSON report: ``{"version": N, "status": …``; a baseline: ``"kind": "tooleffect-baseline"``;
  the judge's calibration (``calibrate-judge``): ``"kappa"`` and ``"kappa_ci95"``; the reply
  checks' calibration (``calibrate-replies``): ``{"kind": "tooleffect-reply-calibration"``;
* the HTML page: its ``<meta name="generator" content="pytest-tooleffect">`` (or, for a page
  written before it carried one, the ``<title>tooleffect`` of the default title);
* the Markdown job summary: its ``## tooleffect`` heading;
* what pytest and pytest-json-report write beside them in the same run: a JUnit XML file
  (``<testsuites`` or ``<testsuite`` in its first element after the XML declaration) and a JSON
  report (``{"created": …`` with ``"exitcode"``);
* labelling files: JSON lines of ``{"id", "state", "valid_actions", …}`` (``label export``),
  ``{"id", "valid_actions" or "forbidden_actions", …}`` (``merge``'s final labels) or
  ``{"id", "labels"}`` (``merge``'s adjudication list).

An empty file holds nothing to lose and is replaced too.

Each kind has its words here (:data:`RECORD_LOG`, :data:`HTML_PAGE`, …): an output says which kind it
writes, and :func:`may_replace` says whether it may replace a file of the kind found there (its own
kind only: a page never replaces a record log).

This module imports nothing of the plugin.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

__all__ = ["BASELINE_WORDS", "CASE_FILE", "FAMILY_FILES", "HTML_MARKER", "HTML_PAGE", "JUDGE_CALIBRATION",
           "JUNIT_XML", "LABELS", "PYTEST_JSON", "RECORD_LOG", "REPLY_CALIBRATION", "REPORT", "SNIFF_BYTES",
           "SUMMARY_MD", "is_own_output", "may_replace", "output_kind"]

#: how much of a file is read to recognise it
SNIFF_BYTES = 64 * 1024
#: the line of the HTML page's head that says the plugin wrote it
HTML_MARKER = '<meta name="generator" content="pytest-tooleffect">'

#: a record's keys are sorted: ``case_id`` and ``class`` come early in its line, long text late
_RECORD_KEYS = ('"case_id": ', '"class": ')
_REPORT_START = re.compile(r'\{\s*"version": \d+,\s*"status": ')
_BASELINE = re.compile(r'^\{\s*"kind": "tooleffect-baseline"')
_CALIBRATION = re.compile(r'^\{\s*"model": ')
#: the key sets of one line of the labelling files (any one suffices, with ``id``)
_LABEL_KEYS = ({"state", "valid_actions"}, {"valid_actions"}, {"forbidden_actions"}, {"labels"})


#: a JUnit XML file as pytest's ``--junitxml`` writes it: an optional XML declaration, then the
#: ``testsuites`` (or ``testsuite``) element
_JUNIT = re.compile(r'\s*(?:<\?xml[^>]*\?>\s*)?<testsuites?[\s>]')


#: what :func:`output_kind` calls a baseline
BASELINE_WORDS = "a tooleffect baseline"
#: what :func:`output_kind` calls a labelling file
LABELS = "a labelling file"
#: what :func:`output_kind` calls the other kinds of file the plugin (or pytest beside it) writes
RECORD_LOG = "a tooleffect record log"
REPORT = "a tooleffect JSON report"
HTML_PAGE = "a tooleffect HTML page"
SUMMARY_MD = "a tooleffect Markdown job summary"
JUNIT_XML = "a JUnit XML file"
PYTEST_JSON = "a pytest-json-report file"
JUDGE_CALIBRATION = "a judge calibration"
REPLY_CALIBRATION = "a reply calibration"
#: what ``sample`` and ``label import`` write, and what ``import`` and ``generate`` write into a family's
#: folder (never found by :func:`output_kind`: a case file whose lines carry labels is found as
#: :data:`LABELS`, which they may replace)
CASE_FILE = "a case file"
FAMILY_FILES = "a family's files"


def is_own_output(path: Path) -> bool:
    """Whether the existing file ``path`` is one the plugin writes (so an output may replace it).

    Args:
        path: a regular file.

    Returns:
        ``True`` for an empty file and for a record log, report, baseline, calibration, HTML page,
        job summary or labelling file as described in the module; ``False`` for anything else,
        and for a file that cannot be read.
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return False
    return not head or _kind(head) is not None


def output_kind(path: Path) -> str | None:
    """What the plugin's file ``path`` is, in words (``"a tooleffect record log"``, :data:`LABELS`,
    …), or ``None``: empty, unreadable, or not a file the plugin writes.  Used to name what a
    command was given instead of the file it reads (a record log given to ``merge``).
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(SNIFF_BYTES)
    except OSError:
        return None
    return _kind(head) if head else None


def may_replace(writes: str, holds: str) -> bool:
    """Whether an output writing the kind ``writes`` may replace an existing file found to be ``holds``
    (both words of this module): only a file of its own kind, and a labelling file for a case file
    or a family's files (they have one shape: lines of ``{"id", "valid_actions", …}``).
    """
    return holds == writes or (writes in (CASE_FILE, FAMILY_FILES) and holds == LABELS)


def _kind(head: bytes) -> str | None:
    text = head.decode("utf-8", "replace")
    if text.startswith("<!DOCTYPE html>"):
        own = HTML_MARKER in text[:4096] or "<title>tooleffect" in text[:4096]
        return HTML_PAGE if own else None
    if text.startswith("## tooleffect"):
        return SUMMARY_MD
    if _JUNIT.match(text):
        return JUNIT_XML
    if text.startswith('{"created": ') and '"exitcode": ' in text:
        return PYTEST_JSON
    if _BASELINE.match(text):
        return BASELINE_WORDS
    if _REPORT_START.match(text):
        return REPORT
    if _CALIBRATION.match(text):
        return JUDGE_CALIBRATION if '"kappa": ' in text and '"kappa_ci95": ' in text else None
    if text.startswith('{\n  "kind": "tooleffect-reply-calibration"'):
        return REPLY_CALIBRATION
    line, newline, _ = text.partition("\n")
    if line.startswith('{"') and all(key in line for key in _RECORD_KEYS):
        return RECORD_LOG
    if not newline:  # a first line longer than what was read: not a labelling file (they are short)
        return None
    try:
        row = json.loads(line)
    except ValueError:
        return None
    if (isinstance(row, dict) and isinstance(row.get("id"), str)
            and any(keys <= row.keys() for keys in _LABEL_KEYS)):
        return LABELS
    return None
