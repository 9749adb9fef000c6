"""`tooleffect import mcp`: real MCP servers from PyPI (mcp-server-git, mcp-server-time) and a small
unannotated server written with the SDK, listed over stdio and over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_tooleffect.cli import main
from pytest_tooleffect.collect.cases import case_label_hash, label_hash
from pytest_tooleffect.collect.family import FamilyError, load_family
from pytest_tooleffect.formats import Case
from pytest_tooleffect.oracle.hints import hints_of
from pytest_tooleffect.oracle.names import name_map
from tests.conftest import REPO

FIXTURES = REPO / "tests" / "fixtures"
GIT_READ_ONLY = {"git_status", "git_diff_unstaged", "git_diff_staged", "git_diff", "git_log", "git_show", "git_branch"}
GIT_WRITES = {"git_add", "git_commit", "git_create_branch", "git_checkout", "git_reset"}
HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A git repository with one commit (what mcp-server-git serves)."""
    path = tmp_path_factory.mktemp("repo")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-C", str(path)]
    subprocess.run([*git, "init", "-q"], check=True)
    (path / "README").write_text("hello\n")
    subprocess.run([*git, "add", "README"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], check=True)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_http(*server: str) -> Iterator[str]:
    """A real server behind the SDK's streamable-HTTP transport on a free port of 127.0.0.1: its URL."""
    port = _free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, str(FIXTURES / "mcp_http.py"), str(port), *server],
                            stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while True:  # ready when the port accepts a connection
            if proc.poll() is not None:
                log.seek(0)
                raise AssertionError(f"the HTTP server exited: {log.read().decode(errors='replace')[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP server did not start"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def git_url(repo: Path) -> Iterator[str]:
    yield from _serve_http("git", str(repo))


@pytest.fixture(scope="module")
def unannotated_url() -> Iterator[str]:
    yield from _serve_http("unannotated")


def _import(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any] | None, str]:
    status = main(["import", "mcp", *argv])
    out, err = capsys.readouterr()
    return status, (json.loads(out) if status == 0 else None), err


def _tools(out: Path) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in json.loads((out / "tools.json").read_text())}


def _family(out: Path) -> dict[str, Any]:
    data = yaml.safe_load((out / "family.yaml").read_text())
    assert isinstance(data, dict)
    return data


def test_git_over_stdio_writes_the_12_tools_with_their_annotations(
        repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The done-check: no --out, the family lands in cases/<server name>."""
    monkeypatch.chdir(tmp_path)
    status, summary, err = _import(capsys, "--", sys.executable, "-m", "mcp_server_git", "--repository", str(repo))
    assert status == 0, err
    out = tmp_path / "cases" / "mcp-git"
    tools = _tools(out)
    assert set(tools) == GIT_READ_ONLY | GIT_WRITES and len(tools) == 12
    for name, tool in tools.items():
        assert set(tool["annotations"]) >= set(HINTS), name  # every hint, MCP's key names verbatim
        assert tool["annotations"]["readOnlyHint"] is (name in GIT_READ_ONLY)
        assert tool["annotations"]["destructiveHint"] is (name == "git_reset")
        assert "mcp_name" not in tool and tool["parameters"]["type"] == "object"
    assert summary is not None and summary["tools"] == 12 and summary["unannotated"] == 0
    assert summary["classes"] == {"read": 7, "write": 4, "destructive": 1}
    mcp = _family(out)["mcp"]
    assert mcp == {"server": {"name": "mcp-git", "version": summary["server"]["version"]}, "transport": "stdio",
                   "command": [sys.executable, "-m", "mcp_server_git", "--repository", str(repo)],
                   "trust_annotations": False}
    loaded = load_family(out)
    assert loaded.family.mcp is not None and loaded.family.mcp.server.name == "mcp-git"
    assert loaded.tools_by_name["git_reset"].annotations.destructiveHint is True


def test_git_over_streamable_http_lists_the_same_catalog(
        repo: Path, git_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stdio, http = tmp_path / "stdio", tmp_path / "http"
    assert _import(capsys, "--out", str(stdio), "--", sys.executable, "-m", "mcp_server_git", "--repository",
                   str(repo))[0] == 0
    status, summary, err = _import(capsys, "--out", str(http), "--url", git_url)
    assert status == 0, err
    assert _tools(http) == _tools(stdio)
    assert _family(http)["mcp"] == {"server": _family(stdio)["mcp"]["server"], "transport": "streamable-http",
                                    "url": git_url, "trust_annotations": False}


def test_time_server_imports_as_a_read_only_catalog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, summary, err = _import(capsys, "--out", str(tmp_path / "t"), "--", sys.executable, "-m",
                                   "mcp_server_time", "--local-timezone", "UTC")
    assert status == 0, err
    tools = _tools(tmp_path / "t")
    assert set(tools) == {"get_current_time", "convert_time"}
    assert all(t["annotations"]["readOnlyHint"] is True for t in tools.values())
    assert all(t["outputSchema"]["type"] == "object" for t in tools.values())  # structured results: kept
    assert summary is not None and summary["classes"] == {"read": 2, "write": 0, "destructive": 0}


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_an_unannotated_catalog_reads_as_the_worst_case_and_every_page_is_listed(
        transport: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest) -> None:
    out = tmp_path / "u"
    where = (["--url", request.getfixturevalue("unannotated_url")] if transport == "http"
             else ["--", sys.executable, str(FIXTURES / "mcp_unannotated.py")])
    status, summary, err = _import(capsys, "--out", str(out), *where)
    assert status == 0, err
    assert summary is not None and summary["pages"] == 3 and summary["tools"] == 5  # two tools a page
    assert summary["unannotated"] == 5 and summary["classes"] == {"read": 0, "write": 0, "destructive": 5}
    assert "read 0, write 0, destructive 5; 5 of 5 declare no hint" in (out / "family.yaml").read_text()
    tools = json.loads((out / "tools.json").read_text())
    server_names = ["notes.add", "notes/remove", "lookup", "archive_" + "x" * 120, "count"]
    assert [t.get("mcp_name", t["name"]) for t in tools] == server_names
    # the project's one reversible mapping, not a second one
    assert [t["name"] for t in tools] == [name_map(server_names).out(n) for n in server_names]
    assert sum("mcp_name" in t for t in tools) == 3 and all(len(t["name"]) <= 64 for t in tools)
    assert next(t for t in tools if t["name"] == "lookup")["title"] == "Look a note up"
    loaded = load_family(out)
    for tool in loaded.tools:  # MCP's defaults: not read-only, destructive, not idempotent, open world
        hints = hints_of(tool.annotations)
        assert (hints.read_only, hints.destructive, hints.idempotent, hints.open_world) == (False, True, False, True)


def test_a_server_that_dies_is_one_error_with_its_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _import(capsys, "--out", str(tmp_path / "x"), "--", sys.executable, "-c",
                             "import sys; sys.stderr.write('no repository here'); sys.exit(3)")
    assert status == 2 and "its stderr ends: no repository here" in err and not (tmp_path / "x").exists()
    status, _, err = _import(capsys, "--out", str(tmp_path / "x"))
    assert status == 2 and "give the server's command after -- (stdio) or --url URL" in err


def test_import_again_keeps_the_policy_and_refuses_a_hand_written_folder(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t"
    argv = ["--out", str(out), "--", sys.executable, "-m", "mcp_server_time"]
    assert _import(capsys, *argv)[0] == 0
    family = _family(out)
    family["annotations"] = {"confirm_destructive": True}
    (out / "family.yaml").write_text("# Written by `tooleffect import mcp`.\n" + yaml.safe_dump(family))
    assert _import(capsys, *argv)[0] == 0
    assert _family(out)["annotations"] == {"confirm_destructive": True} and "mcp" in _family(out)
    (out / "family.yaml").write_text("# Written by `tooleffect import mcp`.\nname: [unclosed\n")
    status, _, err = _import(capsys, *argv)
    assert status == 2 and "is no longer valid YAML, so its other keys cannot be kept" in err
    hand = tmp_path / "hand"
    hand.mkdir()
    (hand / "family.yaml").write_text("name: hand\n")
    status, _, err = _import(capsys, "--out", str(hand), "--", sys.executable, "-m", "mcp_server_time")
    assert status == 2 and "--force" in err and (hand / "family.yaml").read_text() == "name: hand\n"


def test_import_again_keeps_the_users_comments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A user's comments in family.yaml (at the top, beside a key, inside the mcp: block, between
    keys) survive a re-import; the import's own header is written anew, once."""
    out = tmp_path / "t"
    argv = ["--out", str(out), "--", sys.executable, "-m", "mcp_server_time"]
    assert _import(capsys, *argv)[0] == 0
    first = (out / "family.yaml").read_text()
    header = [line for line in first.splitlines() if line.startswith("#")]
    assert header and first.startswith("# Written by `tooleffect import mcp`")
    edited = first.replace("\nname: ", "\n# our team's time tools, reviewed 2026-11\nname: ", 1)
    edited = edited.replace("\nmcp:\n", "\nsystem_prompt: Be brief.  # shorter than the default\n"
                            "# the server as we run it in CI\nmcp:\n", 1)
    edited = edited.replace("  transport: stdio\n", "  transport: stdio  # no HTTP server in CI\n", 1)
    edited += ("# destructive tools need the user's yes\nannotations:\n"
               "  confirm_destructive: true  # agreed with security\n")
    (out / "family.yaml").write_text(edited)
    assert _import(capsys, *argv)[0] == 0
    again = (out / "family.yaml").read_text()
    for comment in ("# our team's time tools, reviewed 2026-11\n", "  # shorter than the default\n",
                    "# the server as we run it in CI\nmcp:\n", "transport: stdio  # no HTTP server in CI\n",
                    "# destructive tools need the user's yes\nannotations:\n",
                    "confirm_destructive: true  # agreed with security\n"):
        assert again.count(comment) == 1, (comment, again)
    assert [line for line in again.splitlines() if line.startswith("# Written by")] == header[:1]
    assert again.startswith("# Written by `tooleffect import mcp`")  # still this import's: it may run again
    family = _family(out)
    assert family["annotations"] == {"confirm_destructive": True} and family["system_prompt"] == "Be brief."
    assert family["mcp"]["command"] == [sys.executable, "-m", "mcp_server_time"]
    assert family["tools_file"] == "tools.json" and load_family(out).family.name == "t"
    assert _import(capsys, *argv)[0] == 0 and (out / "family.yaml").read_text() == again  # a fixed point


def test_import_again_keeps_a_trust_set_for_this_server_and_resets_it_when_the_server_changed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``trust_annotations: true`` was the user's judgement of these hints: kept while the server and
    its tools are the same, back to false (said in one line) when they changed."""
    out = tmp_path / "t"
    argv = ["--out", str(out), "--", sys.executable, "-m", "mcp_server_time"]
    assert _import(capsys, *argv)[0] == 0
    text = (out / "family.yaml").read_text()
    (out / "family.yaml").write_text(text.replace("trust_annotations: false", "trust_annotations: true  # probed"))
    status, stdout, err = _import(capsys, *argv)
    assert status == 0 and stdout["trust"] == "kept" and "trust_annotations" not in err
    assert _family(out)["mcp"]["trust_annotations"] is True
    assert "trust_annotations: true  # probed" in (out / "family.yaml").read_text()
    tools = json.loads((out / "tools.json").read_text())
    tools[0]["annotations"]["readOnlyHint"] = False  # as the server declared it before: a hint changed since
    (out / "tools.json").write_text(json.dumps(tools))
    status, stdout, err = _import(capsys, *argv)
    assert status == 0 and stdout["trust"] == "reset"
    assert "trust_annotations went back to false" in err and _family(out)["mcp"]["trust_annotations"] is False
    status, stdout, err = _import(capsys, *argv)  # false stays false
    assert status == 0 and stdout["trust"] == "default" and "trust_annotations" not in err


CASE = {"id": "c1", "placement": {"step": 0, "run_length": 1, "bucket": "first"},
        "messages": [{"role": "user", "content": "What time is it in Paris?"}], "source": "authored",
        "label": {"valid_actions": [{"tool": "get_current_time", "args": {"timezone": "Europe/Paris"}}]}}


def test_a_changed_hint_or_catalog_is_a_changed_label_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t"
    assert _import(capsys, "--out", str(out), "--", sys.executable, "-m", "mcp_server_time")[0] == 0
    case = Case.model_validate(CASE)
    before = load_family(out)
    first = case_label_hash(case, before)
    assert first != label_hash(case.label)  # the catalog is in an MCP family's label hash
    assert case_label_hash(case.model_copy(update={"confirmed": True}), before) != first
    tools = json.loads((out / "tools.json").read_text())
    tools[1]["annotations"]["readOnlyHint"] = False  # the server changed one hint
    (out / "tools.json").write_text(json.dumps(tools))
    after = load_family(out)
    assert case_label_hash(case, after) != first and after.rules_fingerprint != before.rules_fingerprint
    tools[1]["annotations"]["readOnlyHint"] = True
    tools[1]["description"] += " (v2)"  # ... or one description
    (out / "tools.json").write_text(json.dumps(tools))
    assert case_label_hash(case, load_family(out)) not in (first, case_label_hash(case, after))
    tools[1]["description"] = tools[1]["description"].removesuffix(" (v2)")
    (out / "tools.json").write_text(json.dumps(tools))
    assert case_label_hash(case, load_family(out)) == first  # the same catalog: the same label set


@pytest.mark.parametrize(("block", "message"), [
    ({"annotations": {"weights": {"read": 3, "write": 2}}}, "weights must not decrease"),
    ({"annotations": {"weights": {"read": 0}}}, "annotations.weights.read: a weight is a number > 0"),
    ({"annotations": {"confirm": True}}, "annotations.confirm: unknown key (known: confirm_destructive, weights)"),
    ({"mcp": {"server": {"name": "s"}, "transport": "stdio", "url": "http://127.0.0.1:1/mcp"}},
     "transport stdio names the server's command"),
])
def test_a_bad_policy_is_refused_naming_the_file_and_field(tmp_path: Path, block: dict[str, Any],
                                                           message: str) -> None:
    (tmp_path / "family.yaml").write_text(yaml.safe_dump({"name": "f", **block}))
    with pytest.raises(FamilyError) as err:
        load_family(tmp_path)
    assert str(tmp_path / "family.yaml") in str(err.value) and message in str(err.value)
