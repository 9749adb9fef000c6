"""BFCL's multi-turn back-end classes, taken from the pinned ``bfcl-eval`` wheel.

The ``bfcl`` sandbox world (``sandbox/worlds/bfcl.py``) runs BFCL's own back-ends
(``bfcl_eval/eval_checker/multi_turn_eval/func_source_code/``, Apache-2.0).  They are not
copied into this repository: :func:`ensure_source` downloads the pinned wheel from the package
index with pip (``--no-deps``: only the wheel), keeps the back-end files and a ``NOTICE`` in a
cache folder, and returns it.  The image build copies that folder into the build context as
``vendor/``; the in-process provider and the importer find it through
``TOOLEFFECT_BFCL_SOURCE``, which :func:`activate` sets.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from pytest_tooleffect.sandbox.environment import SandboxError

__all__ = ["BFCL_EVAL_VERSION", "activate", "cache_root", "ensure_source"]

#: the pinned release (keep equal to ``BFCL_EVAL_VERSION`` in ``sandbox/worlds/bfcl.py``)
BFCL_EVAL_VERSION = "2026.3.23"
_PREFIX = "bfcl_eval/eval_checker/multi_turn_eval/func_source_code/"
_SKIP = ("memory_", "web_search")  # back-ends of other categories, with dependencies the world does not need
#: BFCL's multi-turn checker and what it imports (standard library only), kept beside the
#: back-ends so the conformance check can run BFCL's own verdicts (``bench/bfcl_multi_turn_conformance.py``)
CHECKER = ("bfcl_eval/eval_checker/multi_turn_eval/multi_turn_checker.py",
           "bfcl_eval/eval_checker/multi_turn_eval/multi_turn_utils.py",
           "bfcl_eval/constants/__init__.py",
           "bfcl_eval/constants/executable_backend_config.py")
_NOTICE = """BFCL multi-turn back-ends (func_source_code/), from the bfcl-eval {version} wheel on PyPI
(source: https://github.com/ShishirPatil/gorilla, berkeley-function-call-leaderboard/bfcl_eval).
Licence: Apache License 2.0 (the wheel's metadata: "License: {licence}").
and its multi-turn checker (multi_turn_checker.py, multi_turn_utils.py, constants/executable_backend_config.py).
Unmodified; only the package's empty __init__.py files are written beside them.
"""


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/pytest-tooleffect`` (default ``~/.cache/pytest-tooleffect``)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "pytest-tooleffect"


def ensure_source(log=lambda _m: None) -> Path:  # type: ignore[no-untyped-def]
    """The folder holding ``bfcl_eval/...`` back-ends, BFCL's multi-turn checker and ``NOTICE``,
    downloaded once.

    Returns:
        ``<cache>/bfcl-eval-<version>``; its ``bfcl_eval`` package imports with only the
        standard library and ``mpmath`` (MathAPI).

    Raises:
        SandboxError: pip could not download the wheel, or it lacks the back-ends.
    """
    target = cache_root() / f"bfcl-eval-{BFCL_EVAL_VERSION}"
    if (target / "NOTICE").is_file() and all((target / name).is_file() for name in CHECKER):
        return target
    log(f"downloading bfcl-eval=={BFCL_EVAL_VERSION} (the wheel only) for the bfcl world's back-ends")
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary",
                               ":all:", "-d", tmp, f"bfcl-eval=={BFCL_EVAL_VERSION}"],
                              capture_output=True, text=True)
        wheels = list(Path(tmp).glob("bfcl_eval-*.whl"))
        if done.returncode != 0 or not wheels:
            raise SandboxError(f"could not download bfcl-eval=={BFCL_EVAL_VERSION}: "
                               f"{(done.stderr or done.stdout).strip()[-600:]}")
        staging = Path(tempfile.mkdtemp(prefix="bfcl-", dir=tmp))
        licence = "Apache 2.0"
        with zipfile.ZipFile(wheels[0]) as wheel:
            names = [n for n in wheel.namelist() if n.startswith(_PREFIX) and n.endswith(".py")
                     and not Path(n).name.startswith(_SKIP)] + [n for n in CHECKER if n in wheel.namelist()]
            if not names:
                raise SandboxError(f"{wheels[0].name} has no {_PREFIX}")
            for name in names:
                wheel.extract(name, staging)
            for name in wheel.namelist():
                if name.endswith(".dist-info/METADATA"):
                    for line in wheel.read(name).decode(errors="replace").splitlines():
                        if line.startswith("License:"):
                            licence = line.split(":", 1)[1].strip()
        for package in ("bfcl_eval", "bfcl_eval/eval_checker", "bfcl_eval/eval_checker/multi_turn_eval"):
            (staging / package / "__init__.py").touch()
        (staging / "NOTICE").write_text(_NOTICE.format(version=BFCL_EVAL_VERSION, licence=licence))
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(staging), target)
    return target


def activate() -> Path:
    """:func:`ensure_source`, and ``TOOLEFFECT_BFCL_SOURCE`` pointed at it for this process."""
    root = ensure_source()
    os.environ["TOOLEFFECT_BFCL_SOURCE"] = str(root)
    return root
