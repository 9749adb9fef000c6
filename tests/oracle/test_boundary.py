"""The oracle is a pure core: importing it pulls in no pytest, litellm or docker."""

from __future__ import annotations

import subprocess
import sys


def test_oracle_imports_no_framework() -> None:
    code = (
        "import sys, pytest_tooleffect.oracle as o\n"
        "o.score({'tool_calls': []}, {'valid_actions': [{'tool': None}]}, [])\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pytest', '_pytest', 'litellm', 'docker', 'testcontainers', 'pluggy'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"the oracle imported {out.stdout.strip()}"


def _oracle_imports() -> dict[str, list[tuple[str, str]]]:
    """Each oracle module's imports of oracle modules: ``{module: [(imported module, name), ...]}``."""
    import ast
    from pathlib import Path

    import pytest_tooleffect.oracle as oracle

    out: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(Path(oracle.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = out.setdefault(path.stem, [])
        for node in ast.walk(tree):  # lazy imports inside functions count too
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                found.extend((node.module.split(".")[0], alias.name) for alias in node.names)
    return out


def test_oracle_modules_import_one_way() -> None:
    imports = _oracle_imports()
    graph = {m: {dep for dep, _ in deps} for m, deps in imports.items() if m != "__init__"}
    done: set[str] = set()

    def visit(m: str, stack: tuple[str, ...]) -> None:
        assert m not in stack, f"import cycle: {' -> '.join((*stack, m))}"
        if m in done:
            return
        for dep in sorted(graph.get(m, ())):
            visit(dep, (*stack, m))
        done.add(m)

    for m in sorted(graph):
        visit(m, ())


def test_oracle_modules_import_no_private_names() -> None:
    private = [f"{m} imports {name} from {dep}" for m, deps in _oracle_imports().items() for dep, name in deps
               if name.startswith("_")]
    assert not private, private


def test_every_predicate_of_the_rule_language_is_registered() -> None:
    from pytest_tooleffect.oracle.predicates import REGISTRY
    from pytest_tooleffect.oracle.rules import PREDICATES

    assert set(REGISTRY) == set(PREDICATES)


def test_public_names_users_import() -> None:
    from pytest_tooleffect import oracle

    assert {"parse_datetime", "parse_date", "compile_call", "ArgsPlan"} <= set(oracle.__all__)
    assert all(hasattr(oracle, name) for name in oracle.__all__)
