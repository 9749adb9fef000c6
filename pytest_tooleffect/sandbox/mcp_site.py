"""The MCP servers in the sandbox image: wheels for the image's Python, installed at build time.

``sandbox/mcp-requirements.txt`` pins the servers (and the SDK).  :func:`install_site` asks the
base image which Python it has (a container with no network), then has pip install those pins
as binary wheels for that Python and platform into ``mcp-site/`` of the build context, which
``sandbox/Dockerfile`` copies into the image; the MCP world puts it on its servers'
``PYTHONPATH``.  pip talks to the package index (PyPI or the machine's configured mirror);
no container ever does.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_tooleffect.sandbox.environment import SandboxError, one_line

__all__ = ["REQUIREMENTS", "SITE", "image_python", "install_site"]

REQUIREMENTS = "mcp-requirements.txt"
SITE = "mcp-site"


def image_python(client: Any, base: str) -> tuple[str, str]:
    """``(major.minor, machine)`` of ``python3`` in the image ``base`` (run once, no network).

    Raises:
        SandboxError: the container failed or printed something else.
    """
    try:
        out = client.containers.run(base, ["/usr/bin/python3", "-c",
                                           "import sys, platform; print('%d.%d' % sys.version_info[:2], "
                                           "platform.machine())"],
                                    network_mode="none", remove=True, entrypoint="")
    except Exception as exc:
        raise SandboxError(f"asking {base} for its Python: {one_line(exc)}") from None
    parts = out.decode().split()
    if len(parts) != 2:
        raise SandboxError(f"asking {base} for its Python: unexpected answer {out[:80]!r}")
    return parts[0], parts[1]


def install_site(context: Path, target: Path, version: str, machine: str,
                 log: Callable[[str], None] = lambda _m: None) -> None:
    """Install the pinned servers into ``target`` as wheels for Python ``version`` on ``machine``
    (``target`` is made empty when the context pins none).

    Raises:
        SandboxError: pip failed (its last lines are in the message).
    """
    target.mkdir(parents=True, exist_ok=True)
    requirements = context / REQUIREMENTS
    if not requirements.is_file():
        return
    platforms = [f"manylinux2014_{machine}", f"manylinux_2_17_{machine}", f"manylinux_2_28_{machine}"]
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
           "--only-binary=:all:", "--implementation", "cp", "--python-version", version,
           *(arg for p in platforms for arg in ("--platform", p)), "--target", str(target), "-r", str(requirements)]
    log(f"pip install -r {requirements.name} --target {SITE}/ (Python {version}, {machine})")
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).strip().splitlines()[-3:])[:600]
        raise SandboxError(f"installing the MCP servers for the sandbox image failed: {tail}")
