"""Build the sandbox image locally, from this machine's apt sources; never pull.

Steps (:func:`build_image`):

1. ``tooleffect-sandbox-base:<hash>``: a Debian root filesystem made by ``mmdebstrap`` from the
   deb822 files in ``/etc/apt/sources.list.d/*.sources`` (read at build time; no mirror host is
   written anywhere here), with the variant and packages of ``sandbox/rootfs.json``, piped into
   ``docker import``.
2. ``tooleffect-sandbox:<hash of sandbox/>``: ``sandbox/Dockerfile`` layers the service on that
   base through the engine's build API with ``pull=False``.  The build context is a copy of
   ``sandbox/`` plus ``vendor/``: BFCL's multi-turn back-ends from the pinned ``bfcl-eval``
   wheel (:mod:`.bfcl_source`), for the ``bfcl`` world, and ``mcp-site/``: the MCP servers
   ``sandbox/mcp-requirements.txt`` pins, for the ``mcp`` world (:mod:`.mcp_site`).

Both steps are skipped when their tag exists, so the image is rebuilt only when ``sandbox/``
(or, for the base, the sources or the recipe) changes.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_tooleffect.sandbox.environment import SandboxError, one_line

__all__ = ["IMAGE_REPOSITORY", "build_image", "context_dir", "context_hash", "docker_client", "image_tag",
           "require_image", "sources_files", "world_spec"]

IMAGE_REPOSITORY = "tooleffect-sandbox"
BASE_REPOSITORY = "tooleffect-sandbox-base"
SOURCES_GLOB = "/etc/apt/sources.list.d/*.sources"


def context_dir() -> Path:
    """The image's build context: the checkout's ``sandbox/``, else the copy inside the package."""
    package = Path(__file__).resolve().parents[1]
    for candidate in (package.parent / "sandbox", package / "_sandbox"):
        if (candidate / "service.py").is_file():
            return candidate
    raise SandboxError(f"no sandbox build context (looked for sandbox/service.py beside {package})")


def world_spec(name: str, context: Path | None = None) -> tuple[dict[str, dict[str, Any]], frozenset[str]]:
    """A world's tables, ``{table: {"key": column, "columns": {column: type}}}``, and the names of the
    tools it implements, read from ``sandbox/worlds/<name>.py`` without starting anything.

    Raises:
        SandboxError: no such world, or it declares no ``TABLES`` / ``TOOLS``.
    """
    import importlib.util

    path = (context or context_dir()) / "worlds" / f"{name}.py"
    if not name.isidentifier() or not path.is_file():
        raise SandboxError(f"unknown sandbox world {name!r} (no {path})")
    spec = importlib.util.spec_from_file_location(f"tooleffect_world_layout_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tables = getattr(module, "TABLES", None)
    tools = getattr(module, "TOOLS", None)
    if not isinstance(tables, dict) or not isinstance(tools, dict):
        raise SandboxError(f"{path} declares no TABLES or no TOOLS")
    return ({t: {"key": v["key"], "columns": dict(v["columns"])} for t, v in tables.items()},
            frozenset(tools))


def _files(context: Path) -> list[Path]:
    return sorted(p for p in context.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith((".pyc", ".pyo")))


def context_hash(context: Path | None = None) -> str:
    """SHA-256 (first 12 hex digits) over the build context's relative paths and contents."""
    context = context or context_dir()
    digest = hashlib.sha256()
    for path in _files(context):
        digest.update(path.relative_to(context).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def image_tag(context: Path | None = None) -> str:
    """``tooleffect-sandbox:<context hash>``."""
    return f"{IMAGE_REPOSITORY}:{context_hash(context)}"


def sources_files(pattern: str = SOURCES_GLOB) -> list[Path]:
    """The machine's deb822 apt sources with ``Types: deb``.

    Raises:
        SandboxError: none found.
    """
    import glob

    found = [Path(p) for p in sorted(glob.glob(pattern))
             if any(line.split(":", 1)[0].strip() == "Types" and "deb" in line.split(":", 1)[1].split()
                    for line in Path(p).read_text().splitlines() if ":" in line)]
    if not found:
        raise SandboxError(f"no apt sources with 'Types: deb' in {pattern}: cannot make a root filesystem")
    return found


def _suite(files: list[Path]) -> str:
    for path in files:
        for line in path.read_text().splitlines():
            if line.startswith("Suites:") and line.split(":", 1)[1].split():
                return line.split(":", 1)[1].split()[0]
    raise SandboxError(f"no Suites: line in {', '.join(map(str, files))}")


def docker_client() -> Any:
    """A Docker SDK client for the engine, checked with ``ping``.

    The engine is found as testcontainers finds it (``DOCKER_HOST``, its properties file, then
    the current ``docker context``), so the provider's client and the containers it starts talk
    to one engine, local or remote (``tcp://``, ``ssh://``, with ``DOCKER_TLS_VERIFY`` /
    ``DOCKER_CERT_PATH`` honoured).

    Raises:
        SandboxError: the SDK is missing or no engine answers (the message says how to start one).
    """
    import os

    try:
        import docker
        from testcontainers.core.docker_client import get_docker_host
    except ImportError as exc:  # pragma: no cover - a dependency
        raise SandboxError(f"the docker SDK is not installed: {exc}") from None
    host = None
    try:
        host = get_docker_host()
        environment = {**os.environ, **({"DOCKER_HOST": host} if host else {})}
        client = docker.from_env(timeout=120, environment=environment,
                                 use_ssh_client=bool(host and host.startswith("ssh://")))
        client.ping()
    except Exception as exc:
        where = f" at {host}" if host else ""
        raise SandboxError(
            f"no Docker engine answers{where} ({type(exc).__name__}: {exc}); install Debian's docker.io and start "
            "dockerd (`make docker` does both), or set DOCKER_HOST to a running engine") from None
    return client


def _image_exists(client: Any, tag: str) -> bool:
    """Whether the engine has ``tag``.

    Raises:
        SandboxError: the engine did not answer (a lost connection, an API error).
    """
    import docker

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    except Exception as exc:  # requests' connection errors, docker.errors.APIError
        raise SandboxError(f"checking for sandbox image {tag}: the Docker engine failed: {one_line(exc)}") from None
    return True


def require_image(client: Any, tag: str) -> None:
    """Raise unless ``tag`` exists locally (a container start would otherwise try a registry).

    Raises:
        SandboxError: the image is missing (the message says how to build it), or the engine did
            not answer.
    """
    if not _image_exists(client, tag):
        raise SandboxError(f"sandbox image {tag} is not built: run `tooleffect sandbox build` (or "
                           "`make sandbox-image`); images are built locally and never pulled")


def build_base(client: Any, context: Path, log: Callable[[str], None]) -> str:
    """Make (or find) the imported Debian root filesystem; returns its tag.

    Raises:
        SandboxError: mmdebstrap or docker import failed, or mmdebstrap is missing.
    """
    recipe = json.loads((context / "rootfs.json").read_text())
    files = sources_files()
    suite = _suite(files)
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode())
    for path in files:
        digest.update(path.read_bytes())
    tag = f"{BASE_REPOSITORY}:{digest.hexdigest()[:12]}"
    if _image_exists(client, tag):
        return tag
    for tool, package in (("mmdebstrap", "mmdebstrap"), ("docker", "docker.io")):
        if shutil.which(tool) is None:
            raise SandboxError(f"{tool} is not installed (Debian package {package})")
    cmd = ["mmdebstrap", "--quiet", f"--variant={recipe.get('variant', 'essential')}"]
    if recipe.get("include"):
        cmd.append("--include=" + ",".join(recipe["include"]))
    cmd += [f"--dpkgopt=path-exclude={p}" for p in recipe.get("dpkg_exclude", [])]
    cmd += [suite, "-", *map(str, files)]
    log(f"mmdebstrap {suite} from {', '.join(map(str, files))} | docker import - {tag}")
    maker = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    importer = subprocess.run(["docker", "import", "-", tag], stdin=maker.stdout, capture_output=True)
    assert maker.stdout is not None
    maker.stdout.close()
    made_err = maker.stderr.read().decode(errors="replace") if maker.stderr else ""
    maker.wait()
    if maker.returncode != 0 or importer.returncode != 0:
        if _image_exists(client, tag):
            client.images.remove(tag, force=True)
        raise SandboxError(f"building the root filesystem failed: mmdebstrap exit {maker.returncode}: "
                           f"{made_err.strip()[-800:]}; docker import exit {importer.returncode}: "
                           f"{importer.stderr.decode(errors='replace').strip()[-400:]}")
    return tag


def build_image(context: Path | None = None, *, force: bool = False,
                log: Callable[[str], None] = lambda _m: None) -> str:
    """Build ``tooleffect-sandbox:<hash>`` unless it exists; returns the tag.

    Args:
        context: the build context (default :func:`context_dir`).
        force: rebuild the service layer even when the tag exists.
        log: progress lines.

    Raises:
        SandboxError: no engine, no sources, or a build step failed.
    """
    context = context or context_dir()
    client = docker_client()
    tag = image_tag(context)
    if not force and _image_exists(client, tag):
        log(f"{tag} is up to date")
        return tag
    base = build_base(client, context, log)
    log(f"building {tag} on {base}")
    import tempfile

    import docker

    with tempfile.TemporaryDirectory(prefix="tooleffect-build-") as staging:
        build_context = Path(staging) / "context"
        shutil.copytree(context, build_context, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        if (context / "worlds" / "bfcl.py").is_file():
            # BFCL's back-ends come from the pinned wheel at build time (never committed here)
            from pytest_tooleffect.sandbox.bfcl_source import ensure_source

            shutil.copytree(ensure_source(log), build_context / "vendor")
        # the pinned MCP servers, as wheels for the image's Python (never committed)
        from pytest_tooleffect.sandbox.mcp_site import SITE, image_python, install_site

        install_site(context, build_context / SITE, *image_python(client, base), log=log)
        try:
            client.images.build(path=str(build_context), tag=tag, buildargs={"BASE": base}, pull=False, rm=True,
                                forcerm=True, labels={"tooleffect.context-hash": tag.split(":", 1)[1]})
        except (docker.errors.BuildError, docker.errors.APIError) as exc:
            raise SandboxError(f"building {tag} failed: {exc}") from None
    return tag
