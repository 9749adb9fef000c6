"""The package as a user installs it: dependencies that are what the code imports, the rest in
extras, each missing one a clear error."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from pytest_tooleffect.util.extras import EXTRAS
from tests.conftest import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
PACKAGE = REPO / "pytest_tooleffect"
#: Imported, yet no dependency of the package: why each is never needed by a run that lacks it.
NOT_DEPENDENCIES = {"xdist": "compat.unit_scheduler runs only inside pytest-xdist's own scheduler hook"}
#: Declared, yet never imported by name: why each is needed all the same.
NOT_IMPORTED = {"tzdata": "zoneinfo reads its time zones where the system has no database"}


def _names(requirements: list[str]) -> set[str]:
    return {canonicalize_name(Requirement(r).name) for r in requirements}


def _extras() -> dict[str, set[str]]:
    """Each extra's distributions, an extra that names others (``pytest-tooleffect[a,b]``) expanded."""
    raw = PROJECT["optional-dependencies"]

    def expand(extra: str) -> set[str]:
        out: set[str] = set()
        for text in raw[extra]:
            req = Requirement(text)
            if canonicalize_name(req.name) == "pytest-tooleffect":
                for inner in req.extras:
                    out |= expand(inner)
            else:
                out.add(canonicalize_name(req.name))
        return out

    return {extra: expand(extra) for extra in raw}


def _third_party_imports() -> dict[str, list[tuple[Path, ast.stmt, list[ast.AST]]]]:
    """Every import of a module outside the standard library and the package: top-level name →
    ``(file, the import statement, its enclosing nodes from the module down)``."""
    found: dict[str, list[tuple[Path, ast.stmt, list[ast.AST]]]] = {}

    def visit(path: Path, node: ast.AST, parents: list[ast.AST]) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            else:
                tops = [node.module.split(".")[0]] if node.module and not node.level else []
            for top in tops:
                if top not in sys.stdlib_module_names and top not in ("pytest_tooleffect", "__future__"):
                    found.setdefault(top, []).append((path, node, parents))
        for child in ast.iter_child_nodes(node):
            visit(path, child, [*parents, node])

    for path in sorted(PACKAGE.rglob("*.py")):
        visit(path, ast.parse(path.read_text(encoding="utf-8")), [])
    return found


IMPORTS = _third_party_imports()


def _distribution(module: str) -> str:
    dists = packages_distributions().get(module)
    assert dists, f"{module} is imported by the package and installed by no distribution here"
    return canonicalize_name(dists[0])


def test_the_core_dependencies_are_what_the_package_imports() -> None:
    core = _names(PROJECT["dependencies"])
    optional = set().union(*_extras().values())
    imported = {_distribution(m): m for m in IMPORTS if m not in NOT_DEPENDENCIES}
    undeclared = sorted(set(imported) - core - optional)
    assert undeclared == [], f"imported, declared nowhere: {undeclared}"
    unused = sorted(core - set(imported) - set(NOT_IMPORTED))
    assert unused == [], f"declared, imported nowhere (an extra, or nothing): {unused}"
    assert set(NOT_IMPORTED) <= core
    # nothing that statsmodels or pandas did is left to need them
    assert "statsmodels" not in IMPORTS and "pandas" not in IMPORTS
    assert not {"statsmodels", "pandas"} & (core | optional)


def test_extras_name_the_distributions_of_their_modules() -> None:
    extras = _extras()
    core = _names(PROJECT["dependencies"])
    for module, extra in EXTRAS.items():
        assert _distribution(module) in extras[extra], (module, extra)
        assert _distribution(module) not in core, f"{module} is in the core dependencies and in [{extra}]"
    # every module only an extra installs is one util.extras knows
    only_optional = {m for m in IMPORTS if m not in NOT_DEPENDENCIES and _distribution(m) not in core}
    assert only_optional == set(EXTRAS)
    assert extras["all"] == set().union(*(extras[e] for e in ("redis", "labelling", "traces", "local-model",
                                                              "bfcl", "json-report")))
    assert extras["all"] <= extras["dev"]  # make test installs .[dev,examples]: every extra the suite uses
    assert extras["examples"] and not extras["examples"] & extras["all"]


def _requires_before(module: str, statement: ast.stmt, parents: list[ast.AST]) -> bool:
    """Whether the function holding ``statement`` calls ``require("<module>", ...)`` before it."""
    functions = [p for p in parents if isinstance(p, ast.FunctionDef | ast.AsyncFunctionDef)]
    if not functions:
        return False
    for node in ast.walk(functions[-1]):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "require"
                and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == module
                and node.lineno < statement.lineno):
            return True
    return False


def test_every_optional_import_is_lazy_and_preceded_by_require() -> None:
    for module in EXTRAS:
        assert IMPORTS.get(module), f"util.extras lists {module}, which the package never imports"
        for path, statement, parents in IMPORTS[module]:
            where = f"{path.relative_to(REPO)}:{statement.lineno}"
            assert _requires_before(module, statement, parents), (
                f"{where}: import {module} without util.extras.require({module!r}, ...) before it in its function")


def test_a_missing_extra_names_the_install_line() -> None:
    """In an interpreter whose path has no site-packages (so no redis, as in a core install); the
    helper is loaded from its file, since the package's ``__init__`` needs pydantic."""
    code = textwrap.dedent(f"""
        import importlib.util, sys
        sys.path[:] = [p for p in sys.path if "site-packages" not in p]
        spec = importlib.util.spec_from_file_location("extras", {str(PACKAGE / "util" / "extras.py")!r})
        extras = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(extras)
        try:
            extras.require("redis", "ini tooleffect_rate_backend")
        except extras.MissingExtra as exc:
            print(type(exc).__mro__[1].__name__, exc.name, "|", exc)
        """)
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "ImportError redis | ini tooleffect_rate_backend needs the optional package 'redis', which is not "
        "installed: pip install 'pytest-tooleffect[redis]'")
