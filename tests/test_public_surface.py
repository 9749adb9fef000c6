"""The public surface is explicit: ``__all__`` is true, the README and the docs import only exported names,
and no module imports another's private names."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "pytest_tooleffect"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "_sandbox" not in p.parts)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def private_imports(source: str) -> list[str]:
    """``from X import _name`` statements in a source text (``__future__`` and dunders aside)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"from {'.' * node.level}{node.module or ''} import {alias.name}")
    return found


def test_the_private_import_check_can_fail() -> None:
    assert private_imports("from .cases import _named_files\nfrom __future__ import annotations\n") == [
        "from .cases import _named_files"]
    assert private_imports("from .cases import named_files\nimport os\n") == []


@pytest.mark.parametrize("path", [*MODULES, *sorted((REPO / "tests").rglob("*.py")),
                                  *sorted((REPO / "bench").glob("*.py")), REPO / "conftest.py"],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_no_private_names_are_imported_across_modules(path: Path) -> None:
    assert private_imports(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(REPO)))
def test_all_names_only_what_the_module_has(path: Path) -> None:
    module = importlib.import_module(_module_name(path))
    exported = getattr(module, "__all__", None)
    if exported is None:
        assert path.name != "__init__.py", f"{path}: a package says what it exports (__all__)"
        return
    assert len(exported) == len(set(exported)), "a name listed twice"
    missing = [n for n in exported if not hasattr(module, n)]
    assert missing == [], f"{path}: __all__ names what the module does not have"


README_IMPORT = re.compile(r"^\s*from (pytest_tooleffect[\w.]*) import ([\w, ]+)$", re.M)


def test_the_readme_and_the_docs_import_only_exported_names() -> None:
    pages = [REPO / "README.md", *sorted(p for p in (REPO / "docs").rglob("*.md") if "pending" not in p.parts)]
    code = "\n".join(b for page in pages
                     for b in re.findall(r"```python[^\n]*\n(.*?)```", page.read_text(encoding="utf-8"), re.S))
    imports = README_IMPORT.findall(code)
    assert len(imports) >= 3, "the docs' Python examples import from the package"
    for module_name, names in imports:
        module = importlib.import_module(module_name)
        for name in (n.strip() for n in names.split(",")):
            assert name in getattr(module, "__all__", ()), f"the docs import {module_name}.{name}, not exported"


def test_no_subpackage_shadows_an_exported_name() -> None:
    """Importing ``pytest_tooleffect.<name>`` binds ``<name>`` on the package: a folder named like an
    exported function (``score``) would replace that function once anything imports the folder."""
    import pytest_tooleffect

    folders = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
               if p.suffix == ".py" or (p / "__init__.py").is_file()}
    assert sorted(set(pytest_tooleffect.__all__) & folders) == []
