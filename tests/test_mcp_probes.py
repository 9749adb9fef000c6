"""The MCP world's state probes (sandbox/mcp_probes.py) on real git repositories: the tables they
read, the deterministic build, and what a change removed for good.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def probes() -> Any:
    spec = importlib.util.spec_from_file_location("tooleffect_test_mcp_probes", REPO / "sandbox" / "mcp_probes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SETUP = [{"step": 1, "op": "init", "name": "main"},
         {"step": 2, "op": "write", "path": "a.txt", "content": "one\n"},
         {"step": 3, "op": "commit", "content": "First"},
         {"step": 4, "op": "write", "path": "a.txt", "content": "two\n"},
         {"step": 5, "op": "commit", "content": "Second"},
         {"step": 6, "op": "git", "args": ["branch", "side"]}]


def _repo(probes: Any, root: Path) -> dict[str, str]:
    env = probes.git_env({"PATH": os.environ["PATH"]}, str(root.parent))
    probes.build(root, SETUP, env, str(root.parent))
    return env


def test_two_builds_of_one_seed_are_the_same_repository(probes: Any, tmp_path: Path) -> None:
    a, b = tmp_path / "a" / "repo", tmp_path / "b" / "repo"
    env = _repo(probes, a)
    _repo(probes, b)
    first, second = probes.probe_git(a, env), probes.probe_git(b, env)
    assert first == second
    assert [c["subject"] for c in first["commits"]] == ["Second", "First"]
    assert first["head"] == [{"name": "HEAD", "ref": "refs/heads/main", "commit": first["refs"][0]["commit"]}]
    assert {r["name"] for r in first["refs"]} == {"refs/heads/main", "refs/heads/side"}
    assert first["worktree"] == [{"path": "a.txt", "blob": probes.blob_id(b"two\n"), "size": 4}]
    assert first["index"] == [{"path": "a.txt", "stage": 0, "mode": "100644", "blob": probes.blob_id(b"two\n")}]


def test_what_a_change_removed_for_good(probes: Any, tmp_path: Path) -> None:
    root = tmp_path / "repo"
    env = _repo(probes, root)

    def change(*git: str, write: str | None = None) -> list[str]:
        contents: dict[str, bytes] = {}
        before = probes.probe_git(root, env, contents)
        if write is not None:
            (root / "a.txt").write_text(write)
        if git:
            subprocess.run(["git", *git], cwd=root, env=env, check=True, capture_output=True)
        return list(probes.lost("git", root, env, before, probes.probe_git(root, env), contents))

    assert change("checkout", "--quiet", "HEAD~1") == []  # the files are in a commit still
    assert change("checkout", "--quiet", "main") == []
    gone = "is in no commit, index entry or file any more"
    assert change(write="two\nthree\n") == []  # appended: the old content is the new one's start
    appended, changed = probes.blob_id(b"two\nthree\n")[:7], probes.blob_id(b"changed\n")[:7]
    assert change(write="changed\n") == [f"worktree a.txt (blob {appended}) {gone}"]
    assert change("checkout", "--quiet", "--", "a.txt") == [f"worktree a.txt (blob {changed}) {gone}"]
    subprocess.run(["git", "branch", "-D", "side"], cwd=root, env=env, check=True, capture_output=True)
    second = probes.probe_git(root, env)["refs"][0]["commit"]
    lines = change("reset", "--quiet", "--hard", "HEAD~1")  # Second is reachable from no ref any more
    two = probes.blob_id(b"two\n")[:7]
    assert lines == [f"worktree a.txt (blob {two}) {gone}", f"index a.txt (blob {two}) {gone}",
                     f"ref refs/heads/main moved to {probes.probe_git(root, env)['refs'][0]['commit'][:7]}: commit "
                     f"{second[:7]} is reachable from no ref"]
