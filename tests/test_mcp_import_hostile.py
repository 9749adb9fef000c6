"""`tooleffect import mcp` and `tooleffect sandbox probe` against servers that answer as hostile or
broken ones would (tests/fixtures/mcp_hostile_server.py, a real process over stdio): what reaches
the terminal and the family's files."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pytest_tooleffect.cli import main
from tests.conftest import REPO

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
HOSTILE = [sys.executable, str(REPO / "tests" / "fixtures" / "mcp_hostile_server.py")]


def _import(capsys: pytest.CaptureFixture[str], out: Path, *server: str, timeout: str = "20") -> tuple[int, str, str]:
    status = main(["import", "mcp", "--out", str(out), "--timeout", timeout, "--", *HOSTILE, *server])
    got, err = capsys.readouterr()
    return status, got, err


def test_url_credentials_are_never_written_nor_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:  # a port nothing listens on: the server is down
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://alice:S3CRETPW@127.0.0.1:{port}/mcp?api_key=TOPSECRET"
    status = main(["import", "mcp", "--out", str(tmp_path / "x"), "--timeout", "5", "--url", url])
    out, err = capsys.readouterr()
    assert status == 2 and "S3CRETPW" not in out + err and "TOPSECRET" not in out + err
    assert f"http://alice:<redacted>@127.0.0.1:{port}/mcp?api_key=<redacted>" in err

    from pytest_tooleffect.data.importers.mcp import Catalog, import_mcp
    from pytest_tooleffect.formats import McpServerInfo, McpSource

    info = McpServerInfo(name="s", version="1")
    import_mcp(tmp_path / "y", Catalog(info, ({"name": "a"},), 1),
               McpSource(server=info, transport="streamable-http", url=url))
    text = "".join(p.read_text() for p in (tmp_path / "y").iterdir())
    assert "S3CRETPW" not in text and "TOPSECRET" not in text
    assert yaml.safe_load((tmp_path / "y" / "family.yaml").read_text())["mcp"]["url"] == (
        f"http://alice:<redacted>@127.0.0.1:{port}/mcp?api_key=<redacted>")


@pytest.mark.parametrize("mode", ["error", "stderr"])
def test_a_servers_escapes_are_shown_as_escapes(mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = _import(capsys, tmp_path / "x", mode)
    assert status == 2 and "\x1b" not in err and "\x07" not in err
    assert "\\x1b]0;PWNED\\x07\\x1b[2J" in err


def test_the_probe_pass_shows_a_crashed_servers_stderr_escaped(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    _probe_family(tmp_path, "poke")
    assert main(["sandbox", "probe", str(tmp_path), "--provider", "local"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\\x1b]0;PWNED\\x07" in err


def _probe_family(folder: Path, probe: str) -> None:
    (folder / "tools.json").write_text(json.dumps([{"name": "poke", "description": "d"}]))
    (folder / "family.yaml").write_text(yaml.safe_dump({"name": "h", "tools_file": "tools.json", "sandbox": {
        "world": "mcp", "mcp": {"command": [*HOSTILE, "call_crash"], "probe": "files", "timeout_s": 20,
                                "probe_pass": [{"name": "poke"}, {"name": probe}]}}}))


def test_a_probe_of_a_tool_the_family_lacks_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _probe_family(tmp_path, "git_nosuch")
    assert main(["sandbox", "probe", str(tmp_path), "--provider", "local"]) == 2
    out, err = capsys.readouterr()
    assert "hints hold" not in out
    assert f"{tmp_path / 'family.yaml'}: sandbox.mcp.probe_pass[1].name: 'git_nosuch' is not a tool of the family" in err


def test_a_symlinked_output_is_replaced_never_written_through(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fam"
    assert _import(capsys, out, "badann")[0] == 0
    kept = {}
    for name in ("tools.json", "family.yaml"):  # files outside --out, the family file still one this import wrote
        victim = tmp_path / f"victim-{name}"
        kept[name] = (out / name).read_text() + ("# mine\n" if name == "family.yaml" else "")
        victim.write_text(kept[name])
        (out / name).unlink()
        (out / name).symlink_to(victim)
    assert _import(capsys, out, "none")[0] == 0
    for name in ("tools.json", "family.yaml"):
        assert (tmp_path / f"victim-{name}").read_text() == kept[name]
        assert not (out / name).is_symlink()
    assert json.loads((out / "tools.json").read_text()) == []


def test_a_hint_not_of_its_type_is_read_as_not_declared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, got, err = _import(capsys, tmp_path / "x", "badann")
    assert status == 0
    [tool] = json.loads((tmp_path / "x" / "tools.json").read_text())
    assert tool["annotations"] == {"idempotentHint": True}
    summary = json.loads(got)
    assert summary["ignored_hints"] == ['a: readOnlyHint="yes"', "a: destructiveHint=0"]
    assert summary["classes"] == {"read": 0, "write": 0, "destructive": 1}
    assert 'read as not declared (MCP\'s worst-case default): a: readOnlyHint="yes"; a: destructiveHint=0' in err
    assert "# Hints not of MCP's type, read as not declared:" in (tmp_path / "x" / "family.yaml").read_text()


def test_no_tools_is_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    status, got, err = _import(capsys, tmp_path / "x", "none")
    assert status == 0 and json.loads(got)["tools"] == 0
    assert "warning: the server listed no tools" in err


@pytest.mark.parametrize(("mode", "said"), [
    ("garbage", "the MCP SDK said: Failed to parse JSONRPC message from server (ValidationError: Invalid JSON"),
    ("nested", "no complete tool list within 3 s (an answer could not be parsed); the MCP SDK said: Failed to parse"),
])
def test_what_the_sdk_logs_is_in_the_one_line(mode: str, said: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest_tooleffect.cli", "import", "mcp", "--out", str(tmp_path / "x"),
                           "--timeout", "3", "--", *HOSTILE, mode], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and said in lines[0] and "Traceback" not in done.stderr, done.stderr
    assert "For further information visit" not in done.stderr


def test_ctrl_c_while_the_server_hangs_is_one_line(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "pytest_tooleffect.cli", "import", "mcp", "--out",
                             str(tmp_path / "x"), "--timeout", "60", "--", *HOSTILE, "hang"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    time.sleep(3)  # connected and waiting for tools/list (a late signal only finds it still waiting)
    os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the server gets it too
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.strip() == "tooleffect import: interrupted" and "Traceback" not in err


def test_an_sse_answer_that_is_not_json_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # every request answered with an SSE event that is not JSON
            body = b"event: message\ndata: {not json\n\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        status = main(["import", "mcp", "--out", str(tmp_path / "x"), "--timeout", "10", "--url",
                       f"http://127.0.0.1:{server.server_address[1]}/mcp"])
    finally:
        server.shutdown()
        server.server_close()
    err = capsys.readouterr().err
    assert status == 2 and len(err.splitlines()) == 1
    assert "Failed to parse SSE message" in err and "the MCP SDK said: Error parsing SSE message" in err
    assert "For further information visit" not in err
