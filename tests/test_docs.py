"""The user's guide: the README stays short and its links resolve; the documentation site under
docs/ builds with MkDocs with warnings as errors (broken links and anchors included); the options
reference is generated from ``pytest_tooleffect/options.py`` and names every option; every section
the README had before the site holds it has a page."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pytest_tooleffect import options
from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
DOCS = REPO / "docs"
#: where the repository's files are published (pyproject.toml's project URLs)
GITHUB = "https://github.com/pytest-tooleffect/pytest-tooleffect/blob/main/"

#: Every section of the README before the site took its text (2,299 lines, at 86cb821), and the
#: page that holds it now, under the same heading.
OLD_README_SECTIONS = {
    "What `make report` shows": "report.md",
    "Reading the report": "report.md",
    "Running it on your cases": "running.md",
    "The HTML report": "html-report.md",
    "Live models": "models.md",
    "A real model, offline: the first thing to try without a provider key": "models.md",
    "Hosted and other local models": "models.md",
    "Provider faults, keys and retries": "models.md",
    "Your own agent": "agents.md",
    "Scoring one decision in your own test": "agents.md",
    "Baselines and comparison": "baselines.md",
    "Sandboxes: what the calls do to a world": "sandboxes.md",
    "Case format": "case-format.md",
    "What a no-tool reply must do": "case-format.md",
    "Oracle rules (`oracle/<family>.yaml`)": "case-format.md",
    "A judge for free-text fields": "case-format.md",
    "From traces to labelled sets": "importers/traces.md",
    "ToolTalk: a second real family": "importers/tooltalk.md",
    "BFCL, and how we differ from it": "importers/bfcl.md",
    "Multi-turn: BFCL's back-ends in the sandbox": "importers/bfcl.md",
    "How we differ from BFCL": "importers/bfcl.md",
    "Gating CI": "ci-gating.md",
    "Many machines: shards and one report": "scale-out.md",
    "Installing and releasing": "install.md",
    "Architecture": "architecture.md",
    "Layout": "architecture.md",
    "Benchmarks": "benchmarks.md",
    "Replay as the set grows, and start-up": "benchmarks.md",
}


def _options_reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("options_reference", REPO / "scripts" / "options_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while they are made
    spec.loader.exec_module(module)
    return module


def _mkdocs_build(config_dir: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config_dir``'s mkdocs.yml into ``site``, from ``config_dir``
    (the quickstart page includes README.md relative to it)."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.fail("MkDocs and its Material theme are not installed: pip install -e '.[docs]' (make setup does)")
    # Material 9.7+ prints a banner about MkDocs 2.0 on every build; it says nothing of these docs
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                           str(config_dir / "mkdocs.yml"), "--site-dir", str(site)],
                          cwd=config_dir, env=env, capture_output=True, text=True, timeout=300)


def _warnings(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in (done.stdout + done.stderr).splitlines()
            if re.match(r"\s*(WARNING|ERROR)\b", line) or "Aborted with" in line]


#: A page waiting in docs/pending/ whose link leads nowhere: the build leaves it out, so it breaks nothing.
PENDING_PAGE = "## Gating CI\n\n[not yet a page](nowhere.md)\n"


def _copy_of_the_docs(tmp_path: Path) -> Path:
    """The files a docs build reads, copied into ``tmp_path`` (a build there touches nothing here)."""
    shutil.copytree(DOCS, tmp_path / "docs")
    (tmp_path / "scripts").mkdir()
    for name in ("mkdocs.yml", "README.md", "scripts/options_reference.py"):
        shutil.copy(REPO / name, tmp_path / name)
    return tmp_path


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built (warnings as errors) from a copy of this checkout's docs, with one more page
    in ``docs/pending/`` whose link is broken (``PENDING_PAGE``); the copy is ``site.parent / "src"``."""
    root = _copy_of_the_docs(tmp_path_factory.mktemp("docs") / "src")
    (root / "docs" / "pending").mkdir(exist_ok=True)
    (root / "docs" / "pending" / "branch-under-test.md").write_text(PENDING_PAGE, encoding="utf-8")
    out = root.parent / "site"
    done = _mkdocs_build(root, out)
    assert done.returncode == 0 and _warnings(done) == [], done.stdout + done.stderr
    return out


def test_the_readme_is_short_and_its_links_resolve() -> None:
    assert len(README.splitlines()) <= 300
    assert "make report" in README.split("\n## ")[0] and "make test" in README.split("\n## ")[0]
    # the README is also the package's page on PyPI, where a relative link leads nowhere: its links
    # into the repository are absolute, and each names a file of this checkout
    defined = dict(re.findall(r"^\[([^\]]+)\]: (\S+)$", README, re.M))
    prose = re.sub(r"`[^`]*`", "", re.sub(r"^```.*?^```$", "", README, flags=re.S | re.M))
    used = set(re.findall(r"\]\[([^\]]+)\]", prose))
    assert len(used) >= 20, "the README links into the docs"
    assert used - set(defined) == set(), "a reference link with no definition"
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README) + list(defined.values())
    assert [link for link in links if not re.match(r"[a-z]+://", link)] == [], "a relative link in the README"
    local = [link.removeprefix(GITHUB) for link in links if link.startswith(GITHUB)]
    assert len(local) >= 20, "the README links into the docs"
    assert [link for link in local if not (REPO / link).exists()] == []
    # every page of the site is reachable from the README or from the site's home page
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = {str((REPO / link).resolve().relative_to(DOCS)) for link in local if link.startswith("docs/")}
    linked |= set(re.findall(r"\]\(([\w/.-]+\.md)", index))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md") if "pending" not in p.parts}
    assert pages - linked - {"index.md"} == set()


def test_the_site_builds_with_warnings_as_errors(site: Path) -> None:
    for page in ("index.html", "quickstart/index.html", "options/index.html", "concepts/index.html",
                 "importers/bfcl/index.html", "report-classes.png", "report-decision.png"):
        assert (site / page).is_file(), page
    # the quickstart page is the README's quickstart, included at build time
    quickstart = (site / "quickstart" / "index.html").read_text(encoding="utf-8")
    assert "cases/support/family.yaml" in quickstart and "agent_hasty:decide" in quickstart


def test_a_broken_link_or_anchor_fails_the_build_and_pending_pages_are_left_out(site: Path, tmp_path: Path) -> None:
    # the site built with a broken link in a pending page: no warning, and no page of docs/pending/
    assert (site.parent / "src" / "docs" / "pending" / "branch-under-test.md").read_text(encoding="utf-8") == PENDING_PAGE
    assert (site / "index.html").is_file() and not (site / "pending").exists()

    # a broken link and a broken anchor in a page: the build fails and names each (a strict build
    # reports every warning, then aborts)
    root = _copy_of_the_docs(tmp_path)
    concepts = root / "docs" / "concepts.md"
    broken = {"[a page](no-such-page.md)": "no-such-page.md", "[an anchor](report.md#no-such-anchor)": "#no-such-anchor"}
    concepts.write_text(concepts.read_text(encoding="utf-8") + "".join(f"\n{link}\n" for link in broken),
                        encoding="utf-8")
    done = _mkdocs_build(root, tmp_path / "site-broken")
    assert done.returncode != 0, done.stdout + done.stderr
    for link, said in broken.items():
        assert [line for line in _warnings(done) if said in line], f"{link}: {done.stdout + done.stderr}"
    assert any("Aborted with" in line for line in _warnings(done))


def test_every_option_of_options_py_is_on_the_built_options_page(site: Path) -> None:
    names = {value for key, value in vars(options).items()
             if key.startswith(("OPT_", "INI_")) and isinstance(value, str)}
    assert len(names) >= 40
    page = (site / "options" / "index.html").read_text(encoding="utf-8")
    missing = sorted(name for name in names if name not in page)
    assert missing == [], f"options.py defines them, the built options page lacks them: {missing}"


def test_the_committed_options_page_is_the_generated_one() -> None:
    reference = _options_reference()
    assert (DOCS / "options.md").read_text(encoding="utf-8") == reference.generate(), (
        "docs/options.md is stale: python scripts/options_reference.py --write")
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "options_reference.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_the_options_page_follows_options_py() -> None:
    """An option added to ``addoptions`` shows on the page, with its help and ini key."""
    reference = _options_reference()
    recorder = reference.record()
    recorder.addoption("--tooleffect-example", metavar="N", default=3, help="an option <added> | here")
    recorder.addini("tooleffect_example", "its ini key", default="3")
    page = reference.render(recorder)
    assert ("### `--tooleffect-example` {#--tooleffect-example}\n\nan option &lt;added&gt; \\| here\n\n"
            "value: `N` · default: `3` · ini key: [`tooleffect_example`](#tooleffect_example)\n") in page
    assert ("### `tooleffect_example` {#tooleffect_example}\n\nits ini key\n\n"
            "type: string · default: `3` · option: [`--tooleffect-example`](#--tooleffect-example)\n") in page
    assert page != reference.generate()


def test_every_section_of_the_old_readme_has_a_page() -> None:
    for heading, page in OLD_README_SECTIONS.items():
        text = (DOCS / page).read_text(encoding="utf-8")
        assert re.search(rf"^#+ {re.escape(heading)}$", text, re.M), f"{heading!r} is not a heading of docs/{page}"


def test_every_workflow_shown_pins_one_major_version_of_each_github_action() -> None:
    """The docs, the README, the examples and the repository's own workflows use ``actions/X`` at
    one version each, so a user copying two of them gets no mix of old and current majors."""
    files = [REPO / "README.md", REPO / "action.yml", *DOCS.rglob("*.md"), *(REPO / "examples").rglob("*.y*ml"),
             *(REPO / ".github").rglob("*.y*ml")]
    refs: dict[str, set[str]] = {}
    for path in files:
        if "pending" in path.parts:
            continue
        for action, ref in re.findall(r"\b(actions/[\w-]+)@([\w.]+)", path.read_text(encoding="utf-8")):
            refs.setdefault(action, set()).add(ref)
    assert {"actions/checkout", "actions/setup-python"} <= set(refs)
    assert {action: sorted(r) for action, r in refs.items() if len(r) > 1} == {}
