"""Layering: the package's modules import each other without a cycle.

The import graph is read from source with :mod:`ast`, not by importing anything: every
``import`` and ``from ... import`` in a module counts, wherever it is (top level, inside a
function, under ``if TYPE_CHECKING:``), since a lazy import hides a cycle without removing it.
Only imports of the package's own modules are edges.  An import of a package is an edge to its
``__init__``; ``from pkg import name`` is an edge to ``pkg.name`` when that is a submodule, else
to ``pkg``.  Importing ``a.b.c`` also runs ``a`` and ``a.b`` (their ``__init__``), but those are
not counted as edges: every submodule would otherwise be in a cycle with a package that imports it.
"""

from __future__ import annotations

import ast
import graphlib
import importlib.util
from collections.abc import Mapping
from pathlib import Path

import pytest

PACKAGE = "pytest_tooleffect"
#: more elementary cycles than this in one strongly connected component are summarized
CYCLES_PER_COMPONENT = 50


def _modules(package_dir: Path) -> dict[str, Path]:
    """Every module of the package at ``package_dir`` by dotted name (a package by its own name).

    Subdirectories without an ``__init__.py`` are not packages and are skipped, with their files.
    """
    if not (package_dir / "__init__.py").is_file():
        raise ValueError(f"{package_dir} is not a package (no __init__.py)")
    modules: dict[str, Path] = {}

    def walk(directory: Path, name: str) -> None:
        modules[name] = directory / "__init__.py"
        for path in sorted(directory.iterdir()):
            if path.is_dir() and (path / "__init__.py").is_file():
                walk(path, f"{name}.{path.name}")
            elif path.is_file() and path.suffix == ".py" and path.name != "__init__.py":
                modules[f"{name}.{path.stem}"] = path

    walk(package_dir, package_dir.name)
    return modules


def _known(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest prefix of dotted ``name`` that is one of ``modules`` (``None``: an outside import)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in modules:
            return prefix
    return None


def _imported(module: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The package's modules that ``module`` (source at ``path``) imports anywhere in its body."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    # the package relative imports are resolved against: a package's own name, else its parent's
    here = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str | None] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_known(alias.name, modules) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = here.split(".")
                if node.level > len(parts):
                    raise ValueError(f"{path}:{node.lineno}: relative import beyond the top-level package")
                base = ".".join(parts[: len(parts) - node.level + 1])
                if node.module:
                    base = f"{base}.{node.module}"
            else:
                assert node.module is not None  # ``from . import x`` has a level
                base = node.module
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else _known(base, modules))
    return {name for name in found if name is not None and name != module}


def import_graph(package_dir: Path) -> dict[str, set[str]]:
    """The import graph of the package at ``package_dir``, read from source.

    Args:
        package_dir: the package's directory (the one holding its ``__init__.py``); its name is
            the top-level module name.

    Returns:
        For every module of the package (dotted name, a package as its ``__init__``), the
        package's modules it imports anywhere in its source; outside modules are left out.

    Raises:
        ValueError: ``package_dir`` has no ``__init__.py``, or a relative import goes above it.
    """
    modules = _modules(package_dir)
    return {name: _imported(name, path, modules) for name, path in modules.items()}


def strongly_connected_components(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the graph's strongly connected components, each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def _cycles_from(graph: Mapping[str, set[str]], members: set[str], path: list[str], found: list[list[str]],
                 enough: int) -> None:
    """Append to ``found`` the cycles that go on from ``path`` back to its start through members
    larger than the start and not on ``path`` (a depth-first search; stops at ``enough`` found).
    """
    start = path[0]
    for succ in sorted(graph.get(path[-1], set()) & members):
        if len(found) >= enough:
            return
        if succ == start:
            found.append([*path, start])
        elif succ > start and succ not in path:
            path.append(succ)
            _cycles_from(graph, members, path, found, enough)
            path.pop()


def find_cycles(graph: Mapping[str, set[str]], limit: int = CYCLES_PER_COMPONENT) -> list[list[str]]:
    """Every elementary cycle of ``graph``, each as ``[a, b, ..., a]`` starting at its smallest node.

    Args:
        graph: module -> modules it imports.
        limit: at most this many cycles per strongly connected component; when a component has
            more, its members are appended as one more entry, ``[a, b, ..., "..."]``.

    Returns:
        The cycles, sorted (a self-import is a cycle ``[a, a]``).
    """
    cycles: list[list[str]] = []
    for component in strongly_connected_components(graph):
        found: list[list[str]] = []
        for start in component:  # each cycle once: from its smallest member, through larger ones only
            _cycles_from(graph, set(component), [start], found, limit + 1)
        if len(found) > limit:
            cycles.extend(found[:limit])
            cycles.append([*component, "..."])
        else:
            cycles.extend(found)
    return sorted(cycles)


def format_cycle(cycle: list[str]) -> str:
    """``a -> b -> a``."""
    return " -> ".join(cycle)


def assert_acyclic(package_dir: Path) -> None:
    """Fail with every import cycle of the package at ``package_dir``, one per line."""
    cycles = find_cycles(import_graph(package_dir))
    assert not cycles, f"{len(cycles)} import cycle(s):\n" + "\n".join(format_cycle(c) for c in cycles)


def _installed_package_dir() -> Path:
    spec = importlib.util.find_spec(PACKAGE)  # finds the source without running the package
    assert spec is not None and spec.submodule_search_locations, f"{PACKAGE} is not installed"
    return Path(next(iter(spec.submodule_search_locations)))


def test_the_package_has_no_import_cycle() -> None:
    package_dir = _installed_package_dir()
    graph = import_graph(package_dir)
    # the walker saw the package, not an empty directory
    assert f"{PACKAGE}.sandbox.environment" in graph[f"{PACKAGE}.sandbox.docker"]
    assert_acyclic(package_dir)


# -- the walker itself, on small packages written for the purpose ------------------------------


def _write_package(root: Path, files: Mapping[str, str]) -> Path:
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return root / "pkg"


def test_every_kind_of_import_is_an_edge_to_the_module_it_runs(tmp_path: Path) -> None:
    package_dir = _write_package(tmp_path, {
        "pkg/__init__.py": "from .a import f\nfrom . import b\n",
        "pkg/a.py": (
            "from __future__ import annotations\n"
            "import json\n"
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n"
            "    from .sub.c import Thing\n"
            "def f() -> None:\n"
            "    import pkg.sub.d\n"
        ),
        "pkg/b.py": "from pkg.sub import d, name_in_init\nfrom .sub import *\nimport pkg.b\n",
        "pkg/sub/__init__.py": "name_in_init = 1\n",
        "pkg/sub/c.py": "from .. import sub\nfrom ..a import f\n",
        "pkg/sub/d.py": "import pkg\ntry:\n    import yaml\nexcept ImportError:\n    pass\n",
        "pkg/data/not_a_package.py": "from pkg import b\n",
    })
    assert import_graph(package_dir) == {
        "pkg": {"pkg.a", "pkg.b"},
        "pkg.a": {"pkg.sub.c", "pkg.sub.d"},  # under TYPE_CHECKING, inside a function
        "pkg.b": {"pkg.sub.d", "pkg.sub"},  # a submodule, a name from __init__, a star; itself dropped
        "pkg.sub": set(),
        "pkg.sub.c": {"pkg.sub", "pkg.a"},
        "pkg.sub.d": {"pkg"},
    }


def test_a_cycle_through_a_lazy_import_fails_and_every_cycle_is_printed(tmp_path: Path) -> None:
    package_dir = _write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from .b import g\n",
        "pkg/b.py": "def g() -> None:\n    from .a import h\n",
        "pkg/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import x\n",
        "pkg/d.py": "from . import e\n",
        "pkg/e.py": "import pkg.c\nimport pkg.d\n",
    })
    graph = import_graph(package_dir)
    assert [format_cycle(c) for c in find_cycles(graph)] == [
        "pkg.a -> pkg.b -> pkg.a",
        "pkg.c -> pkg.d -> pkg.e -> pkg.c",
        "pkg.d -> pkg.e -> pkg.d",
    ]
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(graph).prepare()
    with pytest.raises(AssertionError, match="3 import cycle") as failure:
        assert_acyclic(package_dir)
    assert "pkg.a -> pkg.b -> pkg.a\n" in str(failure.value)


def test_an_acyclic_package_passes(tmp_path: Path) -> None:
    package_dir = _write_package(tmp_path, {
        "pkg/__init__.py": "from .top import run\n",
        "pkg/top.py": "from .low import helper\ndef run() -> None:\n    from .sub import leaf\n",
        "pkg/low.py": "import json\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/leaf.py": "from ..low import helper\n",
    })
    graph = import_graph(package_dir)
    assert find_cycles(graph) == []
    graphlib.TopologicalSorter(graph).prepare()  # agrees: no CycleError
    assert_acyclic(package_dir)


def test_a_component_with_too_many_cycles_is_summarized(tmp_path: Path) -> None:
    # every module imports every other: far more elementary cycles than the limit
    names = [f"m{i}" for i in range(6)]
    files = {"pkg/__init__.py": ""}
    files.update({f"pkg/{n}.py": "".join(f"from . import {o}\n" for o in names if o != n) for n in names})
    cycles = find_cycles(import_graph(_write_package(tmp_path, files)), limit=5)
    assert len(cycles) == 6
    assert [f"pkg.{n}" for n in names] + ["..."] in cycles


#: The stages of the package, lowest first: a module may import its own stage and the stages
#: before it, never one after (``docs/architecture.md``'s and ``docs/design.md``'s architecture list, in order).
#: Top-level modules are stages of their own: the shared vocabulary low, the entry points last.
STAGES: tuple[frozenset[str], ...] = (
    frozenset({"compat", "util"}),  # pytest's private names; helpers with no import of the plugin
    frozenset({"formats"}),  # the case, family, policy, MCP and perturbation formats: every stage reads them
    frozenset({"oracle"}),  # pure scoring
    frozenset({"sandbox"}),  # sandbox providers and worlds
    frozenset({"options", "settings", "price_file", "outcomes", "wire"}),  # the run's configuration and outcomes
    frozenset({"collect"}),
    frozenset({"decide"}),
    frozenset({"scoring"}),
    frozenset({"report"}),
    frozenset({"ci"}),
    frozenset({"data"}),  # importers, traces' sampling, labelling: tools beside the run path
    frozenset({"servers"}),  # scripted and recorded-decision servers, the local model
    frozenset({"commands"}),
    frozenset({"cli", "plugin", "hookspecs", "signals", ""}),  # entry points; "" is the package itself
)


def stage_of(module: str) -> str:
    """The stage a dotted module name belongs to: its first name under the package ("" for the package)."""
    parts = module.split(".")[1:]
    return parts[0] if parts else ""


def backward_edges(graph: Mapping[str, set[str]], stages: tuple[frozenset[str], ...]) -> list[str]:
    """Every import of a later stage by an earlier one, as ``a -> b``, sorted.

    Raises:
        KeyError: a module's stage is in none of ``stages`` (a new folder must be placed).
    """
    rank = {name: n for n, members in enumerate(stages) for name in members}
    out = []
    for module, deps in graph.items():
        for dep in deps:
            if rank[stage_of(dep)] > rank[stage_of(module)]:
                out.append(f"{module} -> {dep}")
    return sorted(out)


def test_every_module_is_in_a_stage_and_imports_point_one_way() -> None:
    graph = import_graph(_installed_package_dir())
    known = {name for members in STAGES for name in members}
    assert sorted({stage_of(m) for m in graph} - known) == []
    assert backward_edges(graph, STAGES) == []
    # the entry point is built on, never imported back
    assert sorted(m for m, deps in graph.items() if f"{PACKAGE}.plugin" in deps) == []


def test_a_backward_import_between_folders_is_found(tmp_path: Path) -> None:
    package_dir = _write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low/__init__.py": "",
        "pkg/low/a.py": "def f() -> None:\n    from pkg.high.b import g\n",
        "pkg/high/__init__.py": "",
        "pkg/high/b.py": "from pkg.low.a import f\n",
    })
    graph = import_graph(package_dir)
    stages = (frozenset({"low"}), frozenset({"high", ""}))
    assert backward_edges(graph, stages) == ["pkg.low.a -> pkg.high.b"]
    with pytest.raises(KeyError):
        backward_edges(graph, (frozenset({"low"}),))


def test_the_oracle_imports_only_itself_and_the_formats() -> None:
    """The oracle is the pure core: it imports only its own modules, the case formats and the pure
    helpers it shares with the input readers (redaction, the JSON reader refusing a key twice)."""
    graph = import_graph(_installed_package_dir())
    oracle = f"{PACKAGE}.oracle"
    reach = {m: sorted(d for d in deps if not (d == oracle or d.startswith(oracle + ".")
                                               or d in (f"{PACKAGE}.formats", f"{PACKAGE}.util.redaction",
                                                         f"{PACKAGE}.util.json_keys", PACKAGE)))
             for m, deps in graph.items() if m == oracle or m.startswith(oracle + ".")}
    assert {m: d for m, d in reach.items() if d} == {}
