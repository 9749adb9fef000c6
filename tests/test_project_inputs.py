"""No output replaces a file the project reads as input unasked: every command with an ``--out``
goes through one check (``commands.check_command_outputs``), which refuses the case, family and
rules files of the project's families (under ``--cases``, else ``./cases``, and in the output's own
folder), a family folder an import did not write (unless ``--force``), and, for a run's outputs
and the commands whose output is no case file, a new file that the next run would collect as a
case file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.options import OPT_HTML, OPT_RECORDS, OPT_REPORT
from tests.demo_family import CASES, write_demo
from tests.test_bfcl_import import ANSWER, ENTRY

ROW = {"id": "r1", "messages": [{"role": "user", "content": "hi"}], "tools": [],
       "label": {"valid_actions": [{"tool": None}]}}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project (cases/demo, oracle/demo.yaml) as the current folder, with a label file."""
    write_demo(tmp_path, [CASES[3]])
    (tmp_path / "lab.jsonl").write_text(json.dumps({"id": "d-stop", "valid_actions": [{"tool": None}],
                                                    "labelled_by": "x"}) + "\n")
    (tmp_path / "rows.jsonl").write_text(json.dumps(ROW) + "\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


REPLACING = [  # break-it rows 214, 219, 258: argv, the message's start
    (["label", "import", "cases/demo/cases.jsonl", "--labels", "lab.jsonl", "--out", "cases/demo/family.yaml"],
     "tooleffect label import: --out cases/demo/family.yaml*: is the family file "
     "of the family in *cases/demo, which the project's runs read: writing --out there would replace it; give --out "
     "a path of its own"),
    (["merge", "lab.jsonl", "--out", "oracle/demo.yaml"],
     "tooleffect merge: --out oracle/demo.yaml*: is the oracle rules of the family in "
     "*cases/demo, which the project's runs read: writing --out there would replace it; give --out a path of its own"),
    (["import", "labelled-jsonl", "--input", "rows.jsonl", "--out", "cases/demo"],
     "tooleffect import: --out cases/demo: holds a family whose family.yaml was not written by `tooleffect import "
     "labelled-jsonl` (cases.jsonl, family.yaml); writing the family there would replace them; pass --force to "
     "replace them, or give --out another folder"),
    (["generate", "spec.yaml", "--out", "cases/demo"],
     "tooleffect generate: --out cases/demo: holds a family whose family.yaml was not written by `tooleffect "
     "generate` (cases.jsonl, family.yaml)*"),
    (["label", "export", "cases/demo/cases.jsonl", "--out", "cases/demo/to-label.jsonl"],
     "tooleffect label export: --out cases/demo/to-label.jsonl*: would be collected as a case file of the family in "
     "*/cases/demo: the next run would read the output as cases*"),
]


@pytest.mark.parametrize(("argv", "said"), REPLACING, ids=[" ".join(a[:2]) for a, _ in REPLACING])
def test_a_command_never_replaces_a_file_the_project_reads(
        project: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str) -> None:
    import fnmatch

    (project / "spec.yaml").write_text("family: {name: spec}\n")
    before = _bytes(project)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert fnmatch.fnmatch(err, said) and len(err.splitlines()) == 1, err
    assert _bytes(project) == before


def test_an_import_replaces_a_family_it_did_not_write_only_under_force(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["import", "labelled-jsonl", "--input", "rows.jsonl", "--out", "cases/demo"]
    assert main(argv) == 2
    assert main([*argv, "--force"]) == 0
    assert [json.loads(line)["id"] for line in (project / "cases" / "demo" / "cases.jsonl").read_text().splitlines()] \
        == ["r1"]
    assert main(["import", "labelled-jsonl", "--input", "rows.jsonl", "--out", "cases/new"]) == 0
    assert main(["import", "labelled-jsonl", "--input", "rows.jsonl", "--out", "cases/new"]) == 0  # its own: rebuilt


def test_a_bfcl_import_never_replaces_a_hand_authored_family(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Break-it row 122: --out proj/cases over a hand-authored cases/simple, replaced without a word."""
    data = tmp_path / "shared" / "datasets" / "bfcl"
    (data / "possible_answer").mkdir(parents=True)
    (data / "BFCL_v4_simple_python.json").write_text(json.dumps({"id": "simple_0", **ENTRY}) + "\n")
    (data / "possible_answer" / "BFCL_v4_simple_python.json").write_text(
        json.dumps({"id": "simple_0", "ground_truth": ANSWER}) + "\n")
    shared = tmp_path / "shared"
    proj = tmp_path / "proj"
    mine = write_demo(proj, [CASES[3]]).rename(proj / "cases" / "simple")
    before = _bytes(mine)
    argv = ["import", "bfcl", "--shared", str(shared), "--out", str(proj / "cases"), "--category", "simple"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--out {mine}: holds a family whose family.yaml was not written by `tooleffect import bfcl`" in err, err
    assert _bytes(mine) == before and sorted(p.name for p in (proj / "cases").iterdir()) == ["simple"]
    assert main([*argv, "--force"]) == 0
    assert "imported by `tooleffect import bfcl`" in (mine / "family.yaml").read_text()
    assert main(argv) == 0  # an earlier import of its own is rebuilt without --force


@pytest.mark.parametrize("option", [OPT_RECORDS, OPT_REPORT.replace("report", "summary-md")])
def test_a_run_output_the_next_run_would_collect_as_cases_is_refused(pytester: pytest.Pytester, option: str) -> None:
    """Break-it row 15: a record log written into a family's folder, collected by the next run as cases."""
    write_demo(pytester.path, [CASES[3]])
    result = pytester.runpytest("cases/", f"{option}=cases/demo/new.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {option} *cases/demo/new.jsonl: would be collected as a case file of the "
                                 "family in */cases/demo: the next run would read the output as cases; give "
                                 f"{option} a path outside the family's folder, or another name"])
    assert not (pytester.path / "cases" / "demo" / "new.jsonl").exists()
    pytester.runpytest("cases/", f"{OPT_HTML}=cases/demo/page.html").assert_outcomes(passed=1)  # never collected


def test_a_baseline_saved_into_a_family_folder_as_a_case_file_is_refused(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Break-it row 204: baseline save --out cases/demo/extra.jsonl became a case file."""
    log = project / "run.jsonl"
    log.write_text("")
    assert main(["baseline", "save", str(log), "--out", "cases/demo/extra.jsonl"]) == 2
    assert "would be collected as a case file of the family in" in capsys.readouterr().err
    assert not (project / "cases" / "demo" / "extra.jsonl").exists()
