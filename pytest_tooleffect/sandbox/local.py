"""The local provider: the sandbox service in this process, for fast unit tests.

It runs the same ``sandbox/service.py`` as the image, on a unix socket in a temporary
directory, in a background thread, so the client path is the one the Docker provider uses.
It isolates nothing: use it for tests of the plugin, never for untrusted tool code.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from pytest_tooleffect.sandbox.environment import Sandbox, SandboxError, SandboxProvider, World, register_provider
from pytest_tooleffect.sandbox.image import context_dir
from pytest_tooleffect.util.extras import require

__all__ = ["LocalProvider", "load_service"]

_service_lock = threading.Lock()


def load_service(context: Path | None = None) -> ModuleType:
    """Import ``sandbox/service.py`` from the build context (once per process).

    Raises:
        SandboxError: the build context has no service.py.
    """
    path = (context or context_dir()) / "service.py"
    name = "tooleffect_sandbox_service"
    with _service_lock:
        if name in sys.modules:
            return sys.modules[name]
        if not path.is_file():
            raise SandboxError(f"no sandbox service at {path}")
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module


@register_provider
class LocalProvider(SandboxProvider):
    """One in-process service per idle slot, reused item after item (reset between items)."""

    name = "local"

    def __init__(self, run_id: str, owner_pid: int, label: str = "") -> None:
        super().__init__(run_id, owner_pid, label)
        self._idle: list[tuple[Sandbox, Any, Path]] = []
        self._busy: dict[int, tuple[Sandbox, Any, Path]] = {}

    def session_init(self) -> None:
        load_service()

    def _start(self) -> tuple[Sandbox, Any, Path]:
        service = load_service()
        folder = Path(tempfile.mkdtemp(prefix="te-"))
        (folder / "state").mkdir()
        server = service.Server(str(folder / "sock"), service.World(folder / "state"))
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        sandbox = Sandbox(folder / "sock", f"local-{folder.name}")
        sandbox.wait_ready(5.0)
        return sandbox, server, folder

    def item_init(self, world: World, item_id: str) -> Sandbox:
        if world.name == "bfcl":  # BFCL's back-ends run in this process: its MathAPI imports mpmath
            require("mpmath", "the bfcl world in the local sandbox provider")
        slot = self._idle.pop() if self._idle else self._start()
        self._busy[id(slot[0])] = slot
        slot[0].reset(world)
        return slot[0]

    def item_cleanup(self, sandbox: Sandbox, *, interrupted: bool, keep: bool) -> str | None:
        slot = self._busy.pop(id(sandbox), None)
        if slot is None:  # already stopped by session_cleanup (Ctrl-C)
            return None
        if keep:
            return f"local sandbox kept until the end of the session: {slot[2]}"
        if interrupted:
            self._stop(slot)
        else:
            self._idle.append(slot)
        return None

    @staticmethod
    def _stop(slot: tuple[Sandbox, Any, Path]) -> None:
        sandbox, server, folder = slot
        sandbox.close()
        server.shutdown()
        server.server_close()
        shutil.rmtree(folder, ignore_errors=True)

    def session_cleanup(self) -> None:
        for slot in [*self._idle, *self._busy.values()]:
            self._stop(slot)
        self._idle.clear()
        self._busy.clear()
