r"""What a case file's name or an invalid case's id holds reaches pytest's node ids escaped.

pytest prints node ids and names raw (``ERROR at setup of …``, ``FAILED path::name``, the short
summary): an invalid case id or a case file named with an OSC window title, a screen clear, NUL, a
C1 control or a bidirectional override would reach the terminal as it is.  The plugin names such a
node by the shown form of the text (``a\x1b[2J``), unique (`` #2`` when another node has that
name), the same in every xdist process; a node named by ordinary text keeps its id.
"""

from __future__ import annotations

import json
import os

import pytest

from pytest_tooleffect.collect.ids import node_names
from pytest_tooleffect.options import OPT_REPORT
from tests.demo_family import CASES, msg, write_demo
from tests.test_display import raw

#: invalid case ids: an OSC title, a bidirectional override and a screen clear; a NUL; a C1 CSI;
#: one that is ordinary text and the shown form of the NUL one
IDS = ["a\x1b]0;PWNED\x07\u202eb\x1b[2J", "a\x00b", "c\x9b2J", "a\\x00b"]
FILE = "c\x1b]0;PWN\x07.jsonl"
FIFO = "p\x1b[2J.jsonl"


def _invalid(cid: str) -> str:
    return json.dumps({"id": cid, "placement": {"step": 0, "run_length": 2, "bucket": "first"},
                       "messages": msg("thanks"), "label": {"valid_actions": [{"tool": None}]}, "source": "authored"})


def _node_ids(out: str) -> dict[str, str]:
    """By node id, its outcome, from the short summary ``-rA`` prints."""
    ids = {}
    for line in out.splitlines():
        word, _, rest = line.partition(" ")
        if word in ("PASSED", "FAILED", "ERROR", "XFAIL") and rest.startswith("cases/"):
            ids[rest.split(" - ")[0]] = word
    return ids


@pytest.mark.parametrize("workers", [0, 2])
def test_hostile_ids_and_file_names_reach_node_ids_escaped(pytester: pytest.Pytester, workers: int) -> None:
    """Break-it rows 43, 44, 47 and 245: the ids and the file name printed raw by pytest."""
    fam = write_demo(pytester.path, [CASES[0]], extra_lines=[_invalid(cid) for cid in IDS])
    (fam / FILE).write_text(json.dumps(CASES[4]) + "\n")  # a decision that fails: a FAILED line
    (fam / "c\\x1b]0;PWN\\x07.jsonl").write_text(json.dumps(CASES[3]) + "\n")  # the shown name, as a file's own
    os.mkfifo(fam / FIFO)
    result = pytester.runpytest("cases/", "-n", str(workers), "-rA", f"{OPT_REPORT}=r.json")
    out = result.stdout.str()
    assert raw(out) == []
    result.assert_outcomes(passed=2, failed=1, errors=len(IDS) + 1)
    assert _node_ids(out) == {
        "cases/demo/cases.jsonl::a-read[replay]": "PASSED",  # ordinary ids and files: pytest's own node ids
        "cases/demo/c/x1b]0;PWN/x07.jsonl::d-stop[replay]": "PASSED",  # pytest reads a backslash as a separator
        "cases/demo/c\\x1b]0;PWN\\x07.jsonl #2::e-redundant[replay]": "FAILED",
        "cases/demo/cases.jsonl::a\\x1b]0;PWNED\\x07\\u202eb\\x1b[2J[invalid]": "ERROR",
        "cases/demo/cases.jsonl::a\\x00b[invalid]": "ERROR",
        "cases/demo/cases.jsonl::a\\x00b #2[invalid]": "ERROR",
        "cases/demo/cases.jsonl::c\\x9b2J[invalid]": "ERROR",
        "cases/demo/family.yaml::p\\x1b[2J.jsonl[not a file]": "ERROR",
    }
    assert "ERROR at setup of a\\x1b]0;PWNED\\x07\\u202eb\\x1b[2J[invalid] (invalid)" in out
    report = json.loads((pytester.path / "r.json").read_text())  # the report keeps the ids whole
    assert sorted(c["case_id"] for f in report["invalid"] for c in f["cases"] if c["case_id"]) == sorted(IDS)


def test_node_names_keep_ordinary_text_and_make_escaped_names_unique() -> None:
    names = node_names(["b\x1b", "a-read", "b\\x1b", "b\x1b", "b\\x1b #2"], taken=lambda n: n == "b\\x1b #3")
    assert names == {"a-read": "a-read", "b\\x1b": "b\\x1b", "b\\x1b #2": "b\\x1b #2", "b\x1b": "b\\x1b #4"}
