"""The Docker provider: sandbox containers through testcontainers, a warm pool per process.

Each container runs the locally built image (:func:`~.image.image_tag`, checked to exist before
any start: the engine would otherwise try a registry) with every isolation measure this host
accepts (:data:`RESTRICTIONS`), labelled with the run id, its lease, its owning process and host.

Transport: nothing is mounted from the host, so the engine may be on another machine
(``DOCKER_HOST=tcp://…`` or ``ssh://…``).  The service listens on an abstract unix socket inside
the container (no file; the container's own network namespace keeps it private) and is reached
through the stdio of ``docker exec -i <id> service.py --relay``, attached through the engine's
API (:class:`ExecChannel`).  The only place the sandbox can write is its tmpfs ``/state``.

Liveness: the service ends itself after ``lease_s`` seconds without a request (label
``tooleffect.lease``); the provider's heartbeat pings its containers well within that, so a live
run's sandboxes stay up and a vanished controller's (a crashed process, a lost host) stop on
their own.  A stopped sandbox container is a leftover whoever finds it: every start removes
those (:func:`sweep_leftovers`), and those of a dead owner process on this very host at once.

Pooling: a container is reset over its stream (a few milliseconds) and reused by the next item
of the same process; ``pool=False`` starts a fresh container per item (the benchmark's peer).
Every process (each xdist worker) has its own provider and pool; containers are never shared.
Kept containers (``tooleffect_keep_sandbox``) are told ``keep`` (the lease no longer ends them),
renamed ``tooleffect-kept-*`` and left alone.
"""

from __future__ import annotations

import atexit
import re
import socket
import struct
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from pytest_tooleffect.compat import exec_socket
from pytest_tooleffect.sandbox.environment import (
    Sandbox,
    SandboxError,
    SandboxProvider,
    SandboxRefused,
    World,
    one_line,
    register_provider,
)
from pytest_tooleffect.sandbox.image import docker_client, image_tag, require_image
from pytest_tooleffect.util.processes import is_running

__all__ = ["DEFAULT_LEASE_S", "RESTRICTIONS", "DockerProvider", "ExecChannel", "remove_container",
           "sandbox_containers", "sweep_leftovers"]

LABEL = "tooleffect"
KEPT_PREFIX = "tooleffect-kept-"
#: the service's abstract socket in the container, and the relay the client runs beside it
SERVICE_ADDRESS = "@tooleffect"
RELAY_COMMAND = ["/usr/bin/python3", "-I", "-B", "/opt/tooleffect/service.py", "--relay", SERVICE_ADDRESS]
#: seconds without a request after which a sandbox ends itself (the heartbeat pings every quarter)
DEFAULT_LEASE_S = 120.0
#: a container created this many seconds ago and never started is a leftover
CREATED_GRACE_S = 300.0

#: isolation measures by name: container-create arguments (network_mode=none is required)
RESTRICTIONS: dict[str, dict[str, Any]] = {
    "read_only_root": {"read_only": True},
    "cap_drop_all": {"cap_drop": ["ALL"]},
    "no_new_privileges": {"security_opt": ["no-new-privileges"]},
    "non_root_user": {"user": "65534:65534"},
    "init": {"init": True},
    "pids_limit": {"pids_limit": 64},
    "memory_limit": {"mem_limit": "256m", "memswap_limit": "256m"},
}
STATE_TMPFS = "rw,nosuid,nodev,noexec,size=64m,mode=1777"


class ExecChannel:
    """The stdio of a relay process started in a container by ``docker exec -i``, through the API.

    The stream is the engine's multiplexed one (no TTY): 8-byte frame headers, stdout frames
    carry the service's answers, stderr frames the relay's complaints (kept in :attr:`stderr`).
    Works over whatever transport the client has (unix socket, TCP, TLS, SSH).  Requests are
    JSON with every control character escaped, so the engine's detach keys never occur in them.

    Args:
        client: a Docker SDK client.
        container_id: the running container.
        command: the relay's command line.
        timeout_s: per read or write, seconds.

    Raises:
        OSError: the exec could not be created or started (the container is gone or stopped).
    """

    def __init__(self, client: Any, container_id: str, command: Sequence[str], timeout_s: float) -> None:
        try:
            exec_id = client.api.exec_create(container_id, list(command), stdin=True, stdout=True, stderr=True)["Id"]
            self._handle = client.api.exec_start(exec_id, socket=True)
        except OSError:
            raise
        except Exception as exc:  # docker.errors.DockerException and kin
            raise OSError(f"docker exec in {container_id[:12]} failed: {type(exc).__name__}: {exc}") from None
        # a unix or TCP connection comes as the response's SocketIO; TLS and SSH as the socket itself
        handle: Any = self._handle
        raw: Any = exec_socket(handle)
        raw.settimeout(timeout_s)
        self._raw = raw
        self._buffer = bytearray()
        self.stderr = bytearray()

    def send(self, data: bytes) -> None:
        self._raw.sendall(data)

    def _exactly(self, n: int) -> bytes | None:
        chunks = bytearray()
        while len(chunks) < n:
            got = self._raw.recv(n - len(chunks))
            if not got:
                return None
            chunks += got
        return bytes(chunks)

    def readline(self) -> bytes:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line = bytes(self._buffer[:end + 1])
                del self._buffer[:end + 1]
                return line
            header = self._exactly(8)
            if header is None:
                return b""
            stream, size = struct.unpack(">BxxxL", header)
            data = self._exactly(size) if size else b""
            if data is None:
                return b""
            if stream == 2:
                self.stderr = (self.stderr + data)[-2000:]
            else:
                self._buffer += data

    def close(self) -> None:
        try:
            self._raw.shutdown(socket.SHUT_RDWR)  # the exec's stdin ends: the relay exits
        except OSError:
            pass
        try:
            self._raw.close()
        except OSError:
            pass


@contextmanager
def _engine(what: str) -> Iterator[None]:
    """Turn any failure of the engine or its transport during ``what`` into a :class:`SandboxError`.

    The Docker SDK raises its own errors (``docker.errors.DockerException``), ``requests``' (a
    lost connection: ``requests.exceptions.ConnectionError``) and the socket's; each is an error
    outcome of the item, with a one-line message, never a traceback.
    """
    try:
        yield
    except SandboxError:
        raise
    except Exception as exc:
        raise SandboxError(f"{what}: the Docker engine failed: {one_line(exc)}") from None


def sandbox_containers(client: Any, *labels: str) -> list[tuple[Any, str, dict[str, str]]]:
    """The sandbox containers with these labels (``key=value``), as ``(container, name, labels)``.

    One sparse list call: the SDK's full listing inspects each container in turn and fails when
    another run removes one in between.
    """
    found = []
    for container in client.containers.list(all=True, sparse=True, filters={"label": [f"{LABEL}=1", *labels]}):
        names = container.attrs.get("Names") or ["/"]
        found.append((container, names[0].lstrip("/"), dict(container.attrs.get("Labels") or {})))
    return found


def _engine_now(client: Any) -> float:
    """The engine's clock, Unix seconds (a remote engine's clock need not be this host's)."""
    text = str(client.info().get("SystemTime", ""))
    try:  # RFC 3339 with nanoseconds: Python reads up to microseconds
        return datetime.fromisoformat(re.sub(r"(\.\d{6})\d+", r"\1", text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()


def sweep_leftovers(client: Any) -> list[str]:
    """Remove leftover sandbox containers of any run and host; returns their ids.

    A leftover is a sandbox container (label ``tooleffect=1``, not kept) that is stopped (its
    service ended: its lease lapsed because its controller vanished, or it failed), or was
    created more than :data:`CREATED_GRACE_S` seconds ago (engine clock) and never started, or
    runs for an owner process of this host (label ``tooleffect.host``) that is gone.  A running
    container of another host is left to its lease.
    """
    removed = []
    host = socket.gethostname()
    now: float | None = None
    for container, name, labels in sandbox_containers(client):
        if name.startswith(KEPT_PREFIX):
            continue
        state = container.attrs.get("State")
        state = state.get("Status") if isinstance(state, dict) else state
        if state in ("exited", "dead"):
            pass
        elif state == "created":
            now = _engine_now(client) if now is None else now
            if now - float(container.attrs.get("Created") or now) < CREATED_GRACE_S:
                continue
        elif state == "running" and labels.get(f"{LABEL}.host") == host:
            try:
                pid = int(labels.get(f"{LABEL}.pid", "0"))
            except ValueError:
                pid = 0
            if pid and is_running(pid):
                continue
        else:
            continue
        remove_container(container, labels)
        removed.append(container.id)
    return removed


def remove_container(container: Any, labels: dict[str, str] | None = None) -> None:
    """Remove a sandbox container (forced, with its anonymous volumes; gone already is fine).

    Args:
        container: a Docker SDK container.
        labels: its labels when already known (unused; kept for callers that pass them).
    """
    _remove(container)


class _Slot:
    """A started container and the client of its service."""

    def __init__(self, container: Any, sandbox: Sandbox) -> None:
        self.container = container
        self.sandbox = sandbox


@register_provider
class DockerProvider(SandboxProvider):
    """Containers from the local image, pooled per process (see the module docstring).

    The engine is the one ``DOCKER_HOST`` (and the Docker SDK's other variables) names, local
    or remote.

    Args:
        run_id: the run's id (label ``tooleffect.run``).
        owner_pid: the run's controller process (label ``tooleffect.pid``; on this host, a
            crashed run's containers are swept at once when it is gone).
        label: this process's name in the run (``gw0``…; label ``tooleffect.worker``).
        pool: reuse containers between items (reset in place) instead of one per item.
        image: the image tag (default: the tag of the checkout's ``sandbox/``).
        lease_s: seconds without a request after which a sandbox ends itself (label
            ``tooleffect.lease``); the heartbeat pings every quarter of it.
    """

    name = "docker"

    def __init__(self, run_id: str, owner_pid: int, label: str = "", *, pool: bool = True,
                 image: str | None = None, lease_s: float = DEFAULT_LEASE_S) -> None:
        super().__init__(run_id, owner_pid, label)
        self.pool = pool
        self.image = image
        self.lease_s = lease_s
        self.client: Any = None
        self._idle: list[_Slot] = []
        self._busy: dict[int, _Slot] = {}
        self._all: dict[str, _Slot] = {}
        self._kept: set[str] = set()
        self._restrictions: dict[str, bool] | None = None
        self._count = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._heart: threading.Thread | None = None
        self.swept: list[str] = []

    # ------------------------------------------------------------------ session

    def session_init(self) -> None:
        from testcontainers.core.config import testcontainers_config

        # Ryuk (testcontainers' reaper) is an image from a registry; containers are removed by id
        # here instead, and stop by their lease after a crash.
        testcontainers_config.ryuk_disabled = True
        self.client = docker_client()
        self.image = self.image or image_tag()
        with _engine("starting the docker provider"):
            require_image(self.client, self.image)
            self.swept = sweep_leftovers(self.client)
        self._stop.clear()
        self._heart = threading.Thread(target=self._heartbeat, name="tooleffect-sandbox-heartbeat", daemon=True)
        self._heart.start()
        atexit.register(self.session_cleanup)

    def _heartbeat(self) -> None:
        """Ping every sandbox idle for a quarter of the lease (one busy with a request is skipped)."""
        period = self.lease_s / 4
        while not self._stop.wait(period):
            for slot in list(self._all.values()):
                if time.monotonic() - slot.sandbox.last_request < period or slot.container.id not in self._all:
                    continue
                try:
                    slot.sandbox.request({"op": "ping"}, wait=False)
                except (BlockingIOError, SandboxError):
                    pass  # in use right now, or gone: the item that holds it finds out

    def restrictions(self) -> dict[str, bool]:
        return {"network_none": True, **(self._restrictions or {})}

    def _create_kwargs(self, names: list[str]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"network_mode": "none", "network": None, "detach": True}
        for name in names:
            kwargs.update(RESTRICTIONS[name])
        return kwargs

    def _start(self, names: list[str]) -> _Slot:
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.exceptions import ContainerStartException

        if self.client is None or self.image is None:
            raise SandboxError("the docker provider was not initialised (session_init)")
        require_image(self.client, self.image)
        with self._lock:
            self._count += 1
            n = self._count
        labels = {LABEL: "1", f"{LABEL}.run": self.run_id, f"{LABEL}.pid": str(self.owner_pid),
                  f"{LABEL}.host": socket.gethostname(), f"{LABEL}.worker": self.label or "main",
                  f"{LABEL}.lease": f"{self.lease_s:g}", f"{LABEL}.transport": "exec"}
        spec = (DockerContainer(self.image)
                .with_name(f"tooleffect-{self.run_id[:8]}-{self.label or 'main'}-{n}")
                .with_command(["--socket", SERVICE_ADDRESS, "--state", "/state", "--lease", f"{self.lease_s:g}"])
                .with_tmpfs_mount("/state", STATE_TMPFS)
                .with_kwargs(labels=labels, **self._create_kwargs(names)))
        try:
            spec.start()
        except BaseException as exc:  # Ctrl-C during the start too: nothing may be left running
            try:
                _remove(spec.get_wrapped_container())
            except ContainerStartException:  # it was never created
                pass
            if not isinstance(exc, Exception):
                raise
            raise SandboxError(f"starting a sandbox container failed: {type(exc).__name__}: {exc}") from None
        container = spec.get_wrapped_container()
        channels: list[ExecChannel] = []

        def connect() -> ExecChannel:
            channel = ExecChannel(self.client, container.id, RELAY_COMMAND, sandbox.timeout_s)
            channels.append(channel)
            del channels[:-1]
            return channel

        sandbox = Sandbox(connect, container.id, where=f"docker exec -i {container.id[:12]} (relay to "
                                                         f"{SERVICE_ADDRESS})")
        slot = _Slot(container, sandbox)
        self._all[container.id] = slot

        def running() -> bool:
            container.reload()
            return bool(container.status in ("created", "running"))

        try:
            sandbox.wait_ready(30.0, alive=running)
        except SandboxError as exc:
            try:
                logs = container.logs(tail=20).decode(errors="replace").strip()
            except Exception as gone:  # removed meanwhile (a sweep, a user)
                logs = f"unavailable ({type(gone).__name__})"
            relay = channels[-1].stderr.decode(errors="replace").strip() if channels else ""
            self._discard(slot)
            raise SandboxError(f"{exc}; container log: {logs[-600:] or '(empty)'}"
                               + (f"; relay: {relay[-300:]}" if relay else "")) from None
        except BaseException:
            self._discard(slot)
            raise
        return slot

    def _first_start(self) -> _Slot:
        """Start with every restriction; if the engine refuses, probe each and keep those that work."""
        names = list(RESTRICTIONS)
        try:
            slot = self._start(names)
            self._restrictions = dict.fromkeys(names, True)
            return slot
        except SandboxError as first:
            working = {}
            for name in names:
                try:
                    probe = self._start([name])
                except SandboxError:
                    working[name] = False
                else:
                    working[name] = True
                    self._discard(probe)
            self._restrictions = working
            try:
                return self._start([n for n, ok in working.items() if ok])
            except SandboxError as exc:
                raise SandboxError(f"no sandbox container starts here: {first}; then {exc}") from None

    # ------------------------------------------------------------------ items

    def item_init(self, world: World, item_id: str) -> Sandbox:
        """A sandbox for the item, its world reset to ``world``.

        Raises:
            SandboxRefused: the service refused the world.
            SandboxError: no container could be started or reset; any failure of the engine or
                its transport (a lost ``DOCKER_HOST``) is one, with a one-line message.
        """
        with _engine(f"a sandbox for {item_id}"):
            return self._item_init(world)

    def _item_init(self, world: World) -> Sandbox:
        slot = self._idle.pop() if self._idle else None
        if slot is None:
            slot = self._first_start() if self._restrictions is None else self._start(
                [n for n, ok in self._restrictions.items() if ok])
        try:
            slot.sandbox.reset(world)
        except SandboxRefused:
            self._idle.append(slot)
            raise
        except SandboxError:
            self._discard(slot)  # a pooled container that stopped answering: replace it once
            slot = self._start([n for n, ok in (self._restrictions or {}).items() if ok])
            slot.sandbox.reset(world)
        self._busy[id(slot.sandbox)] = slot
        return slot.sandbox

    def item_cleanup(self, sandbox: Sandbox, *, interrupted: bool, keep: bool) -> str | None:
        slot = self._busy.pop(id(sandbox), None)
        if slot is None:
            return None
        if keep:
            short = slot.container.id[:12]
            name = f"{KEPT_PREFIX}{short}"
            try:
                slot.sandbox.request({"op": "keep"})  # its lease no longer ends it
                slot.container.rename(name)
            except Exception:  # the container is gone or stopped answering: nothing to keep
                self._discard(slot)
                return None
            slot.sandbox.close()
            self._kept.add(slot.container.id)
            self._all.pop(slot.container.id, None)
            return f"sandbox kept: container {name} (docker exec -it {short} sh; remove with docker rm -f {short})"
        if interrupted or not self.pool:
            self._discard(slot)
        else:
            self._idle.append(slot)  # its stream stays open: the next item's reset goes straight through
        return None

    def _discard(self, slot: _Slot) -> None:
        self._all.pop(slot.container.id, None)
        slot.sandbox.close()
        _remove(slot.container)

    def session_cleanup(self) -> None:
        self._stop.set()
        for slot in list(self._all.values()):
            self._discard(slot)
        self._idle.clear()
        self._busy.clear()
        if self.client is not None:  # anything of this process's a start left behind (by label)
            try:
                for container, name, labels in sandbox_containers(
                        self.client, f"{LABEL}.run={self.run_id}", f"{LABEL}.worker={self.label or 'main'}"):
                    if container.id not in self._kept and not name.startswith(KEPT_PREFIX):
                        remove_container(container, labels)
            except Exception:  # the engine is gone: nothing more can be removed from here
                pass

    def containers(self) -> list[str]:
        """Ids of the containers this provider has running (kept ones excluded)."""
        return list(self._all)

    @classmethod
    def remove_run(cls, run_id: str) -> list[str]:
        """Remove the run's containers (label ``tooleffect.run``) of every worker; kept ones stay.

        Returns:
            The ids removed (none when no engine answers: there is nothing it could hold).
        """
        try:
            client = docker_client()
        except SandboxError:
            return []
        removed = []
        try:
            for container, name, labels in sandbox_containers(client, f"{LABEL}.run={run_id}"):
                if not name.startswith(KEPT_PREFIX):
                    remove_container(container, labels)
                    removed.append(container.id)
        except Exception:  # the engine went away meanwhile
            pass
        finally:
            client.close()
        return removed


def _remove(container: Any) -> None:
    try:
        container.remove(force=True, v=True)
    except Exception:  # already gone
        pass
