"""SIGTERM ends a run as Ctrl-C does: a real pytest process running the sandboxed scheduling
family (a real Docker engine), stopped by SIGTERM to its pid while items are in progress, keeps
its finished records, writes its report as ``interrupted`` and removes every container of the
run, at ``-n 0`` and under ``-n 2`` (where only the controller is signalled).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from pytest_tooleffect.options import OPT_RECORDS, OPT_REPORT
from pytest_tooleffect.signals import TermAsInterrupt
from tests.conftest import REPO

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

SLOW = "\n\nimport time as _time\n\n\ndef pytest_runtest_call(item):\n    _time.sleep(0.4)\n"


def _scheduling(pytester: pytest.Pytester) -> None:
    shutil.copytree(REPO / "cases" / "scheduling", pytester.path / "cases" / "scheduling")
    (pytester.path / "oracle").mkdir()
    shutil.copy(REPO / "oracle" / "scheduling.yaml", pytester.path / "oracle" / "scheduling.yaml")
    shutil.copy(REPO / "conftest.py", pytester.path / "conftest.py")


def _containers(run: str) -> list[str]:
    client = docker.from_env()
    try:
        return [c.name for c in client.containers.list(all=True, filters={"label": f"tooleffect.run={run}"})]
    finally:
        client.close()


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("workers", [0, 2])
def test_sigterm_keeps_records_writes_an_interrupted_report_and_removes_the_containers(
        pytester: pytest.Pytester, workers: int) -> None:
    _scheduling(pytester)
    with open(pytester.path / "conftest.py", "a") as fh:
        fh.write(SLOW)
    log, out = pytester.path / "rec.jsonl", pytester.path / "out.txt"
    with open(out, "w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-n", str(workers),
             "cases/", OPT_RECORDS, "rec.jsonl", OPT_REPORT, "report.json"],
            cwd=pytester.path, stdout=sink, stderr=subprocess.STDOUT, env=os.environ.copy())
        try:
            deadline = time.monotonic() + 120
            while len(_lines(log)) < 3 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert proc.poll() is None, out.read_text()  # still running: items are in progress
            proc.send_signal(signal.SIGTERM)
            ret = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    text = out.read_text()
    assert ret == pytest.ExitCode.INTERRUPTED, text
    assert "KeyboardInterrupt: signal SIGTERM" in text
    records = [json.loads(line) for line in _lines(log)]  # every line whole
    assert 3 <= len(records) < 49
    report = json.loads((pytester.path / "report.json").read_text())
    assert report["status"] == "interrupted"
    assert report["blocks"][0]["n_scored"] + report["blocks"][0]["n_errors"] == len(records)
    runs = {r["sandbox"]["run"] for r in records}
    assert len(runs) == 1
    assert _containers(runs.pop()) == []


def test_a_handler_already_installed_is_left_in_place_and_restored() -> None:
    def own(signum: int, frame: object) -> None:
        return None

    previous = signal.signal(signal.SIGTERM, own)
    try:
        plugin = TermAsInterrupt()
        assert signal.getsignal(signal.SIGTERM) is own
        plugin.close()
        assert signal.getsignal(signal.SIGTERM) is own
    finally:
        signal.signal(signal.SIGTERM, previous)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        plugin = TermAsInterrupt()
        with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)  # a second one while the run finishes is ignored
        time.sleep(0.05)
        plugin.close()
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.subprocess
def test_the_xdist_controller_removes_the_containers_of_a_worker_that_died(pytester: pytest.Pytester) -> None:
    _scheduling(pytester)
    with open(pytester.path / "conftest.py", "a") as fh:
        fh.write("\n\nimport os as _os\nimport signal as _signal\n\n_seen = []\n\n\n"
                 "def pytest_runtest_call(item):\n"
                 "    _seen.append(item)\n"
                 "    if len(_seen) == 3 and _os.environ.get('PYTEST_XDIST_WORKER') == 'gw0' \\\n"
                 "            and not _os.path.exists('killed'):\n"
                 "        open('killed', 'w').close()\n"
                 "        _os.kill(_os.getpid(), _signal.SIGKILL)\n")
    result = pytester.runpytest_subprocess("cases/", "-p", "no:randomly", "-n", "2", OPT_RECORDS, "rec.jsonl")
    assert (pytester.path / "killed").exists()
    result.stdout.fnmatch_lines(["*worker 'gw0' crashed*"])
    records = [json.loads(line) for line in _lines(pytester.path / "rec.jsonl")]
    runs = {r["sandbox"]["run"] for r in records}
    assert len(runs) == 1
    assert {r["sandbox"]["worker"] for r in records} >= {"gw0", "gw1"}
    assert _containers(runs.pop()) == []  # the dead worker's container too, not left for the next start


def test_an_interrupt_in_a_frame_without_a_line_number_is_reported_not_an_internal_error() -> None:
    import types

    from pytest_tooleffect.signals import TermAsInterrupt

    try:
        raise KeyboardInterrupt("signal SIGTERM")
    except KeyboardInterrupt as exc:
        caught = exc
    assert caught.__traceback__ is not None
    # a frame interrupted at an instruction that maps to no line: tb_lineno is None (CPython 3.11)
    lineless = types.TracebackType(caught.__traceback__, caught.__traceback__.tb_frame, 10**6, -1)
    assert lineless.tb_lineno is None
    excinfo = pytest.ExceptionInfo.from_exc_info((KeyboardInterrupt, caught, lineless))
    with pytest.raises(TypeError):
        excinfo.getrepr(funcargs=True)  # what pytest's terminal reporter does with it
    handler = TermAsInterrupt()
    try:
        handler.pytest_keyboard_interrupt(excinfo)
    finally:
        handler.close()
    assert "KeyboardInterrupt: signal SIGTERM" in str(excinfo.getrepr(funcargs=True))
