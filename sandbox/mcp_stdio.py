"""A minimal MCP client over stdio (newline-delimited JSON-RPC 2.0), standard library only.

It runs inside the sandbox container beside ``service.py`` (whose Python has no third-party
package), starts the server as a child process, and speaks the part of MCP a world needs:
``initialize`` and ``notifications/initialized``, ``tools/list`` (every page) and
``tools/call``.  Requests the server sends (``roots/list``, ``ping``, ...) are answered; its
notifications are read and dropped (``notifications/tools/list_changed`` is remembered).

Every way the server can fail is a :class:`ServerFault` with a ``kind`` and the tail of the
server's standard error (at most :data:`STDERR_LIMIT` characters):

* ``crash``: the process exited or closed its standard output;
* ``hang``: no answer within the timeout (the process is then killed);
* ``malformed``: a line that is not JSON-RPC 2.0 (not JSON, no ``jsonrpc: "2.0"``, an answer
  with neither ``result`` nor ``error``, a result that is not an object);
* ``protocol``: a JSON-RPC error answer to a request (:class:`RpcError`; to ``tools/call`` it is
  MCP's refusal of the call, an unknown tool or invalid arguments, which the world hands the
  agent as the call's error answer, not a fault).

MCP stdio transport: https://modelcontextprotocol.io/specification/2025-06-18/basic/transports
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import tempfile
import threading
import time
from typing import Any

#: the protocol version this client asks for (the server answers with the one it speaks)
PROTOCOL_VERSION = "2025-06-18"
#: the longest tail of the server's standard error a fault carries, characters
STDERR_LIMIT = 2000
FAULT_KINDS = ("crash", "hang", "malformed", "protocol", "output_schema", "tools_changed")


class ServerFault(Exception):
    """The MCP server failed (see the module docstring for the kinds).

    Attributes:
        kind: one of :data:`FAULT_KINDS`.
        stderr: the tail of the server's standard error (bounded).
    """

    def __init__(self, kind: str, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.stderr = stderr


class RpcError(ServerFault):
    """A JSON-RPC error answer (``code``, ``message``): kind ``protocol``."""

    def __init__(self, message: str, stderr: str, code: Any, text: str) -> None:
        super().__init__("protocol", message, stderr)
        self.code = code
        self.text = text


class StdioServer:
    """One MCP server process and its session.

    Args:
        command: the program and its arguments.
        env: the environment of the child (``None``: this process's).
        cwd: its working directory (also where its standard error is kept, in an unlinked file).
        timeout_s: per request, seconds (a longer wait is a ``hang``).
    """

    def __init__(self, command: list[str], env: dict[str, str] | None, cwd: str | None, timeout_s: float) -> None:
        self.command = command
        self.timeout_s = timeout_s
        self._stderr = tempfile.TemporaryFile(dir=cwd)
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                                     env=env, cwd=cwd, close_fds=True)
        self._lines: queue.Queue[bytes] = queue.Queue()
        self._next_id = 0
        self.tools_changed = False
        self.server_info: dict[str, Any] = {}
        threading.Thread(target=self._read, daemon=True).start()

    # ------------------------------------------------------------------ transport

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(b"")  # end of stream

    def stderr_tail(self) -> str:
        """The last :data:`STDERR_LIMIT` characters the server wrote to standard error."""
        try:
            self._stderr.flush()
            size = self._stderr.seek(0, os.SEEK_END)
            self._stderr.seek(max(0, size - 4 * STDERR_LIMIT))
            text = self._stderr.read().decode(errors="replace")
        except (OSError, ValueError):
            return ""
        return text[-STDERR_LIMIT:]

    def fault(self, kind: str, message: str) -> ServerFault:
        """A :class:`ServerFault` carrying the stderr tail (the process is stopped first for a hang)."""
        if kind == "hang":
            self.stop()
        return ServerFault(kind, message, self.stderr_tail())

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.proc.poll() is None

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise self._crashed(f"{message.get('method')}: could not write to the server") from None

    def _crashed(self, what: str) -> ServerFault:
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            code = None
        status = f"exit status {code}" if code is not None else "still running, its output closed"
        return self.fault("crash", f"{what}: the server ended ({status})")

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request and wait for its answer's ``result``.

        Raises:
            ServerFault: the server crashed, hung, answered malformed JSON-RPC or an error.
        """
        self._next_id += 1
        rid = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        self._send(message)
        end = time.monotonic() + self.timeout_s
        while True:
            left = end - time.monotonic()
            try:
                line = self._lines.get(timeout=max(0.0, left))
            except queue.Empty:
                raise self.fault("hang", f"{method}: no answer within {self.timeout_s:g} s") from None
            if not line:
                raise self._crashed(method)
            if not line.strip():
                continue
            try:
                answer = json.loads(line)
            except ValueError:
                raise self.fault("malformed", f"{method}: the server wrote a line that is not JSON: "
                                 f"{line[:120]!r}") from None
            if not isinstance(answer, dict) or answer.get("jsonrpc") != "2.0":
                raise self.fault("malformed", f"{method}: not a JSON-RPC 2.0 message: {line[:120]!r}")
            if "method" in answer:  # the server's own request or notification
                self._answer_server(answer)
                continue
            if answer.get("id") != rid:
                continue  # an answer to a request given up on
            if "error" in answer:
                error = answer["error"]
                text = error.get("message") if isinstance(error, dict) else error
                code = error.get("code") if isinstance(error, dict) else None
                raise RpcError(f"{method}: the server answered an error: {text}", self.stderr_tail(), code, str(text))
            result = answer.get("result")
            if not isinstance(result, dict):
                raise self.fault("malformed", f"{method}: the answer has no result object: {line[:120]!r}")
            return result

    def _answer_server(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if method == "notifications/tools/list_changed":
            self.tools_changed = True
        if "id" not in message:
            return  # a notification
        if method == "roots/list":
            self._send({"jsonrpc": "2.0", "id": message["id"], "result": {"roots": []}})
        elif method == "ping":
            self._send({"jsonrpc": "2.0", "id": message["id"], "result": {}})
        else:
            self._send({"jsonrpc": "2.0", "id": message["id"],
                        "error": {"code": -32601, "message": f"method not found: {method}"}})

    # ------------------------------------------------------------------ session

    def initialize(self) -> dict[str, Any]:
        """Open the session; returns the server's ``serverInfo``."""
        result = self.request("initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                             "clientInfo": {"name": "tooleffect-sandbox", "version": "1"}})
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        info = result.get("serverInfo")
        self.server_info = info if isinstance(info, dict) else {}
        return self.server_info

    def list_tools(self) -> list[dict[str, Any]]:
        """Every tool the server lists (all pages)."""
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(100):
            result = self.request("tools/list", {"cursor": cursor} if cursor else None)
            page = result.get("tools")
            if not isinstance(page, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str)
                                                     for t in page):
                raise self.fault("malformed", "tools/list: the result's tools is not a list of named tools")
            tools += page
            cursor = result.get("nextCursor")
            if not cursor:
                return tools
        raise self.fault("malformed", "tools/list: more than 100 pages")

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """``tools/call``: the result (``content``, ``isError``, ``structuredContent``)."""
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def stop(self) -> None:
        """End the process (closed input, then terminated, then killed)."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=1.0)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stdin):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
