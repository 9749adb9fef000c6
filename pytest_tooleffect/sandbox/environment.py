"""The sandbox provider interface, its registry, and the client for one sandbox.

A *provider* gives each test item a *sandbox*: a running copy of ``sandbox/service.py`` whose
world it resets to the case's seed rows.  Lifecycle (the shape of inspect_ai's sandbox
environments): :meth:`SandboxProvider.session_init` once per process, :meth:`item_init` per
item, :meth:`item_cleanup` per item (told whether the item was interrupted and whether to keep
the sandbox), :meth:`session_cleanup` once at the end (also on Ctrl-C).

Providers register by name (:func:`register_provider`); :func:`provider_class` looks one up.
This module imports no provider: the built-in ones (``docker``, ``local``) register when the
:mod:`pytest_tooleffect.sandbox` package imports them, and Python runs the package's
``__init__`` before any module in it, so they are registered whichever path imports this one.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

__all__ = [
    "Channel",
    "Sandbox",
    "SandboxError",
    "SandboxProvider",
    "SandboxRefused",
    "ToolResult",
    "World",
    "one_line",
    "provider_class",
    "register_provider",
    "registered_providers",
]


class SandboxError(Exception):
    """A sandbox could not be provisioned or stopped answering (an error outcome, never a verdict)."""


#: the longest message :func:`one_line` makes of an exception
ONE_LINE_CHARS = 300


def one_line(exc: BaseException) -> str:
    """``Type: message`` of ``exc`` on one line, whitespace collapsed, at most :data:`ONE_LINE_CHARS`."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= ONE_LINE_CHARS else text[:ONE_LINE_CHARS - 1] + "…"


class SandboxRefused(SandboxError):
    """The service answered but refused the request (an unknown table, column, world or tool)."""


@dataclass(frozen=True)
class World:
    """What an item's sandbox is reset to.

    Attributes:
        name: the world module in the image (``sandbox/worlds/<name>.py``).
        rows: seed rows, ``{table: [{column: value}]}``.
        faults: per tool, ``{"kind": "status"|"timeout"|"malformed"|"slow", ...}``.
        timezone: IANA zone naive times are read in (default UTC).
    """

    name: str
    rows: Mapping[str, Any] = field(default_factory=dict)
    faults: Mapping[str, Any] = field(default_factory=dict)
    timezone: str | None = None


@dataclass(frozen=True)
class ToolResult:
    """One executed tool call.

    Attributes:
        content: the text the agent reads back (JSON, or cut short under a ``malformed`` fault).
        error: whether the tool answered with an error.
        fault: the injected fault kind that fired, or ``None``.
        latency_ms: round trip over the socket, milliseconds.
        extras: what an object world adds about the call (an MCP world: ``structured``,
            ``annotations``, ``changed``, ``diff``, ``diff_lines``, ``lost``, ``repeat``); empty otherwise.
    """

    content: str
    error: bool
    fault: str | None
    latency_ms: float
    extras: Mapping[str, Any] = field(default_factory=dict)


class Channel(Protocol):
    """One byte stream to a sandbox service: requests written, answer lines read.

    A unix socket (:class:`UnixChannel`) or, for Docker, the stdio of a ``docker exec -i`` relay
    attached through the engine's API (:class:`~pytest_tooleffect.sandbox.docker.ExecChannel`).
    Errors are ``OSError`` (a timeout is one).
    """

    def send(self, data: bytes) -> None:
        """Write all of ``data``."""

    def readline(self) -> bytes:
        """The next line, newline-terminated; ``b""`` when the stream ended."""

    def close(self) -> None:
        """End the stream (the service keeps running)."""


class UnixChannel:
    """A connection to a service's unix socket.

    Args:
        path: the socket's path.
        timeout_s: per operation, seconds.
    """

    def __init__(self, path: Path, timeout_s: float) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)
        try:
            sock.connect(str(path))
        except OSError:
            sock.close()
            raise
        self._sock, self._file = sock, sock.makefile("rwb")

    def send(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()

    def readline(self) -> bytes:
        line: bytes = self._file.readline()
        return line

    def close(self) -> None:
        for closable in (self._file, self._sock):
            try:
                closable.close()
            except OSError:
                pass


class Sandbox:
    """Client for one running sandbox service (one persistent stream, reopened after a failure).

    Requests are serialised by a lock, so a provider's heartbeat may ping from another thread.

    Args:
        target: the service's unix socket, or a callable opening a :class:`Channel` to it
            (called again after the stream failed).
        sandbox_id: the provider's id for it (a container id for Docker).
        timeout_s: per request, seconds.
        where: how the service is reached, for error messages (default: the socket's path).
    """

    def __init__(self, target: Path | Callable[[], Channel], sandbox_id: str, timeout_s: float = 30.0,
                 where: str | None = None) -> None:
        self.socket_path = target if isinstance(target, Path) else None
        self._open = target if callable(target) else None
        self.where = where or str(target)
        self.id = sandbox_id
        self.timeout_s = timeout_s
        self._channel: Channel | None = None
        self._lock = threading.Lock()
        self.last_request = time.monotonic()
        self.info: dict[str, Any] = {}

    def _connect(self) -> Channel:
        if self._open is not None:
            return self._open()
        assert self.socket_path is not None
        return UnixChannel(self.socket_path, self.timeout_s)

    def request(self, payload: Mapping[str, Any], *, wait: bool = True) -> dict[str, Any]:
        """Send one request and return the answer.

        Args:
            payload: the request (see ``sandbox/README.md``).
            wait: wait for a request in progress on another thread; when false, raise
                :class:`BlockingIOError` at once instead.

        Raises:
            SandboxError: the service is unreachable, closed the connection or refused the request.
        """
        if not self._lock.acquire(blocking=wait):
            raise BlockingIOError("a request is in progress")
        try:
            return self._request(payload)
        finally:
            self._lock.release()

    def _request(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        self.last_request = time.monotonic()
        try:
            if self._channel is None:
                self._channel = self._connect()
            self._channel.send(json.dumps(payload, default=str).encode() + b"\n")  # ASCII: surrogates survive
            line = self._channel.readline()
        except Exception as exc:  # a socket's OSError, or a transport's own (an SSH client's): one kind here
            self._close()
            raise SandboxError(f"sandbox {self.id[:12]}: {one_line(exc)}") from None
        if not line:
            self._close()
            raise SandboxError(f"sandbox {self.id[:12]}: the service closed the connection")
        try:
            answer: dict[str, Any] = json.loads(line)
        except ValueError:  # a line cut short by a transport that ended mid-answer
            self._close()
            raise SandboxError(f"sandbox {self.id[:12]}: the service's answer is not JSON: {line[:80]!r}") from None
        if not answer.get("ok"):
            raise SandboxRefused(f"sandbox refused the request: {answer.get('error')}")
        return answer

    def wait_ready(self, deadline_s: float = 30.0, alive: Callable[[], bool] | None = None) -> None:
        """Poll until the service answers ``ping``.

        Raises:
            SandboxError: not ready before ``deadline_s`` seconds, or ``alive()`` turned false.
        """
        end = time.monotonic() + deadline_s
        while True:
            try:
                self.info = self.request({"op": "ping"})
                return
            except SandboxError:  # request() turns every socket error into one
                if time.monotonic() > end or (alive is not None and not alive()):
                    raise SandboxError(f"sandbox {self.id[:12]} did not start answering on {self.where}") from None
                time.sleep(0.005)

    def reset(self, world: World, *, faults: bool = True) -> dict[str, int]:
        """Replace the world with ``world``'s seed rows and faults (``faults=False``: its seed rows
        alone, as a reference trajectory runs); returns rows per table.
        """
        answer = self.request({"op": "reset", "world": world.name, "rows": dict(world.rows),
                               "faults": dict(world.faults) if faults else {}, "timezone": world.timezone})
        rows: dict[str, int] = answer["rows"]
        return rows

    def call(self, name: str, arguments: Any) -> ToolResult:
        """Run one tool call in the sandbox."""
        start = time.perf_counter()
        answer = self.request({"op": "call", "name": name, "arguments": arguments})
        return ToolResult(answer["content"], bool(answer["error"]), answer.get("fault"),
                          (time.perf_counter() - start) * 1000, answer.get("extras") or {})

    def snapshot(self) -> dict[str, list[dict[str, Any]]]:
        """Every row of every table, ``{table: [row]}``."""
        tables: dict[str, list[dict[str, Any]]] = self.request({"op": "snapshot"})["tables"]
        return tables

    def close(self) -> None:
        """Close the connection (the service keeps running)."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._channel is not None:
            try:
                self._channel.close()
            except OSError:
                pass
        self._channel = None


class SandboxProvider(ABC):
    """A source of sandboxes (see the module docstring for the lifecycle).

    Class attributes:
        name: the registry name (``--tooleffect-sandbox=NAME``).
    """

    name: ClassVar[str]

    def __init__(self, run_id: str, owner_pid: int, label: str = "") -> None:
        self.run_id = run_id
        self.owner_pid = owner_pid
        self.label = label

    @abstractmethod
    def session_init(self) -> None:
        """Prepare (check the engine and the image, sweep leftovers).

        Raises:
            SandboxError: the provider cannot run here.
        """

    @abstractmethod
    def item_init(self, world: World, item_id: str) -> Sandbox:
        """A sandbox whose world is ``world``.

        Raises:
            SandboxError: provisioning failed.
        """

    @abstractmethod
    def item_cleanup(self, sandbox: Sandbox, *, interrupted: bool, keep: bool) -> str | None:
        """Give the sandbox back after its item.

        Args:
            sandbox: what :meth:`item_init` returned.
            interrupted: the item did not finish (its world is in an unknown state): discard it.
            keep: leave it running for inspection (returns how to reach it).

        Returns:
            A note on where a kept sandbox is, else ``None``.
        """

    @abstractmethod
    def session_cleanup(self) -> None:
        """Remove every sandbox this provider started (kept ones excepted)."""

    def restrictions(self) -> dict[str, bool]:
        """Isolation measures by name, ``True`` when in force (empty for in-process providers)."""
        return {}

    @classmethod
    def remove_run(cls, run_id: str) -> list[str]:
        """Remove every sandbox of the run ``run_id`` that any process of it left (kept ones excepted).

        Called by the xdist controller after its workers are gone, so a worker stopped before its
        own :meth:`session_cleanup` leaves nothing behind.  In-process providers have nothing to do.

        Returns:
            The ids of the sandboxes removed.
        """
        return []


_REGISTRY: dict[str, type[SandboxProvider]] = {}


def register_provider(cls: type[SandboxProvider]) -> type[SandboxProvider]:
    """Class decorator: register a provider under ``cls.name``.

    Args:
        cls: the provider class.

    Returns:
        ``cls`` itself.
    """
    _REGISTRY[cls.name] = cls
    return cls


def registered_providers() -> list[str]:
    """Registered provider names, sorted.

    Returns:
        The names of every provider registered so far.
    """
    return sorted(_REGISTRY)


def provider_class(name: str) -> type[SandboxProvider]:
    """The provider registered as ``name``.

    Raises:
        KeyError: no such provider (the message lists the registered ones).
    """
    names = registered_providers()
    if name not in _REGISTRY:
        raise KeyError(f"unknown sandbox provider {name!r} (registered: {', '.join(names)})")
    return _REGISTRY[name]
