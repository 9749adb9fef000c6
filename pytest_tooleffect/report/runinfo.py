"""What a reader needs to trust a report later: when and how the run was made, with which
versions, on which commit of the cases, under which policy parameters.

Part of the report stage (``docs/design.md``, "Architecture"): the controller's
:class:`~pytest_tooleffect.report.reporter.Reporter` fills the report's ``run`` section from these.
Versions are read from the installed packages' metadata (:mod:`importlib.metadata`), never by
importing them: importing litellm offline costs seconds and may reach the network.  A policy's
parameters never carry a secret: a key whose name says it holds one (``api_key``, ``token``,
``secret``, ``password``, ``authorization``) is left out, whatever its value (at any depth of the
free-form ``settings``; tool descriptions are keyed by tool names and kept).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["git_state", "now_utc", "versions"]

_PACKAGES = {"plugin": "pytest-tooleffect", "pytest": "pytest", "litellm": "litellm", "pytest_xdist": "pytest-xdist"}


def now_utc() -> str:
    """The time now, ISO 8601 in UTC with a ``Z`` and milliseconds (``2026-12-01T22:51:00.123Z``)."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def versions() -> dict[str, str | None]:
    """The versions of the plugin, pytest, litellm and pytest-xdist, from package metadata.

    Returns:
        ``{plugin, pytest, litellm, pytest_xdist}``; ``None`` for a package not installed.
    """
    out: dict[str, str | None] = {}
    for key, dist in _PACKAGES.items():
        try:
            out[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[key] = None
    return out


def _git(directory: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True, timeout=10,
                              check=False)
    except (OSError, subprocess.SubprocessError):  # no git here, or it hangs
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(directories: Iterable[Path]) -> dict[str, dict[str, Any]]:
    """The git commit each folder is checked out at, and whether its files differ from it.

    Args:
        directories: folders (a family's folder, by family name in the caller).

    Returns:
        By folder (as given), ``{commit, dirty}``: the 40-hex commit of ``HEAD`` and whether a
        tracked file under the folder changed or an untracked one was added.  A folder in no git
        work tree (or with no commit yet, or no git installed) is left out.
    """
    out: dict[str, dict[str, Any]] = {}
    for directory in directories:
        head = _git(directory, "rev-parse", "--verify", "--quiet", "HEAD")
        if head is None or not re.fullmatch(r"[0-9a-f]{40}\n?", head):
            continue
        status = _git(directory, "status", "--porcelain", "--", ".")
        out[str(directory)] = {"commit": head.strip(), "dirty": status is None or bool(status.strip())}
    return out
