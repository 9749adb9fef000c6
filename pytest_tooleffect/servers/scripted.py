"""A scripted model server on 127.0.0.1: the default test double for a model.

It speaks three wire formats over real HTTP, so litellm's own client code runs end to end:

* OpenAI chat completions: ``POST /v1/chat/completions`` (``openai/<name>`` with
  ``api_base=server.base_url``);
* Anthropic messages: ``POST /v1/messages`` (``anthropic/<name>`` with
  ``api_base=server.root_url``);
* Gemini ``generateContent``: ``POST /v1beta/models/<name>:generateContent``.

``GET /v1/models`` lists the server's *models* (OpenAI's list format); any other ``GET`` gets a
404 with an OpenAI error body.  The script answers whatever model a request names.  A request body
is read by its ``Content-Length`` or in chunks (``Transfer-Encoding: chunked``); one that cannot
be read (a length that is not one, two lengths, a chunk size that is not hex, chunk data without
its CRLF, a body that ends early), is not JSON (nested too deep, an integer of more than 4,300
digits included) or is not a JSON object gets a 400 with an OpenAI error body, as does a request
the script cannot answer; another transfer coding gets a 501.  A client that resets or leaves
its connection is no server error (nothing is printed).

Each request is answered by the *script*: a callable taking the decoded request body and
returning a :class:`Reply`, or a list of replies used in turn (the last one repeats).  A reply is
a decision (tool calls and/or text, with token usage, and the stop reason in the wire format's
own words: ``finish_reason``) or a fault: ``status`` (an HTTP error code, with ``error_message``
and ``headers`` such as ``Retry-After``), ``delay_s`` (answer late, e.g. past the client's
timeout), ``raw_body`` (an invalid body) or ``reset`` (close the connection with a TCP reset).
A callable script sees the request's headers under ``_headers`` (the API key a client sent is
there: ``Authorization``, ``x-api-key`` or ``x-goog-api-key``).  Example::

    with ScriptedServer([Reply(tool_calls=[("get_weather", '{"city": "Oslo"}')])]) as srv:
        litellm.completion(model="openai/test", api_base=srv.base_url, api_key="x", messages=[...])
"""

from __future__ import annotations

import json
import re
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["MAX_BODY_BYTES", "Reply", "ScriptedServer"]

#: the longest request body read (bytes): a request is messages and tools, far below this
MAX_BODY_BYTES = 64 * 1024 * 1024
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")  # a chunk size (RFC 9112 section 7.1: 1*HEXDIG)


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    Attributes:
        tool_calls: ``(name, arguments)`` pairs; ``arguments`` a JSON string or an object.
        text: the assistant's text (``None`` for none).
        prompt_tokens: usage reported to the client.
        completion_tokens: usage reported to the client.
        status: HTTP status to answer with (an error body for ≥ 400).
        delay_s: seconds to wait before answering (seconds).
        raw_body: bytes to send instead of a JSON body (an invalid response).
        finish_reason: the stop reason as the wire format spells it: OpenAI ``finish_reason``
            (``stop``, ``tool_calls``, ``length``, ``content_filter``), Anthropic ``stop_reason``
            (``end_turn``, ``tool_use``, ``max_tokens``, ``refusal``) or Gemini ``finishReason``
            (``STOP``, ``MAX_TOKENS``, ``SAFETY``, ``RECITATION``, …).  Default: the format's
            "called a tool" or "finished" value.
        drip_s: send the body one byte every ``drip_s`` seconds (a server that never quite answers).
        error_message: the ``error.message`` of an error body (status ≥ 400); default
            ``scripted failure <status>``.
        headers: extra response headers (``{"Retry-After": "1"}``).
        reset: close the connection with a TCP reset instead of answering.
    """

    tool_calls: Sequence[tuple[str, Any]] = ()
    text: str | None = None
    prompt_tokens: int = 100
    completion_tokens: int = 20
    status: int = 200
    delay_s: float = 0.0
    raw_body: bytes | None = None
    finish_reason: str | None = None
    drip_s: float = 0.0
    error_message: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    reset: bool = False


Script = Callable[[dict[str, Any]], Reply] | Sequence[Reply]


def _args_str(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _args_obj(arguments: Any) -> Any:
    if isinstance(arguments, str):
        try:
            return json.loads(arguments) if arguments else {}
        except json.JSONDecodeError:
            return {"_unparsable": arguments}
    return arguments


def openai_body(reply: Reply, model: str, n: int) -> dict[str, Any]:
    """An OpenAI chat-completion response body for ``reply``."""
    calls = [{"id": f"call_{n}_{i}", "type": "function", "function": {"name": name, "arguments": _args_str(args)}}
             for i, (name, args) in enumerate(reply.tool_calls)]
    message: dict[str, Any] = {"role": "assistant", "content": reply.text}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": f"chatcmpl-{n}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": message,
                     "finish_reason": reply.finish_reason or ("tool_calls" if calls else "stop")}],
        "usage": {"prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
                  "total_tokens": reply.prompt_tokens + reply.completion_tokens},
    }


def anthropic_body(reply: Reply, model: str, n: int) -> dict[str, Any]:
    """An Anthropic messages response body for ``reply``."""
    content: list[dict[str, Any]] = []
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for i, (name, args) in enumerate(reply.tool_calls):
        content.append({"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": _args_obj(args)})
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "model": model, "content": content,
            "stop_reason": reply.finish_reason or ("tool_use" if reply.tool_calls else "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": reply.prompt_tokens, "output_tokens": reply.completion_tokens}}


def gemini_body(reply: Reply, model: str, n: int) -> dict[str, Any]:
    """A Gemini ``generateContent`` response body for ``reply``."""
    parts: list[dict[str, Any]] = []
    if reply.text:
        parts.append({"text": reply.text})
    for name, args in reply.tool_calls:
        parts.append({"functionCall": {"name": name, "args": _args_obj(args)}})
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": reply.finish_reason or "STOP",
                            "index": 0}],
            "usageMetadata": {"promptTokenCount": reply.prompt_tokens, "candidatesTokenCount": reply.completion_tokens,
                              "totalTokenCount": reply.prompt_tokens + reply.completion_tokens},
            "modelVersion": model}


@dataclass
class _State:
    script: Script
    keep_requests: bool = True
    requests: list[dict[str, Any]] = field(default_factory=list)
    received: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next_reply(self, body: dict[str, Any]) -> tuple[Reply, int]:
        with self.lock:
            n = self.received
            self.received += 1
            if self.keep_requests:
                self.requests.append(body)
        if callable(self.script):
            reply = self.script(body)
            if not isinstance(reply, Reply):
                raise TypeError(f"the script answered {type(reply).__name__}, not a Reply")
            return reply, n
        return self.script[min(n, len(self.script) - 1)], n


class ScriptedServer:
    """A threaded HTTP server on ``127.0.0.1`` answering model requests from a script.

    Args:
        script: the replies (see the module).
        port: the port on 127.0.0.1 (0: any free one).
        models: the names ``GET /v1/models`` lists.
        keep_requests: keep every decoded request body in :attr:`requests` (a test double's record
            of what it was sent); ``False`` for a server that runs for long (``tooleffect serve``):
            a body is then let go when its request is answered, and only :attr:`received` counts them.

    Raises:
        ValueError: an empty list of replies.
        TypeError: a reply that is not a :class:`Reply`.
        OSError: the port cannot be bound.
    """

    def __init__(self, script: Script, port: int = 0, models: Sequence[str] = ("scripted",),
                 keep_requests: bool = True) -> None:
        if not callable(script):
            script = list(script)  # an iterator is read once, here, not at every request
            if not script:
                raise ValueError("a scripted server needs at least one reply")
            if bad := [r for r in script if not isinstance(r, Reply)]:
                raise TypeError(f"a scripted server's replies are Reply objects, got {type(bad[0]).__name__}")
        self._state = _State(script, keep_requests)
        state = self._state
        listing = json.dumps({"object": "list", "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "tooleffect"} for name in models]}).encode()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
                return

            timeout = 60  # seconds a connection may send nothing: a cut request frees its thread

            def _send(self, status: int, payload: bytes, body: bool = True) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if body:
                    self.wfile.write(payload)

            def _error(self, status: int, message: str, body: bool = True) -> None:
                """An OpenAI error body; a client that has gone by then is let go (no traceback)."""
                try:
                    self._send(status, json.dumps({"error": {"message": message, "type": "invalid_request_error",
                                                             "code": status}}).encode(), body)
                except OSError:
                    self.close_connection = True

            def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
                """The standard library's own errors (a bad request line, a long path): JSON, not HTML."""
                self.close_connection = True
                self._error(code, message or self.responses.get(code, ("error",))[0])

            def _models(self, body: bool) -> None:
                if self.path.split("?", 1)[0].rstrip("/") in ("/v1/models", "/models"):
                    self._send(200, listing, body)
                else:
                    self._error(404, f"no such path: {self.command} {self.path[:200]}", body)

            def do_GET(self) -> None:  # noqa: N802 - stdlib name
                self._models(body=True)

            def do_HEAD(self) -> None:  # noqa: N802 - stdlib name
                self._models(body=False)

            def _not_allowed(self) -> None:
                self._error(405, f"method {self.command} not allowed (POST a request, GET /v1/models)")

            do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed  # noqa: N815 - stdlib names

            def _read_body(self) -> bytes:
                """The request's body: ``Content-Length`` bytes, or the chunks of a chunked one (RFC 9112
                section 7.1; trailers read and dropped).

                Raises:
                    ValueError: the length or a chunk's size is not a length, two lengths differ, a
                        chunk's data is not followed by CRLF, the body ends before its length or its
                        last chunk, or it is longer than :data:`MAX_BODY_BYTES`.
                    NotImplementedError: a transfer coding other than ``chunked`` alone.
                """
                coding = ", ".join(v.strip() for v in self.headers.get_all("Transfer-Encoding") or []).lower()
                if coding and coding != "chunked":
                    raise NotImplementedError(f"transfer coding {coding[:60]!r} is not supported (chunked only)")
                if coding:
                    if self.headers.get("Content-Length") is not None:  # RFC 9112 6.3: close after answering
                        self.close_connection = True
                    parts: list[bytes] = []
                    size = 0
                    while True:
                        line = self.rfile.readline(1024)
                        if not line:
                            raise ValueError("the chunked body ended before its last chunk")
                        line = line.split(b";", 1)[0].strip()
                        if not _HEX.fullmatch(line):  # int(x, 16) would also take "+2", "0x2", "2_0"
                            raise ValueError(f"a chunk's size is not a hex length: {line[:40]!r}")
                        n = int(line, 16)
                        size += n
                        if size > MAX_BODY_BYTES:
                            raise ValueError(f"the chunked body is longer than {MAX_BODY_BYTES} bytes")
                        if n == 0:
                            while True:  # trailer fields, then the empty line
                                field_line = self.rfile.readline(1024)
                                if not field_line:
                                    raise ValueError("the chunked body ended before the empty line after its end")
                                if not field_line.strip():
                                    return b"".join(parts)
                        part = self.rfile.read(n)
                        if len(part) < n:
                            raise ValueError(f"the chunked body ended inside a chunk ({len(part)} of {n} bytes)")
                        parts.append(part)
                        if self.rfile.readline(8) not in (b"\r\n", b"\n"):
                            raise ValueError(f"a chunk of {n} bytes is not followed by CRLF (its size is wrong?)")
                lengths = {v.strip() for v in self.headers.get_all("Content-Length") or []}
                if len(lengths) > 1:
                    raise ValueError(f"the request has {len(lengths)} different Content-Length values")
                raw_length = self.headers.get("Content-Length")
                stripped = (raw_length or "0").strip()
                # ASCII digits only: int() would also take "+2", "0_2" and other scripts' digits
                length = int(stripped) if stripped.isascii() and stripped.isdigit() else -1
                if length < 0 or length > MAX_BODY_BYTES:
                    raise ValueError(f"Content-Length is not a length up to {MAX_BODY_BYTES}: {raw_length!r}")
                data = self.rfile.read(length) if length else b""
                if len(data) < length:
                    raise ValueError(f"the body ended after {len(data)} of its Content-Length {length} bytes")
                return data

            def do_POST(self) -> None:  # noqa: N802 - stdlib name
                try:
                    raw = self._read_body()
                except (ValueError, NotImplementedError) as exc:
                    self.close_connection = True
                    self._error(501 if isinstance(exc, NotImplementedError) else 400, str(exc))
                    return
                try:
                    body = json.loads(raw or b"{}")
                except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, nesting, 4300-digit ints
                    self._error(400, f"the request body is not JSON: {exc}")
                    return
                if not isinstance(body, dict):
                    self._error(400, f"the request body is a JSON {type(body).__name__}, not an object")
                    return
                body["_path"] = self.path
                body["_received"] = time.monotonic()
                body["_headers"] = dict(self.headers.items())
                try:
                    reply, n = state.next_reply(body)
                except Exception as exc:  # the script could not read this request: the client's fault
                    self._error(400, f"the script could not answer this request: {type(exc).__name__}: {exc}")
                    return
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.reset:  # SO_LINGER 0: close() sends RST, the client reads "connection reset by peer"
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    self.connection.close()
                    return
                model = str(body.get("model") or self.path.rsplit("/", 1)[-1].split(":")[0])
                try:  # a reply the wire format cannot carry is the script's fault: a JSON 500, no traceback
                    if reply.raw_body is not None:
                        payload, status = reply.raw_body, reply.status
                    elif reply.status >= 400:
                        message = reply.error_message or f"scripted failure {reply.status}"
                        payload = json.dumps({"error": {"message": message,
                                                        "type": "server_error", "code": reply.status}}).encode()
                        status = reply.status
                    else:
                        if self.path.endswith("/messages"):
                            doc = anthropic_body(reply, model, n)
                        elif ":generateContent" in self.path:
                            doc = gemini_body(reply, model, n)
                        else:
                            doc = openai_body(reply, model, n)
                        payload, status = json.dumps(doc).encode(), 200
                    for name, value in reply.headers.items():
                        f"{name}: {value}".encode("latin-1")  # what http.server sends them as
                except Exception as exc:
                    self._error(500, f"the script's reply cannot be sent: {type(exc).__name__}: {exc}")
                    return
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    if reply.drip_s:
                        for i in range(len(payload)):
                            self.wfile.write(payload[i:i + 1])
                            self.wfile.flush()
                            time.sleep(reply.drip_s)
                    else:
                        self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    return

        class Server(ThreadingHTTPServer):
            request_queue_size = 1024  # the listen backlog: a run opens as many connections as its concurrency

            def handle_error(self, request: Any, client_address: Any) -> None:
                """A client that reset or left its connection is no server error: no traceback for it."""
                if isinstance(sys.exc_info()[1], OSError):
                    return
                super().handle_error(request, client_address)

        self._httpd = Server(("127.0.0.1", port), Handler)
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Request bodies received so far, in arrival order (with ``_path``, ``_received`` (a
        ``time.monotonic()`` reading) and ``_headers`` added); always empty when the server keeps none.
        """
        return self._state.requests

    @property
    def received(self) -> int:
        """Requests the script answered (or tried to) so far, kept or not."""
        return self._state.received

    @property
    def port(self) -> int:
        """The bound port on 127.0.0.1."""
        return int(self._httpd.server_address[1])

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT`` (Anthropic and Gemini api base)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (OpenAI api base)."""
        return self.root_url + "/v1"

    def start(self) -> ScriptedServer:
        """Serve in a background thread."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="scripted-model", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
