"""An output never replaces an existing file the plugin did not write (a Makefile, a README, a
workflow) unless ``--force`` is given; the plugin's own outputs (recognised by their content) are
rewritten as before.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_tooleffect.cli import main
from pytest_tooleffect.options import OPT_HTML, OPT_RECORDS, OPT_REPORT, OPT_SUMMARY_MD
from tests.demo_family import write_demo

PROJECT_FILES = {"Makefile": "all:\n\techo hi\n", "requirements.txt": "flask\n", "README.md": "# my project\n",
                 ".github/workflows/ci.yml": "on: push\n", "Dockerfile": "FROM python:3.12\n"}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo family, its record log and label files, beside a project's own files."""
    root = tmp_path_factory.mktemp("project")
    write_demo(root)
    subprocess.run([sys.executable, "-m", "pytest", "cases/", "-p", "no:cacheprovider", "-q",
                    f"{OPT_RECORDS}=records.jsonl"], cwd=root, capture_output=True, check=False)
    assert (root / "records.jsonl").stat().st_size > 0
    return root


def _write_project_files(root: Path) -> None:
    for name, text in PROJECT_FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


COMMANDS = [
    (["merge", "labels.jsonl", "--out", ".github/workflows/ci.yml"], ".github/workflows/ci.yml"),
    (["label", "export", "cases/demo/cases.jsonl", "--out", "requirements.txt"], "requirements.txt"),
    (["label", "import", "cases/demo/cases.jsonl", "--labels", "labels.jsonl", "--out", "requirements.txt"],
     "requirements.txt"),
    (["html", "records.jsonl", "--out", "Makefile"], "Makefile"),
    (["html", "records.jsonl", "--out", "README.md"], "README.md"),
    (["baseline", "save", "records.jsonl", "--out", "Dockerfile", "--allow-incomplete"], "Dockerfile"),
]


@pytest.mark.parametrize(("argv", "target"), COMMANDS, ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_a_command_refuses_to_replace_a_project_file_and_forces_on_request(
        project: Path, argv: list[str], target: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``tooleffect html LOG --out Makefile`` replaced the Makefile and exited 0 (only .py, .toml, …
    were refused).  Now exit 2, one line naming the option, the file and ``--force``, the file intact;
    with ``--force`` it is replaced.
    """
    monkeypatch.chdir(project)
    _write_project_files(project)
    if not (project / "labels.jsonl").exists():
        assert main(["label", "export", "cases/demo/cases.jsonl", "--out", "labels.jsonl"]) == 0
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--out {target}" in err[0] and "--force" in err[0], err
    assert (project / target).read_text() == PROJECT_FILES[target]
    written = 1 if argv[0] == "html" else 0  # a demo item has no record: the page is written, and says incomplete
    assert main([*argv, "--force"]) == written
    assert (project / target).read_text() != PROJECT_FILES[target]
    assert main(argv) == written  # now the command's own output: rewritten without --force


@pytest.mark.parametrize("argv", [
    ["html", "records.jsonl", "--out", "page.html"],
    ["baseline", "save", "records.jsonl", "--out", "base.json", "--allow-incomplete"],  # a demo item has no record
    ["label", "export", "cases/demo/cases.jsonl", "--out", "export.jsonl"],
    ["merge", "export.jsonl", "--out", "merged.jsonl"],
], ids=" ".join)
def test_a_command_rewrites_its_own_output_without_force(project: Path, argv: list[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    if not (project / "export.jsonl").exists():
        assert main(["label", "export", "cases/demo/cases.jsonl", "--out", "export.jsonl"]) == 0
    written = 1 if argv[0] == "html" else 0  # a demo item has no record: the page is written, and says incomplete
    assert main(argv) == written
    assert main(argv) == written


@pytest.mark.parametrize("option", [OPT_REPORT, OPT_SUMMARY_MD, OPT_HTML, OPT_RECORDS])
def test_a_run_refuses_to_write_its_outputs_over_a_project_file(project: Path, option: str) -> None:
    """The run's outputs go through the same check: ``--tooleffect-report=Makefile`` is a usage error
    naming the option and the file, and the Makefile is kept.
    """
    _write_project_files(project)
    run = subprocess.run([sys.executable, "-m", "pytest", "cases/", "-p", "no:cacheprovider", "-q",
                          f"{option}=Makefile"], cwd=project, capture_output=True, text=True, check=False)
    assert run.returncode == pytest.ExitCode.USAGE_ERROR, run.stdout + run.stderr
    assert f"ERROR: {option} " in run.stderr, run.stderr
    assert "Makefile: exists and is not a file tooleffect writes" in run.stderr, run.stderr
    assert (project / "Makefile").read_text() == PROJECT_FILES["Makefile"]


def test_a_run_rewrites_its_own_outputs(project: Path) -> None:
    """The record log, report, summary and page of an earlier run, and the JUnit XML and
    pytest-json-report file written beside them, are recognised and rewritten.
    """
    args = [f"{OPT_RECORDS}=again.jsonl", f"{OPT_REPORT}=again.json", f"{OPT_SUMMARY_MD}=again.md",
            f"{OPT_HTML}=again.html", "--junitxml=again.xml", "--json-report", "--json-report-file=again-pytest.json"]
    for _ in range(2):
        run = subprocess.run([sys.executable, "-m", "pytest", "cases/", "-p", "no:cacheprovider", "-q", *args],
                             cwd=project, capture_output=True, text=True, check=False)
        assert run.returncode not in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.INTERNAL_ERROR), run.stderr
        assert "exists and is not a file tooleffect writes" not in run.stderr
    assert all((project / a.split("=", 1)[1]).stat().st_size > 0 for a in args if "=" in a)
