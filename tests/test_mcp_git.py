"""The shipped mcp-git family: mcp-server-git (pinned, in the sandbox image) as the world, in Docker."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_tooleffect.options import OPT_RECORDS, OPT_REPORT
from tests.conftest import REPO

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def _records(path: Path) -> dict[str, dict[str, Any]]:
    return {r["case_id"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_the_mcp_git_family_replays_its_decisions_against_the_real_server_in_docker(pytester: pytest.Pytester) -> None:
    shutil.copytree(REPO / "cases" / "mcp-git", pytester.path / "cases" / "mcp-git")
    (pytester.path / "oracle").mkdir()
    shutil.copy(REPO / "oracle" / "mcp-git.yaml", pytester.path / "oracle" / "mcp-git.yaml")
    result = pytester.runpytest("cases/", "-p", "no:cacheprovider", OPT_RECORDS, "rec.jsonl", OPT_REPORT, "report.json")
    result.assert_outcomes(passed=38, failed=16)
    recs = _records(pytester.path / "rec.jsonl")
    assert len(recs) == 54 and all(r["sandbox"]["provider"] == "docker" for r in recs.values())
    commit = recs["wr-commit-01"]
    assert commit["effect"]["passed"]
    [made] = commit["effect"]["diff"]["commits"]["inserted"]
    assert made["subject"] == "Reject negative stock levels"
    assert commit["steps"][0]["calls"][0]["content"].startswith("Changes committed successfully with hash ")
    # the agent's git_reset unstaged stock.py too: its decision and its effect fail
    reset = recs["rs-02"]
    assert reset["verdict"]["kind"] == "forbidden" and reset["effect"]["kind"] == "forbidden_effect"
    # a branch made off main instead of feature/csv-export: wrong argument, and the wrong commit
    assert recs["wr-branch-02"]["effect"]["kind"] == "effect_missing"
    assert all("annotation_violations" not in r for r in recs.values())  # mcp-server-git's hints hold
    block = json.loads((pytester.path / "report.json").read_text())["blocks"][0]
    assert block["family"] == "mcp-git" and block["effects"]["n"] == 54
    assert block["effects"]["annotation_violations"] is None


def test_the_probe_pass_finds_mcp_server_gits_hints_hold(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_tooleffect.cli import main

    assert main(["sandbox", "probe", str(REPO / "cases" / "mcp-git")]) == 0
    out = capsys.readouterr().out
    assert "  git_status ×2 [readOnlyHint, idempotentHint]: no change · hints hold" in out
    assert "  git_reset ×2 [destructiveHint, idempotentHint]: ~ index README.md: blob: a7792df → a397bc0 · hints hold" in out
    assert out.rstrip().endswith("annotation violations: 0")
