"""The Docker provider: sandbox containers through testcontainers, a warm pool per process.

Each container runs the locally built image (:func:`~.image.image_tag`, checked to exist before
any start: the engine would otherwise try a registry) with every isolation measure this host
accepts (:data:`RESTRICTIONS`), labelled with the run id, its owning process and host.  The
service answers on a unix socket in a short host directory bind-mounted at
``/run/tooleffect``; once it answers, the directory is made read-only to the container's user,
so the only place the sandbox can write is its tmpfs ``/state``.

Pooling: a container is reset over its socket (a few milliseconds) and reused by the next item
of the same process; ``pool=False`` starts a fresh container per item (the benchmark's peer).
Every process (each xdist worker) has its own provider and pool; containers are never shared.
Leftovers of a crashed run (owner process gone) are removed at the next start; kept containers
(``tooleffect_keep_sandbox``) are renamed ``tooleffect-kept-*`` and left alone.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path
from typing import Any

from .environment import Sandbox, SandboxError, SandboxProvider, SandboxRefused, World, register_provider
from .image import docker_client, image_tag, require_image

__all__ = ["RESTRICTIONS", "DockerProvider", "remove_container", "sandbox_containers", "sweep_leftovers"]

LABEL = "tooleffect"
SOCKET_DIR = "/run/tooleffect"
KEPT_PREFIX = "tooleffect-kept-"

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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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


def sweep_leftovers(client: Any) -> list[str]:
    """Remove tooleffect containers of this host whose owning process is gone; returns their ids."""
    removed = []
    host = socket.gethostname()
    for container, name, labels in sandbox_containers(client):
        if name.startswith(KEPT_PREFIX) or labels.get(f"{LABEL}.host") != host:
            continue
        try:
            pid = int(labels.get(f"{LABEL}.pid", "0"))
        except ValueError:
            pid = 0
        if pid and _alive(pid):
            continue
        remove_container(container, labels)
        removed.append(container.id)
    return removed


def remove_container(container: Any, labels: dict[str, str] | None = None) -> None:
    """Remove a sandbox container and its host socket directory (label ``tooleffect.socket_dir``).

    Args:
        container: a Docker SDK container.
        labels: its labels when already known (a sparse listing's), else read from it.
    """
    if labels is None:
        try:
            labels = dict(container.labels)
        except Exception:  # gone already, or a sparse object
            labels = {}
    _remove(container)
    folder = labels.get(f"{LABEL}.socket_dir", "")
    if folder.startswith("/tmp/te-") and "/" not in folder[len("/tmp/"):]:
        shutil.rmtree(folder, ignore_errors=True)


class _Slot:
    """A started container, its socket directory and its client."""

    def __init__(self, container: Any, folder: Path, sandbox: Sandbox) -> None:
        self.container = container
        self.folder = folder
        self.sandbox = sandbox


@register_provider
class DockerProvider(SandboxProvider):
    """Containers from the local image, pooled per process (see the module docstring).

    Args:
        run_id: the run's id (label ``tooleffect.run``).
        owner_pid: the run's controller process (label ``tooleffect.pid``; a crashed run's
            containers are swept when it is gone).
        label: this process's name in the run (``gw0``…; label ``tooleffect.worker``).
        pool: reuse containers between items (reset in place) instead of one per item.
        image: the image tag (default: the tag of the checkout's ``sandbox/``).
    """

    name = "docker"

    def __init__(self, run_id: str, owner_pid: int, label: str = "", *, pool: bool = True,
                 image: str | None = None) -> None:
        super().__init__(run_id, owner_pid, label)
        self.pool = pool
        self.image = image
        self.client: Any = None
        self._idle: list[_Slot] = []
        self._busy: dict[int, _Slot] = {}
        self._all: dict[str, _Slot] = {}
        self._kept: set[str] = set()
        self._restrictions: dict[str, bool] | None = None
        self._count = 0
        self._lock = threading.Lock()
        self.swept: list[str] = []

    # ------------------------------------------------------------------ session

    def session_init(self) -> None:
        from testcontainers.core.config import testcontainers_config

        # Ryuk (testcontainers' reaper) is an image from a registry; containers are removed by id
        # here instead, and swept by label after a crash.
        testcontainers_config.ryuk_disabled = True
        self.client = docker_client()
        self.image = self.image or image_tag()
        require_image(self.client, self.image)
        self.swept = sweep_leftovers(self.client)
        atexit.register(self.session_cleanup)

    def restrictions(self) -> dict[str, bool]:
        return {"network_none": True, **(self._restrictions or {})}

    def _create_kwargs(self, names: list[str]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"network_mode": "none", "network": None, "detach": True}
        for name in names:
            kwargs.update(RESTRICTIONS[name])
        return kwargs

    def _start(self, names: list[str]) -> _Slot:
        from testcontainers.core.container import DockerContainer

        if self.client is None or self.image is None:
            raise SandboxError("the docker provider was not initialised (session_init)")
        require_image(self.client, self.image)
        with self._lock:
            self._count += 1
            n = self._count
        folder = Path(tempfile.mkdtemp(prefix="te-", dir="/tmp"))
        folder.chmod(0o777)
        labels = {LABEL: "1", f"{LABEL}.run": self.run_id, f"{LABEL}.pid": str(self.owner_pid),
                  f"{LABEL}.host": socket.gethostname(), f"{LABEL}.worker": self.label or "main",
                  f"{LABEL}.socket_dir": str(folder)}
        spec = (DockerContainer(self.image)
                .with_name(f"tooleffect-{self.run_id[:8]}-{self.label or 'main'}-{n}")
                .with_volume_mapping(str(folder), SOCKET_DIR, "rw")
                .with_tmpfs_mount("/state", STATE_TMPFS)
                .with_kwargs(labels=labels, **self._create_kwargs(names)))
        try:
            spec.start()
        except BaseException as exc:  # Ctrl-C during the start too: nothing may be left running
            container = spec._container
            if container is not None:
                _remove(container)
            shutil.rmtree(folder, ignore_errors=True)
            if not isinstance(exc, Exception):
                raise
            raise SandboxError(f"starting a sandbox container failed: {type(exc).__name__}: {exc}") from None
        container = spec.get_wrapped_container()
        sandbox = Sandbox(folder / "sock", container.id)
        slot = _Slot(container, folder, sandbox)
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
            self._discard(slot)
            raise SandboxError(f"{exc}; container log: {logs[-600:] or '(empty)'}") from None
        except BaseException:
            self._discard(slot)
            raise
        folder.chmod(0o755)  # the socket exists: from now on the container cannot write here
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
        slot.sandbox.close()
        if keep:
            short = slot.container.id[:12]
            name = f"{KEPT_PREFIX}{short}"
            try:
                slot.container.rename(name)
            except Exception:  # the container is gone: nothing to keep
                self._discard(slot)
                return None
            self._kept.add(slot.container.id)
            self._all.pop(slot.container.id, None)
            return f"sandbox kept: container {name} (docker exec -it {short} sh; remove with docker rm -f {short})"
        if interrupted or not self.pool:
            self._discard(slot)
        else:
            self._idle.append(slot)
        return None

    def _discard(self, slot: _Slot) -> None:
        slot.sandbox.close()
        _remove(slot.container)
        self._all.pop(slot.container.id, None)
        shutil.rmtree(slot.folder, ignore_errors=True)

    def session_cleanup(self) -> None:
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
