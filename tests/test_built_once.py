"""Each thing built once per decision (or per run): the emission's parse, the sandbox's world, the
agent's state, the reading of ``pyproject.toml``; "live" defined once; families found one way.

The counts come from real runs of the scheduling family in this process (``inline_run``, the
local sandbox provider): the functions are wrapped so each call is counted and then made.
"""

from __future__ import annotations

import ast
import json
import shutil
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy  # noqa: F401 - loaded before the in-process runs: a C extension that one of them loaded and
import pytest  # pytester then dropped from sys.modules cannot be loaded again
import yaml

import pytest_tooleffect
from pytest_tooleffect import wire
from pytest_tooleffect.collect.family import family_dirs
from pytest_tooleffect.formats import Policy
from pytest_tooleffect.oracle import emission as emission_module
from pytest_tooleffect.settings import Settings, is_live
from tests.conftest import REPO

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

#: a case of the scheduling family with a world (its decision runs in the sandbox)
WORLD_CASE = "sch-conf-01"
#: and two more: one with a world, one whose world the copy takes away (a bare decision)
OTHER_CASES = ("sch-clar-01", "sch-one-15")
AGENTS = '''
calls = []

def sync_agent(state):
    calls.append(state.case_id)
    return {"role": "assistant", "content": "Done."}

async def async_agent(state):
    calls.append(state.case_id)
    return {"role": "assistant", "content": "Done."}
'''


def _scheduling(pytester: pytest.Pytester, references: bool = False) -> None:
    """The scheduling family in ``pytester.path``; with ``references``, :data:`WORLD_CASE` expects
    the end states of two reference trajectories (each one a reset of the sandbox's world).
    """
    shutil.copytree(REPO / "cases" / "scheduling", pytester.path / "cases" / "scheduling")
    (pytester.path / "oracle").mkdir()
    shutil.copy(REPO / "oracle" / "scheduling.yaml", pytester.path / "oracle" / "scheduling.yaml")
    shutil.copy(REPO / "conftest.py", pytester.path / "conftest.py")
    path = pytester.path / "cases" / "scheduling" / "cases.yaml"
    cases = yaml.safe_load(path.read_text(encoding="utf-8"))
    bare = next(c for c in cases if c["id"] == OTHER_CASES[0])
    for key in ("world", "expected_effects", "forbidden_effects", "faults"):
        bare.pop(key, None)
    if references:
        case = next(c for c in cases if c["id"] == WORLD_CASE)
        read = {"name": "read_thread", "arguments": {"thread_id": case["world"]["threads"][0]["thread_id"]}}
        case["expected_effects"] += [{"same_as_after": [read]}, {"same_as_after": [read, read]}]
    path.write_text(yaml.safe_dump(cases, sort_keys=False, allow_unicode=True), encoding="utf-8")


def _count(monkeypatch: pytest.MonkeyPatch, original: Callable[..., Any], modules: list[str]) -> list[Any]:
    """Wrap ``original`` wherever one of ``modules`` (loaded) holds it: every call is counted, then made."""
    calls: list[Any] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(*args, **kwargs)

    wrapped = 0
    for name in modules:
        module = sys.modules[name]
        for attr, value in list(vars(module).items()):
            if value is original:
                monkeypatch.setattr(module, attr, counted)
                wrapped += 1
    assert wrapped, f"{original.__name__} is held by none of {modules}"
    return calls


def _package_modules() -> list[str]:
    import pytest_tooleffect.decide.decision  # noqa: F401 - loaded before the run, so the wrappers are seen
    import pytest_tooleffect.decide.sandbox_run  # noqa: F401
    import pytest_tooleffect.plugin  # noqa: F401

    return sorted(n for n in sys.modules if n == "pytest_tooleffect" or n.startswith("pytest_tooleffect."))


def _decisions(reprec: pytest.HookRecorder) -> list[dict[str, Any]]:
    """The scored records of the run (one per decision made)."""
    records = [json.loads(getattr(r, wire.REPORT_RECORD)) for r in reprec.getreports("pytest_runtest_logreport")
               if hasattr(r, wire.REPORT_RECORD)]
    return [r for r in records if r["outcome"] == "scored"]


def _run(pytester: pytest.Pytester, *args: str) -> pytest.HookRecorder:
    selected = " or ".join((WORLD_CASE, *OTHER_CASES))
    return pytester.inline_run("cases/", "-k", selected, "--tooleffect-sandbox=local", "--tooleffect-records=",
                               "-p", "no:cacheprovider", *args)


def test_a_replayed_decision_is_parsed_once(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _scheduling(pytester)
    parses = _count(monkeypatch, emission_module.parse_emission, _package_modules())
    decisions = _decisions(_run(pytester))
    assert sorted(r["case_id"] for r in decisions) == sorted((WORLD_CASE, *OTHER_CASES))
    assert sum("sandbox" in r for r in decisions) == 2  # two ran in the sandbox, one did not
    assert len(parses) == len(decisions)


def test_an_agents_decision_and_its_state_are_each_made_once(pytester: pytest.Pytester,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_tooleffect.decide import agent

    _scheduling(pytester)
    pytester.makepyfile(agents_once=AGENTS)
    pytester.syspathinsert()
    import agents_once  # before the run: the module the run's agent loader finds, kept after it

    modules = _package_modules()
    parses = _count(monkeypatch, emission_module.parse_emission, modules)
    states = _count(monkeypatch, agent.agent_state, modules)
    decisions = _decisions(_run(pytester, "--tooleffect-agent=sync=agents_once:sync_agent",
                                "--tooleffect-agent=async=agents_once:async_agent"))
    assert sorted({r["policy"] for r in decisions}) == ["async", "sync"]
    assert len(decisions) == 2 * (1 + len(OTHER_CASES))
    assert len(agents_once.calls) == len(decisions)  # one turn each: the agent calls no tool
    assert len(states) == len(decisions)
    assert len(parses) == len(decisions)


def test_one_world_per_decision_however_many_references_it_resets_to(pytester: pytest.Pytester,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_tooleffect.sandbox import Sandbox, World

    _scheduling(pytester, references=True)
    worlds = _count(monkeypatch, World, _package_modules())
    resets: list[World] = []
    reset = Sandbox.reset

    def counted_reset(self: Sandbox, world: World, **kwargs: Any) -> dict[str, int]:
        resets.append(world)
        return reset(self, world, **kwargs)

    monkeypatch.setattr(Sandbox, "reset", counted_reset)
    decisions = _decisions(_run(pytester))
    assert sorted(r["case_id"] for r in decisions if "sandbox" in r) == sorted((WORLD_CASE, OTHER_CASES[1]))
    assert len(resets) == 2 + 2  # each item's sandbox once, and the world case's two reference trajectories
    assert len(worlds) == 2


def test_pyproject_is_read_once_per_run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _scheduling(pytester)
    pytester.makepyfile(agents_once=AGENTS)
    pytester.syspathinsert()
    (pytester.path / "pyproject.toml").write_text(
        '[tool.tooleffect.policies.named]\nagent = "agents_once:sync_agent"\n\n'
        '[tool.tooleffect.gates."*"]\nmax_count = {forbidden = 0}\n', encoding="utf-8")
    reads: list[str] = []
    loads = tomllib.loads

    def counted(text: str, **kwargs: Any) -> dict[str, Any]:
        if sys._getframe(1).f_globals["__name__"].startswith("pytest_tooleffect"):  # pytest reads it too, for ini
            reads.append(text)
        return loads(text, **kwargs)

    monkeypatch.setattr(tomllib, "loads", counted)
    report = pytester.path / "report.json"
    decisions = _decisions(_run(pytester, "--tooleffect-policy=named", f"--tooleffect-report={report}"))
    assert {r["policy"] for r in decisions} == {"named"}  # the policy came from the one reading
    assert json.loads(report.read_text(encoding="utf-8"))["gates"]  # and so did the gates
    assert len(reads) == 1


def test_live_is_one_definition() -> None:
    agent = Policy(name="mine", agent="pkg:fn")
    assert [is_live(m, p, a) for m, p, a in ((None, (), ()), ("openai/x", (), ()), (None, ("named",), ()),
                                               (None, (), (agent,)))] == [False, True, True, True]
    assert not Settings(report=None, records=None, summary=True).live
    assert Settings(report=None, records=None, summary=True, policies=("replay",)).live  # asked for by name


def test_family_dirs_finds_a_family_a_nested_family_and_a_files_family(tmp_path: Path) -> None:
    for folder in ("cases/a", "cases/b/inner", "cases/b/inner/nested", "other"):
        (tmp_path / folder).mkdir(parents=True)
    for family in ("cases/a", "cases/b/inner", "cases/b/inner/nested"):
        (tmp_path / family / "family.yaml").write_text("name: x\n", encoding="utf-8")
    (tmp_path / "cases" / "a" / "cases.jsonl").write_text("", encoding="utf-8")
    found = [str(p.relative_to(tmp_path)) for p in family_dirs([tmp_path / "cases"])]
    assert found == ["cases/a", "cases/b/inner", "cases/b/inner/nested"]
    assert family_dirs([tmp_path / "cases" / "a" / "cases.jsonl", tmp_path / "cases" / "a"]) == [tmp_path / "cases/a"]
    assert family_dirs([tmp_path / "other", tmp_path / "missing"]) == []


def test_no_module_but_the_family_loader_searches_for_family_files() -> None:
    package = Path(pytest_tooleffect.__file__).parent
    searches = []
    for path in sorted(package.rglob("*.py")):
        if path == package / "collect" / "family.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("rglob", "glob")
                    and any(isinstance(a, ast.Name) and a.id == "FAMILY_FILE"
                            or isinstance(a, ast.Constant) and a.value == "family.yaml" for a in node.args)):
                searches.append(f"{path.relative_to(package)}:{node.lineno}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "is_file"
                    and isinstance(node.func.value, ast.BinOp) and isinstance(node.func.value.right, ast.Name)
                    and node.func.value.right.id == "FAMILY_FILE"):  # (folder / FAMILY_FILE).is_file()
                searches.append(f"{path.relative_to(package)}:{node.lineno}")
    assert searches == []
