"""Runs that stay linear in their size: short failure output, no step that rescans the run per
failure or per record, and an offline run that never imports litellm.  Nothing here is timed:
the tests count what is touched (``bench/replay_scale.py`` measures the time).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.demo_family import CASES, write_demo

REDUNDANT = next(c for c in CASES if c["id"] == "e-redundant")  # fails: a read where no tool was needed
READ_OK = next(c for c in CASES if c["id"] == "a-read")

COUNTING_CONFTEST = """
import json, sys
import pytest

SCANNED = []

@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is None:
        return
    getreports = terminal.getreports

    def counting(name):
        out = getreports(name)
        if name == "":
            SCANNED.append(len(out))
        return out

    terminal.getreports = counting

def _write(config):
    name = getattr(config, "workerinput", {}).get("workerid", "main")
    with open(config.rootpath / f"seen-{name}.json", "w") as fh:
        json.dump({"scanned": sum(SCANNED), "lookups": len(SCANNED),
                   "litellm": "litellm" in sys.modules}, fh)

# a worker writes at session finish: its unconfigure can be cut short once it has told the
# controller it finished; the controller writes after its terminal summary
def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):
        _write(session.config)

def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):
        _write(config)
"""


def _many(n: int) -> list[dict[str, object]]:
    """``n`` decisions, every other one failing."""
    return [{**(REDUNDANT if i % 2 else READ_OK), "id": f"c{i:03d}"} for i in range(n)]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_failing_decision_is_its_one_line_reason(pytester: pytest.Pytester, workers: int) -> None:
    write_demo(pytester.path, _many(4))
    result = pytester.runpytest("cases/", "-rf", "-n", str(workers), "--tooleffect-no-summary")
    assert result.ret == 1
    result.assert_outcomes(passed=2, failed=2)
    reason = "tool_when_none_needed: expected {null}, emitted read_thread"
    result.stdout.fnmatch_lines(["FAILED cases/demo/cases.jsonl::c001[[]replay[]] - tool_when_none_needed: *"])
    # the failure section: the record id as headline, the reason as its one line
    result.stdout.fnmatch_lines(["_* demo/c001[[]replay[]] _*"])
    result.stdout.fnmatch_lines(["_* demo/c003[[]replay[]] _*"])
    assert result.stdout.lines.count(reason) == 2
    assert "DecisionFailed" not in result.stdout.str()


def test_the_failure_summary_does_not_rescan_the_run_per_failure(pytester: pytest.Pytester) -> None:
    """pytest looks a failure's teardown output up in every passing setup/teardown report kept:
    failures × items reports touched unless those with nothing to print are not kept.
    """
    n = 60
    write_demo(pytester.path, _many(n))
    pytester.makeconftest(COUNTING_CONFTEST)
    result = pytester.runpytest("cases/", "--tooleffect-no-summary")
    result.assert_outcomes(passed=n // 2, failed=n // 2)
    seen = json.loads(Path(pytester.path, "seen-main.json").read_text())
    assert seen["lookups"] >= n // 2  # one lookup per failure: the count below is what they touched
    assert seen["scanned"] <= 2 * n, seen  # linear in the run's items, not failures × items


def test_teardown_output_is_still_printed_beside_a_failure(pytester: pytest.Pytester) -> None:
    write_demo(pytester.path, _many(2))
    pytester.makeconftest("""
import pytest

@pytest.fixture(autouse=True)
def said_at_teardown(request):
    yield
    print("teardown of", request.node.name)
""")
    result = pytester.runpytest("cases/", "--tooleffect-no-summary")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*Captured stdout teardown*", "teardown of c001[[]replay[]]"])


@pytest.mark.subprocess  # whether litellm was imported is read from the process that ran
@pytest.mark.parametrize("workers", [0, 2])
def test_an_offline_run_never_imports_litellm(pytester: pytest.Pytester, workers: int) -> None:
    write_demo(pytester.path)
    pytester.makeconftest(COUNTING_CONFTEST)
    result = pytester.runpytest("cases/", "-n", str(workers))
    assert result.ret == 1
    seen = [json.loads(p.read_text()) for p in pytester.path.glob("seen-*.json")]
    assert len(seen) == 1 + workers  # the controller and each worker said
    assert not any(s["litellm"] for s in seen), seen


HOLDING_CONFTEST = """
import json
import pytest
from pytest_tooleffect.collect.cases import CaseRef
from pytest_tooleffect.collect.items import CaseItem

LOADS, HELD, RAN = [], [], []
_load, _release = CaseRef.load, CaseItem.release

def load(self):
    LOADS.append(self.id)
    return _load(self)

def release(self):
    if self._case is not None and self.ref.case is None:
        LOADS.append(None)  # one case let go
    _release(self)

CaseRef.load = load
CaseItem.release = release

def pytest_runtest_call(item):
    if isinstance(item, CaseItem):
        RAN.append(item.ref.id)
        HELD.append(sum(1 for x in LOADS if x is not None) - LOADS.count(None))

def pytest_sessionfinish(session):  # not unconfigure: a worker's can be cut short once it has finished
    name = getattr(session.config, "workerinput", {}).get("workerid", "main")
    with open(session.config.rootpath / f"held-{name}.json", "w") as fh:
        json.dump({"loads": [x for x in LOADS if x is not None], "ran": RAN, "held": HELD}, fh)
"""


@pytest.mark.parametrize("workers", [0, 2])
def test_a_process_holds_the_cases_of_its_running_items_only(pytester: pytest.Pytester, workers: int) -> None:
    """Collection keeps a reference per case, not the case: each item reads its own case once, in
    setup, and lets it go after teardown; an xdist worker reads only the cases of the items it runs.
    """
    n = 12
    write_demo(pytester.path, _many(n))
    pytester.makeconftest(HOLDING_CONFTEST)
    result = pytester.runpytest("cases/", "-n", str(workers), "--tooleffect-no-summary", "-p", "no:randomly")
    result.assert_outcomes(passed=n // 2, failed=n // 2)
    seen = {p.name: json.loads(p.read_text()) for p in pytester.path.glob("held-*.json")}
    runners = [s for name, s in seen.items() if (name != "held-main.json") == bool(workers)]
    assert len(runners) == max(1, workers)
    assert sorted(i for s in runners for i in s["ran"]) == [f"c{i:03d}" for i in range(n)]
    for s in runners:
        assert sorted(s["loads"]) == sorted(s["ran"]), s  # its own cases, each read once
        assert max(s["held"]) == 1, s  # the running item's case only
    if workers:
        assert all(len(s["ran"]) < n for s in runners), seen  # each ran a share, and read only that share
        assert not seen["held-main.json"]["loads"]  # the controller reads none


@pytest.mark.subprocess
def test_a_live_run_queues_a_window_of_turns_ahead_not_every_item(pytester: pytest.Pytester) -> None:
    """Without xdist, each live item keeps the next PREFETCH_WINDOW × concurrency items queued:
    the process holds the cases of that window (not of every item), the first item waits for its
    own turn only, and the concurrency is still kept in flight."""
    from pytest_tooleffect.decide.decision import PREFETCH_WINDOW
    from pytest_tooleffect.servers.scripted import Reply, ScriptedServer

    n, concurrency = 60, 3
    write_demo(pytester.path, _many(n))
    pytester.makeconftest(HOLDING_CONFTEST)
    with ScriptedServer([Reply(text="done", delay_s=0.3)]) as srv:
        result = pytester.runpytest_subprocess("cases/", "--tooleffect-model=openai/local-test",
                                               f"--tooleffect-api-base={srv.base_url}", "--tooleffect-retries=0",
                                               f"--tooleffect-concurrency={concurrency}", "--tooleffect-no-summary",
                                               "-p", "no:randomly", timeout=300)
        arrivals = sorted(r["_received"] for r in srv.requests)
    result.assert_outcomes(passed=n // 2, failed=n // 2)
    assert len(arrivals) == n
    held = json.loads((pytester.path / "held-main.json").read_text())
    window = PREFETCH_WINDOW * concurrency
    assert sorted(held["loads"]) == sorted(held["ran"]), held  # each case read once
    assert held["held"][0] == window and max(held["held"]) <= window + 1, held["held"]
    # the concurrency in flight: 3 requests at a time arrive together, 0.3 s after the last three
    in_flight = max(sum(1 for t in arrivals if a <= t < a + 0.25) for a in arrivals)
    assert in_flight == concurrency, arrivals


@pytest.mark.subprocess
@pytest.mark.parametrize("workers", [0, 2])
def test_no_turn_is_requested_for_an_item_that_will_not_run(pytester: pytest.Pytester, workers: int) -> None:
    """Prefetching asks no model for an item its setup skips (skip, skipif, xfail(run=False))."""
    from pytest_tooleffect.servers.scripted import Reply, ScriptedServer

    write_demo(pytester.path, _many(12))
    pytester.makeconftest("""
import pytest

def pytest_collection_modifyitems(items):
    for n, item in enumerate(items):
        if n % 4 == 1:
            item.add_marker(pytest.mark.skip(reason="not today"))
        elif n % 4 == 2:
            item.add_marker(pytest.mark.skipif("1 + 1 == 2", reason="arithmetic"))
        elif n % 4 == 3:
            item.add_marker(pytest.mark.xfail(run=False, reason="known"))
""")
    with ScriptedServer([Reply(text="done")]) as srv:
        result = pytester.runpytest_subprocess("cases/", "-n", str(workers), "--tooleffect-model=openai/local-test",
                                               f"--tooleffect-api-base={srv.base_url}", "--tooleffect-retries=0",
                                               "--tooleffect-concurrency=4", "--tooleffect-no-summary",
                                               "-p", "no:randomly", timeout=180)
        requests = len(srv.requests)
    result.assert_outcomes(failed=3, skipped=6, xfailed=3)  # the three that ran needed a tool: a text reply fails
    assert requests == 3


def test_a_failing_decision_does_not_walk_its_traceback(pytester: pytest.Pytester) -> None:
    """pytest filters a failure's traceback (path lookups per frame) before it prints it: for a
    decision's one-line reason that work is not done at all, however many decisions fail.
    """
    n = 20
    write_demo(pytester.path, _many(n))
    pytester.makeconftest("""
import json
import pytest

CALLS = []
_filter = pytest.Function._traceback_filter

def counted(self, excinfo):
    CALLS.append(self.nodeid)
    return _filter(self, excinfo)

pytest.Function._traceback_filter = counted

def pytest_unconfigure(config):
    (config.rootpath / "filtered.json").write_text(json.dumps(CALLS))
""")
    result = pytester.runpytest("cases/", "--tooleffect-no-summary")
    result.assert_outcomes(passed=n // 2, failed=n // 2)
    result.stdout.fnmatch_lines(["FAILED cases/demo/cases.jsonl::c001[[]replay[]] - tool_when_none_needed: *"])
    assert json.loads((pytester.path / "filtered.json").read_text()) == []


def test_a_case_item_sets_up_its_decision_without_a_fixture(pytester: pytest.Pytester) -> None:
    """A decision is obtained by the item's own setup: pytest sets up no fixture for it (a fixture
    taking ``request`` costs three ``RequestFixtureDef`` per item), while a user's autouse fixture
    still runs first.
    """
    n = 6
    write_demo(pytester.path, _many(n))
    pytester.makeconftest("""
import json
import pytest

SETUP = []
ORDER = []

@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    SETUP.append(fixturedef.argname)
    return (yield)

@pytest.fixture(autouse=True)
def user_env(request):
    ORDER.append(("fixture", request.node.name, getattr(request.node, "_decision", None) is None))
    yield

def pytest_unconfigure(config):
    (config.rootpath / "fixtures.json").write_text(json.dumps({"setup": SETUP, "order": ORDER}))
""")
    result = pytester.runpytest("cases/", "--tooleffect-no-summary", "-p", "no:randomly")
    result.assert_outcomes(passed=n // 2, failed=n // 2)
    seen = json.loads((pytester.path / "fixtures.json").read_text())
    assert seen["setup"] == ["user_env"] * n, seen  # the user's fixture only: none for the decision
    assert [o[1] for o in seen["order"]] == [f"c{i:03d}[replay]" for i in range(n)]
    assert all(o[2] for o in seen["order"])  # the user's fixture ran before the decision was made


class _Counted(dict):  # type: ignore[type-arg]
    """A record whose key lookups are counted (``reads`` is shared by all records of one size)."""

    def __init__(self, data: dict[str, object], reads: list[int]) -> None:
        super().__init__(data)
        self.reads = reads

    def __getitem__(self, key: object) -> object:
        self.reads[0] += 1
        return super().__getitem__(key)

    def get(self, key: object, default: object = None) -> object:
        self.reads[0] += 1
        return super().get(key, default)


def test_report_building_reads_each_record_a_bounded_number_of_times(pytester: pytest.Pytester) -> None:
    """The report over 4N records reads each record as often as the report over N does: no step
    of report building (grouping, sorting, per-class and per-kind tables, costs, comparisons)
    rescans the records per record.
    """
    from pytest_tooleffect.report import summarise

    write_demo(pytester.path)
    result = pytester.runpytest("cases/", "--tooleffect-records=r.jsonl", "--tooleffect-no-summary")
    assert result.ret == 1
    base = [json.loads(line) for line in (pytester.path / "r.jsonl").read_text().splitlines()]
    assert len(base) >= 5
    per_record = {}
    for copies in (20, 80):
        reads = [0]
        records = [_Counted({**r, "id": f"{r['id']}-{k}", "case_id": f"{r['case_id']}-{k}"}, reads)
                   for k in range(copies) for r in base]
        records += [_Counted({**r, "policy": "other", "id": r["id"].replace("[replay]", "[other]")}, reads)
                    for r in list(records)]
        report = summarise(records, {}).to_json()
        assert report["blocks"] and report["comparisons"]
        per_record[copies] = reads[0] / len(records)
    assert per_record[80] <= per_record[20] * 1.05, per_record
    assert per_record[20] < 100, per_record


STARTUP_CONFTEST = """
import json, sys
import pytest
from pytest_tooleffect.decide.decision import pool_key

SEEN = {}

def pytest_collection_finish(session):
    pool = session.config.stash.get(pool_key, None)
    child = pool.process._proc if pool is not None and pool.process is not None else None
    SEEN["child_at_collection_end"] = child is not None and child.poll() is None

def pytest_sessionfinish(session):
    # at session finish, not unconfigure: a worker's unconfigure can be cut short once it has
    # told the controller it finished (the controller then ends its process)
    config = session.config
    name = getattr(config, "workerinput", {}).get("workerid", "main")
    SEEN["litellm"] = "litellm" in sys.modules
    (config.rootpath / f"startup-{name}.json").write_text(json.dumps(SEEN))
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("workers", [0, 2])
def test_a_live_run_imports_litellm_in_a_child_process_while_it_collects(pytester: pytest.Pytester,
                                                                          workers: int) -> None:
    """The processes that make model turns start their child at configure time (not at the first
    turn), so litellm's import runs during collection, on another core; none of the run's own
    processes imports litellm, and the xdist controller, which makes no turn, starts no child.
    """
    from pytest_tooleffect.servers.scripted import Reply, ScriptedServer

    write_demo(pytester.path, _many(4))
    pytester.makeconftest(STARTUP_CONFTEST)
    with ScriptedServer([Reply(text="done")]) as srv:
        result = pytester.runpytest_subprocess("cases/", "-n", str(workers), "--tooleffect-model=openai/local-test",
                                               f"--tooleffect-api-base={srv.base_url}", "--tooleffect-retries=0",
                                               "--tooleffect-no-summary", timeout=180)
        assert len(srv.requests) == 4
    result.assert_outcomes(passed=2, failed=2)  # a text reply: right where no tool was needed
    seen = {p.stem.removeprefix("startup-"): json.loads(p.read_text()) for p in pytester.path.glob("startup-*.json")}
    assert len(seen) == 1 + workers, seen
    runners = [s for name, s in seen.items() if (name != "main") == bool(workers)]
    assert runners and all(s == {"child_at_collection_end": True, "litellm": False} for s in runners), seen
    if workers:
        assert seen["main"] == {"litellm": False}, seen  # the controller neither collects nor starts a child


def test_a_jsonl_line_that_is_not_utf8_is_one_problem_and_the_rest_loads(tmp_path: Path) -> None:
    from pytest_tooleffect.collect.cases import case_refs, load_family

    fam_dir = write_demo(tmp_path, [READ_OK, {**READ_OK, "id": "c-second"}])
    good = (fam_dir / "cases.jsonl").read_bytes().splitlines()
    (fam_dir / "cases.jsonl").write_bytes(b"\xef\xbb\xbf" + good[0] + b"\n\xff\xfe{\n" + good[1] + b"\n")
    refs, problems = case_refs(fam_dir / "cases.jsonl", load_family(fam_dir))
    assert [r.id for r in refs] == ["a-read", "c-second"]
    assert [str(p) for p in problems] == [f"{fam_dir / 'cases.jsonl'}: file: <file>: line 2 is not UTF-8 text "
                                          "(invalid start byte at byte 0 of the line)"]
    assert [r.load().id for r in refs] == ["a-read", "c-second"]  # each read again from its own line (BOM skipped)


def test_a_case_file_changed_during_the_run_is_named_when_its_case_is_read_again(tmp_path: Path) -> None:
    from pytest_tooleffect.collect.cases import case_refs, load_family

    fam_dir = write_demo(tmp_path, [READ_OK, {**READ_OK, "id": "b-read"}])  # lines of the same length
    (ref, _second), _ = case_refs(fam_dir / "cases.jsonl", load_family(fam_dir))
    lines = (fam_dir / "cases.jsonl").read_text().splitlines()
    (fam_dir / "cases.jsonl").write_text("\n".join([lines[1], lines[0]]) + "\n")
    with pytest.raises(ValueError, match=r"cases.jsonl: case a-read: the line at byte 0 now holds case b-read"):
        ref.load()
    (fam_dir / "cases.jsonl").write_text("")
    with pytest.raises(ValueError, match=r"cases.jsonl: case a-read: cannot be read again at byte 0"):
        ref.load()
    # a line cut short, or with a field of the wrong type: the error says what is wrong, and where
    (fam_dir / "cases.jsonl").write_text(lines[0][: len(lines[0]) // 2])
    with pytest.raises(ValueError, match=r"case a-read: cannot be read again at byte 0 .*: <case>: Invalid JSON: "
                                         r"EOF while parsing"):
        ref.load()
    (fam_dir / "cases.jsonl").write_text(lines[0].replace('"timezone": "Europe/Madrid"', '"timezone": 12345678901234'))
    with pytest.raises(ValueError, match=r"case a-read: cannot be read again at byte 0 .*: timezone: Input should be "
                                         r"a valid string"):
        ref.load()


def test_a_case_line_edited_in_place_during_the_run_is_named_not_scored_under_its_old_label(tmp_path: Path) -> None:
    """An edit that keeps the line's length and its id (a label's thread id, th-1 to th-2) is a
    changed case, not the case validated and hashed at collection."""
    from pytest_tooleffect.collect.cases import case_refs, load_family

    fam_dir = write_demo(tmp_path, [READ_OK])
    (ref,), _ = case_refs(fam_dir / "cases.jsonl", load_family(fam_dir))
    text = (fam_dir / "cases.jsonl").read_text()
    assert "th-1" in text
    (fam_dir / "cases.jsonl").write_text(text.replace("th-1", "th-2"))
    with pytest.raises(ValueError, match=r"cases.jsonl: case a-read: the line at byte 0 is not the one collected "
                                         r"\(the file changed during the run\)"):
        ref.load()
    (fam_dir / "cases.jsonl").write_text(text)
    assert ref.load().id == "a-read"  # the line as collected again


def test_the_logger_registry_can_be_iterated_while_the_background_import_adds_loggers() -> None:
    """pytest's log capture walks every logger at each test phase while litellm's import (on the
    preload thread) creates more: that walk must not fail with "dictionary changed size"."""
    import logging

    from pytest_tooleffect.compat import snapshot_logger_registry

    manager = logging.Logger.manager
    original = manager.loggerDict
    try:
        manager.loggerDict = dict(original)  # the stdlib's plain registry
        with pytest.raises(RuntimeError, match="dictionary changed size during iteration"):
            for i, _ in enumerate(manager.loggerDict.values()):  # as pytest's catching_logs.__enter__
                logging.getLogger(f"tooleffect-test-plain-{i}")  # as an import on another thread
        snapshot_logger_registry()
        seen = 0
        for i, _ in enumerate(manager.loggerDict.values()):
            logging.getLogger(f"tooleffect-test-snapshot-{i}")
            seen += 1
        assert seen and "tooleffect-test-snapshot-0" in manager.loggerDict
        snapshot_logger_registry()  # once: the registry is not wrapped twice
        assert type(manager.loggerDict).__mro__[1] is dict
    finally:
        merged = {**original, **manager.loggerDict}
        manager.loggerDict = original
        original.update(merged)


def test_a_case_line_read_again_leaves_no_file_open(tmp_path: Path) -> None:
    """Reading a case again opens its file for that read alone: however many reads, no descriptor
    is left open after them.
    """
    import os

    from pytest_tooleffect.collect import cases

    files = []
    for i in range(5):
        path = tmp_path / f"c{i}.jsonl"
        path.write_bytes(b"".join(f"line-{i}-{j}\n".encode() for j in range(3)))
        files.append(path)
    width = len(b"line-0-0\n")
    before = sorted(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    for _ in range(4):
        for i, path in enumerate(files):
            for j in range(3):
                assert cases.CaseSpan(path, j * width, width - 1).read() == f"line-{i}-{j}".encode()
    if before is not None:
        assert sorted(os.listdir("/proc/self/fd")) == before


def test_case_files_are_read_again_under_a_low_open_file_limit(tmp_path: Path) -> None:
    """A process that may open few files (``ulimit -n``) still reads every case again: no read
    keeps its file, so the limit is never reached, and nothing turns into "file changed" errors.
    """
    import subprocess
    import sys

    for i in range(40):
        (tmp_path / f"c{i}.jsonl").write_bytes(f"line-{i}\n".encode())
    code = """
import os, resource, sys
from pathlib import Path
from pytest_tooleffect.collect import cases
root = Path(sys.argv[1])
opened = len(os.listdir("/proc/self/fd"))
resource.setrlimit(resource.RLIMIT_NOFILE, (opened + 8, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
got = [cases.CaseSpan(root / f"c{i}.jsonl", 0, len(f"line-{i}")).read().decode() for i in range(40)]
print(got == [f"line-{i}" for i in range(40)])
"""
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True"], out.stderr


def test_a_case_file_replaced_by_a_pipe_is_an_error_not_a_wait(tmp_path: Path) -> None:
    import os
    import threading

    from pytest_tooleffect.collect import cases

    path = tmp_path / "c.jsonl"
    os.mkfifo(path)  # nothing ever writes to it: opening it for reading would block
    raised: list[BaseException] = []

    def read() -> None:
        try:
            cases.CaseSpan(path, 0, 10).read()
        except BaseException as exc:  # noqa: BLE001 - what it raised is the finding
            raised.append(exc)

    reader = threading.Thread(target=read, daemon=True)  # a read that waits must not hang the suite
    reader.start()
    reader.join(10)
    assert not reader.is_alive(), "the read waits on the pipe"
    assert len(raised) == 1 and isinstance(raised[0], OSError) and "not a regular file" in str(raised[0])


def test_a_case_items_setup_failing_outside_the_plugin_stays_in_the_report(pytester: pytest.Pytester) -> None:
    """A user's fixture that raises, or a case that can no longer be read, fails the item's setup
    outside the plugin's own errors: the item is still in the report (an error record, or an
    invalid case naming the file and the id) and the report is not complete (scoring rule 7).
    """
    n = 6
    fam = write_demo(pytester.path, _many(n))
    pytester.makeconftest(f"""
import pytest
from pathlib import Path

SEEN = []

@pytest.fixture(autouse=True)
def user_env(request):
    SEEN.append(request.node.name)
    if request.node.name == "c001[replay]":
        raise RuntimeError("the user's fixture failed")
    if len(SEEN) == 4:  # the rest of the file's cases can no longer be read
        Path({str(fam / "cases.jsonl")!r}).write_text("")
    yield
""")
    result = pytester.runpytest("cases/", "--tooleffect-report", "r.json", "--tooleffect-records", "rec.jsonl",
                                "-p", "no:randomly")
    result.assert_outcomes(passed=2, errors=4)
    recs = {r["case_id"]: r for r in map(json.loads, (pytester.path / "rec.jsonl").read_text().splitlines())}
    assert recs["c001"]["outcome"] == "error" and recs["c001"]["error"]["type"] == "RuntimeError"
    assert sorted(recs) == ["c000", "c001", "c002"]
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["status"] == "incomplete"
    (invalid,) = report["invalid"]
    assert [e["case_id"] for e in invalid["cases"]] == ["c003", "c004", "c005"], invalid
    assert all("cannot be read again" in " ".join(e["problems"]) for e in invalid["cases"])


def test_a_skipif_condition_that_calls_pytest_fail_or_skip_may_hold_and_raises_nothing() -> None:
    """A condition whose truth raises pytest's own outcome (``pytest.fail``/``pytest.skip``: no
    ``Exception``) is one only pytest can judge: the item is not prefetched, and nothing escapes.
    """
    from pytest_tooleffect.decide.decision import mark_may_apply

    class Fails:
        def __bool__(self) -> bool:
            pytest.fail("cannot tell")

    class Skips:
        def __bool__(self) -> bool:
            pytest.skip("cannot tell")

    assert mark_may_apply(pytest.mark.skipif(Fails(), reason="r").mark) is True
    assert mark_may_apply(pytest.mark.skipif(Skips(), reason="r").mark) is True
    assert mark_may_apply(pytest.mark.skipif(False, reason="r").mark) is False
