"""Case and family files are regular files: one that is a named pipe, a device or a link to one is
an error naming it (never left out in silence, never waited on); and a record log that is a hard
link is written as a new file, so another run's log under its other name keeps its records.
"""

from __future__ import annotations

import json
import os
import time

import pytest

from pytest_tooleffect.options import OPT_RECORDS, OPT_REPORT
from tests.demo_family import CASES, write_demo

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")


def _report(pytester: pytest.Pytester) -> dict:
    return json.loads((pytester.path / "r.json").read_text())


@pytest.mark.parametrize("workers", ["0", "2"])
@pytest.mark.parametrize("special", ["fifo", "dev-zero", "dangling"])
def test_a_case_file_that_is_not_a_regular_file_is_an_error_naming_it(
        pytester: pytest.Pytester, special: str, workers: str) -> None:
    """Break-it rows 275 and 276: a case file linked to /dev/zero, or a FIFO, left out in silence
    and the report "complete"."""
    fam = write_demo(pytester.path, [CASES[3]])
    odd = fam / "z.jsonl"
    if special == "fifo":
        os.mkfifo(odd)
    else:
        odd.symlink_to("/dev/zero" if special == "dev-zero" else fam / "gone.jsonl")
    kind = {"fifo": "a named pipe (FIFO)", "dev-zero": "a character device", "dangling": "a symbolic link to nothing"}
    start = time.monotonic()
    result = pytester.runpytest("cases/", f"{OPT_REPORT}=r.json", "-n", workers, "-rE")
    assert time.monotonic() - start < 60
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([f"*cases/demo/z.jsonl: is {kind[special]}, not a case file: a case file is a "
                                 "regular file*"])
    report = _report(pytester)
    assert report["status"] == "incomplete"
    assert [c["file"] for f in report["invalid"] for c in f["cases"]] == [str(odd)]


def test_an_ignored_special_case_file_is_left_alone(pytester: pytest.Pytester) -> None:
    fam = write_demo(pytester.path, [CASES[3]])
    os.mkfifo(fam / "p.jsonl")
    pytester.runpytest("cases/", "--ignore=cases/demo/p.jsonl").assert_outcomes(passed=1)


@pytest.mark.parametrize("special", ["fifo", "dev-zero"])
def test_a_family_file_that_is_not_a_regular_file_is_the_familys_error(
        pytester: pytest.Pytester, special: str) -> None:
    """Break-it row 277: family.yaml a FIFO nobody writes to: "no tests ran", no word why."""
    fam = write_demo(pytester.path, [CASES[3]])
    (fam / "family.yaml").unlink()
    if special == "fifo":
        os.mkfifo(fam / "family.yaml")
    else:
        (fam / "family.yaml").symlink_to("/dev/zero")
    what = "a named pipe (FIFO)" if special == "fifo" else "a character device"
    result = pytester.runpytest("cases/", f"{OPT_REPORT}=r.json")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*cases/demo/family.yaml: is {what}, not a file to read: a case or family file "
                                 "is a regular file*"])
    assert _report(pytester)["status"] == "incomplete"


def test_an_oracle_rules_file_that_is_a_named_pipe_is_refused_unread(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, [CASES[3]])
    rules = pytester.path / "oracle" / "demo.yaml"
    rules.unlink()
    os.mkfifo(rules)
    result = pytester.runpytest("cases/")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*family.yaml: oracle *oracle/demo.yaml: cannot read: is a named pipe (FIFO), not a file to "
                                 "read: a rules file is a regular file*"])


def test_a_record_log_that_is_a_hard_link_is_written_as_a_new_file(pytester: pytest.Pytester) -> None:
    """Break-it row 29: a second run's log a hard link to the log a first run is writing: both
    wrote one inode, the first run's records gone and a torn line at the end."""
    write_demo(pytester.path, [CASES[3]])
    first = pytester.path / "first.jsonl"
    first.write_text('{"case_id": "a record of another run", "class": "single"}\n')
    os.link(first, pytester.path / "hl.jsonl")
    pytester.runpytest("cases/", f"{OPT_RECORDS}=hl.jsonl").assert_outcomes(passed=1)
    assert first.read_text() == '{"case_id": "a record of another run", "class": "single"}\n'
    assert [json.loads(line)["case_id"] for line in (pytester.path / "hl.jsonl").read_text().splitlines()] == [
        CASES[3]["id"]]
    assert os.stat(first).st_nlink == 1 and os.stat(pytester.path / "hl.jsonl").st_nlink == 1
