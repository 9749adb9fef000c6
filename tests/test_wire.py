"""xdist's wire names: every ``workerinput`` key and ``TestReport`` attribute is named in ``wire.py`` only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_tooleffect
from pytest_tooleffect import wire

PACKAGE_DIR = Path(pytest_tooleffect.__file__).parent
NAMES = {*wire.WORKER_INPUT_KEYS, wire.WORKER_ID, wire.WORKER_COUNT, *wire.WORKER_OUTPUT_KEYS, *wire.REPORT_ATTRIBUTES}


def _literals(path: Path) -> list[tuple[int, str]]:
    """Every string constant of the module at ``path`` that is a wire name, with its line."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in NAMES]


def test_the_names_are_distinct_and_the_report_attributes_are_the_plugins() -> None:
    assert len(NAMES) == len(wire.WORKER_INPUT_KEYS) + 2 + len(wire.WORKER_OUTPUT_KEYS) + len(wire.REPORT_ATTRIBUTES)
    assert all(name.startswith("tooleffect_") for name in (*wire.WORKER_INPUT_KEYS, *wire.WORKER_OUTPUT_KEYS,
                                                           *wire.REPORT_ATTRIBUTES))


def test_no_module_but_wire_spells_a_wire_name() -> None:
    found = {f"{path.relative_to(PACKAGE_DIR)}:{line}: {value!r}"
             for path in sorted(PACKAGE_DIR.rglob("*.py")) if path.name != "wire.py"
             for line, value in _literals(path)}
    assert sorted(found) == []
    assert len(_literals(PACKAGE_DIR / "wire.py")) == len(NAMES)  # the scan sees the literals where they are


def test_a_wire_name_written_as_a_literal_is_found(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('def f(report):\n    """Sets tooleffect_record."""\n'
                      '    return getattr(report, "tooleffect_record", None)\n', encoding="utf-8")
    assert _literals(module) == [(3, "tooleffect_record")]
