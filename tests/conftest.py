"""Shared paths for the plugin's own tests."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import filelock
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOOLEFFECT_SHARED", REPO.parent / "shared"))
#: Why the tests marked ``shared`` cannot run here ("" when the public data is present).
SHARED_MISSING = "" if (SHARED / "field-cases").is_dir() and (SHARED / "datasets").is_dir() else (
    f"the tests read public data from {SHARED} (datasets/, field-cases/), which is missing: put "
    "the shared/ folder beside the checkout or set TOOLEFFECT_SHARED to where it is")
#: Set by ``make test`` (the full run, as CI runs it): there the data's absence stops the run at once.
REQUIRE_SHARED = os.environ.get("TOOLEFFECT_REQUIRE_SHARED", "") not in ("", "0")
if SHARED_MISSING and REQUIRE_SHARED:
    raise SystemExit(f"{SHARED_MISSING} (TOOLEFFECT_REQUIRE_SHARED is set: the full run needs it)")
#: Every run the suite starts (in-process or in a subprocess) draws its terminal 80 columns wide, whatever
#: the terminal or CI that runs the suite says: what the tests read from a run's output is the same
#: everywhere (a test that needs another width passes COLUMNS to its own run).
os.environ["COLUMNS"] = "80"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Without the public data (and without TOOLEFFECT_REQUIRE_SHARED), skip the tests marked ``shared``."""
    if not SHARED_MISSING:
        return
    skip = pytest.mark.skip(reason=SHARED_MISSING)
    for item in items:
        if item.get_closest_marker("shared") is not None:
            item.add_marker(skip)


def schema_validator(schema: dict[str, Any]) -> Any:
    """A validator for ``schema``, the schema itself checked once: ``validator.validate(instance)``
    raises ``jsonschema.ValidationError`` as ``jsonschema.validate`` does, which checks the schema
    again at every call (tens of milliseconds each: a record log's worth adds up)."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def generated_report_schema() -> dict[str, Any]:
    """The report's JSON Schema, generated from the report models (what ``tooleffect schema report`` prints)."""
    from pytest_tooleffect.report import report_schema

    return report_schema()


class DockerTcp:
    """``scripts/docker-tcp``: the local engine's API on a TCP port of 127.0.0.1 (a remote engine's
    transport), in its own process.  Stop it to cut every stream that went through it.
    """

    def __init__(self) -> None:
        import subprocess
        import sys

        self.process = subprocess.Popen([sys.executable, str(REPO / "scripts" / "docker-tcp")],
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()
        if not self.url.startswith("tcp://127.0.0.1:"):
            self.stop()
            raise RuntimeError(f"scripts/docker-tcp did not start (said {self.url!r})")

    def stop(self) -> None:
        """End the forwarder (its connections close with it)."""
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


#: Extension modules the plugin imports lazily that refuse a second import in one process (numpy
#: says "cannot load module more than once per process").  pytester drops every module an in-process
#: run or a pytester test imported when it ends, so they are imported once before any pytester exists.
ONCE_PER_PROCESS = ("numpy", "scipy.optimize", "scipy.stats")


@pytest.fixture(scope="session")
def _extensions_imported() -> None:
    import importlib

    for name in ONCE_PER_PROCESS:
        importlib.import_module(name)


@pytest.fixture(scope="session")
def litellm_imported() -> None:
    """litellm imported in this process before a pytester run imports it (the LLM judge calls it
    here, not in the model-turn child): pytester drops the modules a run imported when it ends, and
    litellm imported again in one process loses its dependencies' package metadata, so the next
    in-process run fails to load the plugin's entry point.  Seconds of CPU, once per worker that
    asks for it.
    """
    from pytest_tooleffect.decide.turn_process import import_litellm

    import_litellm()


@pytest.fixture
def pytester(_extensions_imported: None, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
             request: pytest.FixtureRequest) -> pytest.Pytester:
    """pytest's ``pytester`` with its folder on ``sys.path``, as ``python -m pytest`` puts it there in
    a child process: an agent module or ``conftest`` helper written beside the cases imports the same
    way whether a test runs pytest in this process (``runpytest``) or in a child
    (``runpytest_subprocess``; a test marked ``subprocess`` gets it from ``runpytest`` too).

    Its runs leave out langsmith's pytest plugin (installed with the LangChain example agent, no
    part of what is tested): pytester clears ``PYTEST_ADDOPTS``, and each run would import it again.
    """
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:langsmith_plugin")
    pytester.syspathinsert()
    if request.node.get_closest_marker("subprocess") is not None:  # the marker says so: every run in a child
        monkeypatch.setattr(pytester, "runpytest", pytester.runpytest_subprocess)
    return pytester


def once_per_session(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """``make(folder)`` run once for the whole session, whichever process asks first, and the folder
    it filled: under xdist the workers share the parent of their base temp folders, and a lock there
    makes the others wait for the first one's folder (made again by the next that asks when making
    it failed).  For what is expensive to make and only read by the tests that use it."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder, done = root / name, root / f"{name}.done"
    with filelock.FileLock(root / f"{name}.lock"):
        if not done.exists():
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            make(folder)
            done.touch()
    return folder


def _run_the_shipped_families(out: Path) -> None:
    import subprocess
    import sys

    from pytest_tooleffect.options import OPT_HTML, OPT_RECORDS, OPT_REPORT

    run = subprocess.run([sys.executable, "-m", "pytest", "cases/", "-m", "not family_tooltalk", "-q", "-p",
                          "no:cacheprovider", "-n", "2", f"{OPT_HTML}={out / 'report.html'}",
                          f"{OPT_REPORT}={out / 'report.json'}", f"{OPT_RECORDS}={out / 'records.jsonl'}"],
                         cwd=REPO, capture_output=True, text=True, timeout=900)
    (out / "stdout.txt").write_text(run.stdout, encoding="utf-8")
    (out / "stderr.txt").write_text(run.stderr, encoding="utf-8")
    (out / "returncode").write_text(str(run.returncode), encoding="utf-8")


@pytest.fixture(scope="session")
def shipped_run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of the shipped families for the session, as ``make report`` runs them (replay, the
    scheduling cases in the Docker sandbox; tooltalk has nothing to replay), under ``-n 2``: the folder
    holding its page (``report.html``), JSON report (``report.json``), record log (``records.jsonl``),
    ``stdout.txt``, ``stderr.txt`` and ``returncode``.  The tests only read it."""
    return once_per_session(tmp_path_factory, "shipped-run", _run_the_shipped_families)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server of its own on 127.0.0.1 (no persistence), for the module that asks."""
    from tests.test_redis_limit import start_redis

    proc, url = start_redis(tmp_path_factory.mktemp("redis"))
    yield url
    proc.terminate()
    proc.wait(timeout=10)
