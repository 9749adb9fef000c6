"""The options reference page (docs/options.md), generated from ``pytest_tooleffect/options.py``.

``addoptions`` is called with a recorder in place of pytest's parser, so the page lists exactly the
options and ini keys a run registers, with their values, defaults and help as ``pytest --help``
prints them.  Also an MkDocs hook (``hooks:`` in mkdocs.yml): the site always shows the page as
generated at build time, whatever the committed file says.

    python scripts/options_reference.py            # print the page
    python scripts/options_reference.py --write    # write docs/options.md
    python scripts/options_reference.py --check    # exit 1 when docs/options.md is stale
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "options.md"
PAGE_NAME = "options.md"  # the page's path under docs/, as MkDocs names it


@dataclass
class Option:
    """One ``--tooleffect-*`` option as ``group.addoption`` received it."""

    names: tuple[str, ...]
    kwargs: dict[str, Any]


@dataclass
class Ini:
    """One ``tooleffect_*`` ini key as ``parser.addini`` received it."""

    name: str
    help: str
    type: str | None
    default: Any


@dataclass
class Recorder:
    """Stands in for pytest's ``Parser`` and its option group: records what is added."""

    options: list[Option] = field(default_factory=list)
    ini: list[Ini] = field(default_factory=list)
    groups: list[tuple[str, str]] = field(default_factory=list)

    def getgroup(self, name: str, description: str = "", after: str | None = None) -> Recorder:
        self.groups.append((name, description))
        return self

    def addoption(self, *names: str, **kwargs: Any) -> None:
        self.options.append(Option(names, kwargs))

    def addini(self, name: str, help: str, type: str | None = None, default: Any = None) -> None:
        self.ini.append(Ini(name, help, type, default))


def record() -> Recorder:
    """Every option and ini key ``pytest_tooleffect.options.addoptions`` registers."""
    sys.path.insert(0, str(REPO))
    from pytest_tooleffect.options import addoptions
    from pytest_tooleffect.sandbox import registered_providers

    recorder = Recorder()
    addoptions(recorder, registered_providers())  # type: ignore[arg-type]
    return recorder


def _cell(text: str) -> str:
    text = " ".join(str(text).split())
    for raw, shown in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("|", "\\|"), ("*", "\\*")):
        text = text.replace(raw, shown)
    return text


def _code(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _default(value: Any) -> str:
    if value is None or value == "" or value == [] or value is False:
        return ""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{_code(str(value))}`"


def _value(option: Option) -> str:
    kw = option.kwargs
    if kw.get("action") == "store_true":
        return "(a switch)"
    if kw.get("choices"):
        return " \\| ".join(f"`{c}`" for c in kw["choices"])
    return f"`{_code(kw.get('metavar') or 'VALUE')}`"


def render(recorder: Recorder) -> str:
    """The Markdown page for ``recorder``'s options and ini keys: a heading for each (its anchor is
    its name: ``options.md#--tooleffect-records``, ``options.md#tooleffect_records``), its help,
    then its value, default and the option or ini key that sets the same thing.
    """
    ini_names = {i.name for i in recorder.ini}
    option_of = {o.names[0].removeprefix("--").replace("-", "_"): o.names[0] for o in recorder.options}
    lines = [
        "# Options reference",
        "",
        "<!-- generated from pytest_tooleffect/options.py by scripts/options_reference.py: do not edit;",
        "     run `python scripts/options_reference.py --write` (tests/test_docs.py fails when it is stale) -->",
        "",
        "Every `--tooleffect-*` command-line option and `tooleffect_*` ini key the plugin registers, as",
        "`pytest --help` lists them, generated from `pytest_tooleffect/options.py`. An ini key goes in the",
        "`[tool.pytest.ini_options]` table of `pyproject.toml` (or `pytest.ini`), or on the command line as",
        "`-o KEY=VALUE`; where an option and an ini key set the same thing, the option wins. What each one",
        "does in context: [Running it on your cases](running.md).",
        "",
        "## Command-line options",
        "",
    ]
    for option in recorder.options:
        name = option.names[0]
        ini = name.removeprefix("--").replace("-", "_")
        facts = [f"value: {_value(option)}"]
        if _default(option.kwargs.get("default")):
            facts.append(f"default: {_default(option.kwargs.get('default'))}")
        if ini in ini_names:
            facts.append(f"ini key: [`{ini}`](#{ini})")
        lines += [f"### `{name}` {{#{name}}}", "", _cell(option.kwargs.get("help", "")), "",
                  " · ".join(facts), ""]
    lines += ["## Ini keys", ""]
    for key in recorder.ini:
        facts = [f"type: {key.type or 'string'}"]
        if _default(key.default):
            facts.append(f"default: {_default(key.default)}")
        if key.name in option_of:
            facts.append(f"option: [`{option_of[key.name]}`](#{option_of[key.name]})")
        lines += [f"### `{key.name}` {{#{key.name}}}", "", _cell(key.help), "", " · ".join(facts), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def generate() -> str:
    """The page as the current ``options.py`` makes it."""
    return render(record())


# ------------------------------------------------------------------------------ MkDocs hook


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """MkDocs hook: the options page is built from ``options.py`` as it is now."""
    if page.file.src_uri == PAGE_NAME:
        return generate()
    return markdown


def main(argv: list[str] | None = None) -> int:
    """Print, write or check the page; 1 when ``--check`` finds the committed page stale."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"write {PAGE.relative_to(REPO)}")
    mode.add_argument("--check", action="store_true", help=f"exit 1 when {PAGE.relative_to(REPO)} is stale")
    args = parser.parse_args(argv)
    page = generate()
    if args.write:
        PAGE.write_text(page, encoding="utf-8")
    elif args.check:
        if not PAGE.is_file() or PAGE.read_text(encoding="utf-8") != page:
            print(f"{PAGE.relative_to(REPO)} is stale: run python scripts/options_reference.py --write",
                  file=sys.stderr)
            return 1
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
