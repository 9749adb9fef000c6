"""``pytest_tooleffect.compat``: each use of a private name behaves as the plugin relies on, with
the pytest (and library) installed; and no private name is used outside that module.

``make test-pytest-versions`` runs this file with the oldest and the newest supported pytest.
"""

from __future__ import annotations

import inspect
import logging
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import pytest_tooleffect
from pytest_tooleffect import compat
from pytest_tooleffect.compat import (
    PUBLIC_LOOKALIKES,
    exec_socket,
    litellm_response_cost,
    snapshot_logger_registry,
)

PACKAGE = Path(pytest_tooleffect.__file__).parent
#: the grep of compat's docstring: pytest's private package, or a name after a dot that starts with "_"
PRIVATE = re.compile(r"_pytest\.|\._[a-z]")
#: ``self._name`` / ``cls._name``: an attribute of the class the code is in
OWN = re.compile(r"\b(?:self|cls)\.(_[a-z]\w*)")
#: where a module defines a private name of its own: a method, an attribute assigned, a class attribute
DEFINES = re.compile(r"def (_[a-z]\w*)|(?:self|cls)\.(_[a-z]\w*)\s*(?::[^=\n]*)?=(?!=)|^\s+(_[a-z]\w*)\s*[:=]",
                     re.M)


def private_hits(package: Path) -> list[str]:
    """What the grep finds outside ``compat.py`` that is neither an attribute the package's own
    class defines in the same module nor one of :data:`PUBLIC_LOOKALIKES`, as ``path:line: text``.
    """
    hits = []
    for path in sorted(package.rglob("*.py")):
        if path.name == "compat.py" and path.parent == package:
            continue
        text = path.read_text(encoding="utf-8")
        defined = {name for groups in DEFINES.findall(text) for name in groups if name}
        # a tuple assignment (``a, self._x = ...``) defines too
        defined |= set(re.findall(r"(?:self|cls)\.(_[a-z]\w*)\s*(?:,[^=\n]*)?=(?!=)", text))
        for n, line in enumerate(text.splitlines(), 1):
            rest = OWN.sub(lambda m, own=frozenset(defined): "" if m.group(1) in own else m.group(0), line)
            for allowed in PUBLIC_LOOKALIKES:
                rest = rest.replace(allowed, "")
            if PRIVATE.search(rest):
                hits.append(f"{path.relative_to(package.parent)}:{n}: {line.strip()}")
    return hits


def test_private_names_are_used_in_compat_only() -> None:
    assert private_hits(PACKAGE) == []


def test_the_private_name_check_finds_each_kind_of_use(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "compat.py").write_text("from _pytest.skipping import evaluate_skip_marks\nitem._id = 1\n")
    (package / "a.py").write_text(
        "from _pytest.skipping import evaluate_skip_marks\n"  # pytest's private package
        "x = item._fixtureinfo\n"  # another object's private attribute
        "class C:\n"
        "    def __init__(self):\n"
        "        self._mine, self._also = 1, 2\n"
        "    def _helper(self):\n"
        "        return self._mine + self._also + self._request\n"  # _request: not the class's own
        "os._exit(0)\n")
    assert private_hits(package) == ["pkg/a.py:1: from _pytest.skipping import evaluate_skip_marks",
                                     "pkg/a.py:2: x = item._fixtureinfo",
                                     "pkg/a.py:7: return self._mine + self._also + self._request"]


def test_compat_docstring_names_each_public_lookalike() -> None:
    doc = compat.__doc__ or ""
    assert all(f"``{name}``" in doc for name in PUBLIC_LOOKALIKES)


def test_no_class_of_the_package_overrides_a_private_name_of_pytest_or_a_library() -> None:
    """A method named like a private one of an outside base class (pytest's ``_repr_failure_py``,
    xdist's ``_reschedule``) is a private use even though the grep sees ``self._x`` defined here.
    """
    import importlib
    import pkgutil

    found = []
    for info in pkgutil.walk_packages([str(PACKAGE)], "pytest_tooleffect."):
        if info.name == "pytest_tooleffect.compat" or ".servers.local_model" in info.name:
            continue
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                continue
            outside = [b for b in cls.__mro__[1:] if not b.__module__.startswith("pytest_tooleffect")]
            for name, value in vars(cls).items():
                if not (inspect.isfunction(value) or isinstance(value, (property, classmethod, staticmethod))):
                    continue  # a method: data such as abc's ``_abc_impl`` is no override
                if name.startswith("_") and not name.startswith("__") and any(hasattr(b, name) for b in outside):
                    found.append(f"{module.__name__}.{cls.__qualname__}.{name}")
    assert found == []


# --- PhaseReports -------------------------------------------------------------------------------

PHASES_CONFTEST = """
import pytest

@pytest.fixture
def noisy():
    yield
    print("said in teardown")

@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter):
    kept = terminalreporter.stats.get("", [])
    terminalreporter.write_line(f"KEPT {sorted((r.nodeid.split('::')[-1], r.when) for r in kept)}")
"""

PHASES_TESTS = """
def test_quiet():
    pass

def test_noisy(noisy):
    pass

def test_fails(noisy):
    assert False
"""


def _without_timing(lines: list[str]) -> list[str]:
    return [re.sub(r" in [0-9.]+s.*", "", line) for line in lines if not line.startswith("KEPT")]


def test_phase_reports_keep_only_reports_with_teardown_output_and_pytest_output_is_unchanged(
        pytester: pytest.Pytester) -> None:
    pytester.makeconftest(PHASES_CONFTEST)
    pytester.makepyfile(test_phases=PHASES_TESTS)
    kept = pytester.runpytest("-rA")
    plain = pytester.runpytest("-rA", "-p", "no:tooleffect-phase-reports")
    kept.assert_outcomes(passed=2, failed=1)
    assert "KEPT [('test_fails', 'teardown'), ('test_noisy', 'teardown')]" in kept.outlines
    assert [line for line in plain.outlines if line.startswith("KEPT")] == [
        "KEPT [('test_fails', 'setup'), ('test_fails', 'teardown'), ('test_noisy', 'setup'), "
        "('test_noisy', 'teardown'), ('test_quiet', 'setup'), ('test_quiet', 'teardown')]"]
    assert _without_timing(kept.outlines) == _without_timing(plain.outlines)
    assert "said in teardown" in kept.stdout.str()  # the failure's teardown output is still printed


# --- OneLineFailure -----------------------------------------------------------------------------

ONE_LINE = """
import pytest
from pytest_tooleffect.compat import OneLineFailure

class Quiet(OneLineFailure, pytest.Item):
    def reportinfo(self):
        return self.path, 0, self.name

    def failure_line(self, message):
        return message.removeprefix("headline: ")

    def setup(self):
        if self.name == "setup-fails":
            pytest.fail("headline: the provider failed", pytrace=False)

    def runtest(self):
        if self.name == "call-fails":
            pytest.fail("headline: the decision is wrong", pytrace=False)
        if self.name == "raises":
            raise ValueError("a bug with a traceback")

class Cases(pytest.File):
    def collect(self):
        for name in ("passes", "setup-fails", "call-fails", "raises"):
            yield Quiet.from_parent(self, name=name)

def pytest_collect_file(file_path, parent):
    if file_path.name == "cases.txt":
        return Cases.from_parent(parent, path=file_path)
"""


def test_a_pytrace_false_failure_is_its_one_line_in_every_phase(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(ONE_LINE)
    pytester.path.joinpath("cases.txt").write_text("")
    result = pytester.runpytest("-p", "no:tooleffect")
    result.assert_outcomes(passed=1, failed=2, errors=1)
    out = result.stdout.str()
    # the text between the failure's header and the next section is the line failure_line made
    assert re.search(r"_+ ERROR at setup of setup-fails _+\nthe provider failed\n", out), out
    assert re.search(r"_+ call-fails _+\nthe decision is wrong\n", out), out
    assert not any(line.startswith("headline:") for line in result.outlines)
    # any other failure keeps pytest's own traceback
    raises = out.split(" raises ")[1]
    assert re.search(r"^>", raises, re.M) and re.search(r"^E\s+ValueError: a bug with a traceback$", raises, re.M), out


# --- read_back_node_id --------------------------------------------------------------------------

LAST_FAILED = """
import pytest
from pytest_tooleffect.compat import read_back_node_id

class Case(pytest.Function):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        read_back_node_id(self)

def _passes():
    pass

def _fails():
    pytest.fail("no", pytrace=False)

class Cases(pytest.File):
    def collect(self):
        for name in ("a[replay]", "b[replay]", "c[replay]"):
            yield Case.from_parent(self, name=name, callobj=_fails if name.startswith("b") else _passes)

def pytest_collect_file(file_path, parent):
    if file_path.name == "cases.txt":
        return Cases.from_parent(parent, path=file_path)
"""


def test_a_custom_items_bracketed_node_id_round_trips_through_the_last_failed_cache(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(LAST_FAILED)
    pytester.path.joinpath("cases.txt").write_text("")
    cache = ["-p", "cacheprovider", "-p", "no:tooleffect"]
    first = pytester.runpytest(*cache, "--collect-only", "-q")
    assert [line for line in first.outlines if "::" in line] == [
        "cases.txt::a[replay]", "cases.txt::b[replay]", "cases.txt::c[replay]"]  # the string id is unchanged
    pytester.runpytest(*cache).assert_outcomes(passed=2, failed=1)
    last = pytester.runpytest(*cache, "--lf", "-v")
    last.assert_outcomes(failed=1)  # the passing two are not run (pytest 9.2 lost the failure: all three ran)
    assert "cases.txt::b[replay] FAILED" in last.stdout.str()


# --- fixture_request ----------------------------------------------------------------------------

REQUEST = """
import pytest
from pytest_tooleffect.compat import fixture_request

EVENTS = []

@pytest.fixture
def world():
    EVENTS.append("world up")
    yield "the world"
    EVENTS.append("world down")

class Case(pytest.Function):
    def setup(self):
        super().setup()
        self.got = fixture_request(self).getfixturevalue("world")

def _check():
    pass

class Cases(pytest.File):
    def collect(self):
        yield Case.from_parent(self, name="first", callobj=_check)
        yield Case.from_parent(self, name="second", callobj=_check)

def pytest_collect_file(file_path, parent):
    if file_path.name == "cases.txt":
        return Cases.from_parent(parent, path=file_path)

def pytest_runtest_teardown(item):
    EVENTS.append(f"{item.name}: {item.got}")

def pytest_sessionfinish():
    print("EVENTS", EVENTS)
"""


def test_the_items_fixture_request_sets_a_fixture_up_for_that_item_and_tears_it_down(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(REQUEST)
    pytester.path.joinpath("cases.txt").write_text("")
    result = pytester.runpytest("-p", "no:tooleffect", "-s")
    result.assert_outcomes(passed=2)
    assert ("EVENTS ['world up', 'first: the world', 'world down', 'world up', 'second: the world', 'world down']"
            in result.stdout.str())


# --- fixture_info --------------------------------------------------------------------------------

FIXTURE_INFO = """
import pytest
from pytest_tooleffect.compat import fixture_info

SEEN = []

@pytest.fixture(autouse=True)
def counted(request):
    SEEN.append(request.node.name)

def _check():
    pass

class Cases(pytest.File):
    def collect(self):
        info = None
        for name in ("a", "b", "c"):
            item = pytest.Function.from_parent(self, name=name, callobj=_check, fixtureinfo=info)
            info = info or fixture_info(item)
            assert item.fixturenames == ["counted", "request"], item.fixturenames
            yield item

def pytest_collect_file(file_path, parent):
    if file_path.name == "cases.txt":
        return Cases.from_parent(parent, path=file_path)

def pytest_sessionfinish():
    print("SEEN", SEEN)
"""


def test_a_fixture_closure_handed_to_siblings_runs_their_autouse_fixtures(pytester: pytest.Pytester) -> None:
    """``fixture_info`` gives the closure pytest built for the first item; its siblings built with it
    each run the conftest's autouse fixture, as items that computed their own."""
    pytester.makeconftest(FIXTURE_INFO)
    pytester.path.joinpath("cases.txt").write_text("")
    result = pytester.runpytest("-p", "no:tooleffect", "-s")
    result.assert_outcomes(passed=3)
    assert "SEEN ['a', 'b', 'c']" in result.stdout.str()


# --- unit_scheduler -----------------------------------------------------------------------------

UNITS = """
import os
import pytest
from pytest_tooleffect.compat import unit_scheduler

def pytest_xdist_make_scheduler(config, log):
    # the unit of test_<letter><n> is its letter; ids without a letter keep xdist's own
    return unit_scheduler(config, log, lambda ids, workers: {i: i.split("::test_")[1][0] for i in ids
                                                             if "::test_" in i})

@pytest.fixture(autouse=True)
def where(request):
    yield
    with open(os.path.join(os.path.dirname(__file__), "where.txt"), "a") as fh:
        fh.write(f"{request.node.name} {os.environ.get('PYTEST_XDIST_WORKER')}\\n")
"""


def test_the_unit_scheduler_hands_each_work_unit_to_one_worker_whole(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makeconftest(UNITS)
    pytester.makepyfile(test_units="\n".join(f"def test_{letter}{n}():\n    pass\n"
                                             for letter in "abcd" for n in range(6)))
    result = pytester.runpytest("-p", "no:tooleffect", "-n", "2", "--dist", "loadgroup")
    result.assert_outcomes(passed=24)
    ran = [line.split() for line in pytester.path.joinpath("where.txt").read_text().splitlines()]
    assert len(ran) == 24
    workers_of: dict[str, set[str]] = {}
    for name, worker in ran:
        workers_of.setdefault(name[len("test_")], set()).add(worker)
    assert sorted(workers_of) == ["a", "b", "c", "d"]
    assert all(len(w) == 1 for w in workers_of.values()), workers_of  # each unit on one worker
    assert len(set().union(*workers_of.values())) == 2  # and both workers had work


# --- exec_socket, litellm_response_cost, snapshot_logger_registry -------------------------------

def test_exec_socket_is_the_socket_under_a_socketio_or_the_socket_itself() -> None:
    a, b = socket.socketpair()
    try:
        stream = socket.SocketIO(a, "rwb")
        raw = exec_socket(stream)
        assert raw is a
        raw.settimeout(5)  # what the sandbox channel needs of it: a timeout and a half-close
        raw.sendall(b"ping")
        raw.shutdown(socket.SHUT_WR)
        assert b.recv(10) == b"ping" and b.recv(10) == b""
        assert exec_socket(b) is b
    finally:
        a.close()
        b.close()


def test_litellm_response_cost_is_the_cost_litellm_computed() -> None:
    """On a response litellm made (its ``mock_response``: no network), the cost it computed."""
    pytest.importorskip("litellm")
    code = (
        "import litellm\n"
        "from pytest_tooleffect.compat import litellm_response_cost\n"
        "r = litellm.completion(model='gpt-4o', messages=[{'role': 'user', 'content': 'hi'}], mock_response='hello')\n"
        "print(repr(litellm_response_cost(r)), repr(litellm.completion_cost(completion_response=r, model='gpt-4o')))\n")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, env=env,
                         timeout=300, check=True)
    ours, theirs = map(float, out.stdout.split())
    assert ours > 0 and ours == pytest.approx(theirs)
    assert litellm_response_cost(object()) is None  # not litellm's: priced otherwise


def test_the_logger_registry_can_be_walked_while_another_thread_adds_loggers() -> None:
    snapshot_logger_registry()
    registry = logging.Logger.manager.loggerDict
    stop = threading.Event()

    def add() -> None:
        for n in range(20000):  # new loggers: each one changes the registry's size
            if stop.is_set():
                return
            logging.getLogger(f"tooleffect-compat-test.{n}")

    adder = threading.Thread(target=add, daemon=True)
    adder.start()
    try:
        for _ in range(2000):
            for _logger in registry.values():
                pass
    finally:
        stop.set()
        adder.join()
    assert isinstance(registry.values(), list)
