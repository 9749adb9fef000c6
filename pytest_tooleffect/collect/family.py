"""Loading a family: ``family.yaml`` and the files it names (tools, system prompt, oracle
rules), with errors that name the file and the field.

A family lives in ``cases/<family>/``: ``family.yaml`` plus case files (``*.jsonl``: one case a
line; ``*.yaml``/``*.yml``: a list of cases, or ``{cases: [...]}``; see :mod:`.cases`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pytest_tooleffect import formats as models
from pytest_tooleffect.formats import Family, ToolSpec
from pytest_tooleffect.oracle import RuleError, RuleSet, load_rules
from pytest_tooleffect.oracle.rulecheck import rule_problems
from pytest_tooleffect.oracle.rules import UniqueKeyLoader, document_digest
from pytest_tooleffect.util.input_files import read_input_text, special_kind
from pytest_tooleffect.util.jsonl import LoneSurrogate, RepeatedKey, loads
from pytest_tooleffect.util.known_keys import extra_key_message

__all__ = ["CASE_SUFFIXES", "FAMILY_FILE", "FamilyError", "LoadedFamily", "collected_as", "error_location",
           "family_dirs", "family_inputs", "is_case_file", "is_family_dir", "load_family", "named_files",
           "written_by", "yaml_load", "yaml_load_items", "yaml_load_with_lines", "yaml_written"]

FAMILY_FILE = "family.yaml"
CASE_SUFFIXES = (".jsonl", ".yaml", ".yml")


class _JSONLikeLoader(UniqueKeyLoader):
    """YAML's safe loader without implicit timestamps: case data stays JSON-like (a date-time
    stays the string the author wrote, as it would in JSONL); a key given twice is refused.
    """


_JSONLikeLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def yaml_load(text: str) -> Any:
    """Parse YAML as JSON-like data (no implicit timestamps)."""
    return yaml.load(text, Loader=_JSONLikeLoader)


def yaml_load_with_lines(text: str, key: str) -> tuple[Any, list[int] | None]:
    """Parse YAML as :func:`yaml_load` does, with the line each item of its list starts at.

    Args:
        text: the YAML document.
        key: when the document is a mapping, the key whose list is meant (``cases``).

    Returns:
        ``(data, lines)``: the data, and the 1-based line of each item of the document's list (or of
        its ``key``'s list); ``lines`` is ``None`` when there is no such list.

    Raises:
        yaml.YAMLError: not valid YAML (or a key given twice).
    """
    data, items = yaml_load_items(text, key)
    return data, None if items is None else [item.start_mark.line + 1 for item in items]


def yaml_load_items(text: str, key: str) -> tuple[Any, list[yaml.Node] | None]:
    """Parse YAML as :func:`yaml_load` does, with the node of each item of its list (for
    :func:`yaml_written`; its ``start_mark.line`` is the item's 0-based line).

    Args:
        text: the YAML document.
        key: when the document is a mapping, the key whose list is meant (``cases``).

    Returns:
        ``(data, items)``: the data, and the node of each item of the document's list (or of its
        ``key``'s list); ``items`` is ``None`` when there is no such list.

    Raises:
        yaml.YAMLError: not valid YAML (or a key given twice).
    """
    loader = _JSONLikeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    if isinstance(node, yaml.MappingNode):
        node = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)
    if not isinstance(node, yaml.SequenceNode):
        return data, None
    return data, list(node.value)


_READ_AS = {"tag:yaml.org,2002:int": "the number", "tag:yaml.org,2002:float": "the number",
            "tag:yaml.org,2002:bool": "the boolean", "tag:yaml.org,2002:null": ""}
_STEP = re.compile(r"\.?([^.\[\]]+)|\[(\d+)\]")


def yaml_written(node: yaml.Node | None, field: str) -> str | None:
    """What YAML made of an unquoted value the author meant as text, in words, with the fix.

    YAML reads an unquoted ``01042`` as the octal number 546, ``1.10`` as 1.1, ``no`` as false,
    ``~`` as null: a field whose schema wants a string then fails with a value the author never
    wrote.

    Args:
        node: the YAML node of one case (an item of :func:`yaml_load_items`), or ``None``.
        field: a field path inside it, as problems name it: ``label.valid_actions[0].args.order_id``.

    Returns:
        ``written 01042, which YAML reads as the number 546: quote it, '01042'``; ``None`` when the
        path does not lead to an unquoted scalar YAML read as a number, a boolean or null (a key
        holding ``.`` or ``[`` is not followed).
    """
    for m in _STEP.finditer(field):
        if isinstance(node, yaml.MappingNode) and m.group(1) is not None:
            node = next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == m.group(1)), None)
        elif isinstance(node, yaml.SequenceNode) and m.group(2) is not None and int(m.group(2)) < len(node.value):
            node = node.value[int(m.group(2))]
        else:
            return None
    if not isinstance(node, yaml.ScalarNode) or node.style or node.tag not in _READ_AS or not node.value:
        return None
    value = _JSONLikeLoader("").construct_object(node) if node.tag != "tag:yaml.org,2002:null" else None
    read = "null" if value is None else f"{_READ_AS[node.tag]} {json.dumps(value)}"
    quote = "'" + node.value.replace("'", "''") + "'"
    return f"written {node.value}, which YAML reads as {read}: quote it, {quote}"


class FamilyError(ValueError):
    """The family file (or a file it names) cannot be used; the message names the file.

    ``referenced_files``: the files the family file names (as :attr:`LoadedFamily.referenced_files`),
    as far as the family file could be read; set by :func:`load_family`.
    """

    referenced_files: frozenset[Path] = frozenset()


_NAMED_FILES = ("oracle", "tools_file", "system_prompt_file")  # the family file's keys that name files


def named_files(directory: Path, names: Iterable[Any]) -> frozenset[Path]:
    """The files ``names`` name in ``directory``, resolved; a name no path can hold is left out."""
    files = set()
    for n in names:
        if n and isinstance(n, str):
            try:
                files.add((directory / n).resolve())
            except (OSError, ValueError, RuntimeError):  # a NUL byte, a symlink loop
                continue
    return frozenset(files)


def is_family_dir(directory: Path) -> bool:
    """``directory`` holds a family: its :data:`FAMILY_FILE` exists, a regular file or not (a family
    file that is a named pipe or a device is the family's error, never a folder without a family).
    """
    return (directory / FAMILY_FILE).exists()


def family_dirs(paths: Iterable[Path]) -> list[Path]:
    """The family folders ``paths`` address: the one way every part of the plugin finds families.

    Args:
        paths: folders or files.  A folder addresses itself when it holds a family and every
            folder below it that holds one; a file addresses its own folder when that holds a family.

    Returns:
        The family folders, each once, sorted.
    """
    dirs: set[Path] = set()
    for path in paths:
        base = path if path.is_dir() else path.parent
        if is_family_dir(base):
            dirs.add(base)
        if path.is_dir():
            dirs.update(found.parent for found in path.rglob(FAMILY_FILE))
    return sorted(dirs)


def is_case_file(path: Path, referenced: frozenset[Path]) -> bool:
    """``path`` is a case file of the family in its directory: a case-file suffix, neither the
    family file nor a file it names (``referenced``: the family's ``referenced_files``).
    """
    if path.suffix not in CASE_SUFFIXES or path.name == FAMILY_FILE:
        return False
    try:
        return path.resolve() not in referenced
    except (OSError, RuntimeError):  # a symlink loop: not a file the family names; reading it says what is wrong
        return True


@dataclass(frozen=True)
class LoadedFamily:
    """A family ready for scoring: its model, resolved tools, system prompt and compiled rules."""

    name: str
    directory: Path
    family: Family
    tools: tuple[ToolSpec, ...]
    system_prompt: str | None
    rules: RuleSet
    tools_by_name: Mapping[str, ToolSpec] = field(default_factory=dict)
    world_layout: Mapping[str, Mapping[str, Any]] | None = None
    world_tools: frozenset[str] = frozenset()

    @property
    def referenced_files(self) -> frozenset[Path]:
        """Files the family file names (rules, tools, prompt): never collected as case files."""
        return named_files(self.directory, (getattr(self.family, key) for key in _NAMED_FILES))

    @property
    def rules_fingerprint(self) -> str:
        """SHA-256 (16 hex digits) of what the oracle reads of the family besides its labels: the rules
        document as parsed (:attr:`RuleSet.digest`) and each tool's name, parameter schema and
        annotations.  A shard run under other rules has another one.
        """
        tools = [{"name": t.name, "parameters": t.parameters, "annotations": t.annotations.model_dump(mode="json")}
                 for t in self.tools]
        doc: dict[str, Any] = {"rules": self.rules.digest or document_digest({}), "tools": tools}
        if self.catalog_digest is not None:
            doc["catalog"] = self.catalog_digest
        return document_digest(doc)

    @property
    def catalog_digest(self) -> str | None:
        """SHA-256 (16 hex digits) of an MCP family's catalog and hint policy, folded into each of its
        labels' hashes (:func:`pytest_tooleffect.collect.cases.label_hash`) and so into the label-set
        fingerprint: the server's name and version, whether its hints are trusted, the
        ``annotations:`` policy, and every tool whole (name, ``mcp_name``, title, description,
        parameters, ``outputSchema``, every hint).  A changed catalog or a changed hint is a changed
        label set.  ``None`` for a family with neither ``mcp:`` nor ``annotations:`` (its label
        hashes are its labels' alone).
        """
        fam = self.family
        if fam.mcp is None and fam.annotations is None:
            return None
        source = None if fam.mcp is None else {"server": fam.mcp.server.model_dump(mode="json"),
                                                "trust_annotations": fam.mcp.trust_annotations}
        policy = None if fam.annotations is None else fam.annotations.model_dump(mode="json")
        tools = [t.model_dump(mode="json") for t in self.tools]
        return document_digest({"mcp": source, "annotations": policy, "tools": tools})

    @property
    def meta(self) -> dict[str, Any]:
        """What the report needs from the family: quota and population per bucket."""
        return {"quota": self.family.quota, "population": self.family.population,
                "production": self.family.production}


def load_family(directory: Path) -> LoadedFamily:
    """Load ``directory/family.yaml`` and the files it names (tools, prompt, oracle rules).

    Raises:
        FamilyError: the family file or a file it names is missing or invalid.
    """
    path = directory / FAMILY_FILE
    try:
        return _load_family(directory, path)
    except FamilyError as exc:
        exc.referenced_files = _referenced_anyway(directory, path)
        raise
    except Exception as exc:  # any unreadable input becomes one clear error, never a crash
        error = FamilyError(f"{path}: {type(exc).__name__}: {exc}")
        error.referenced_files = _referenced_anyway(directory, path)
        raise error from exc


def _referenced_anyway(directory: Path, path: Path) -> frozenset[Path]:
    """The files a family file names, read from it without validating it (none if it cannot be read).

    A family that fails to load still keeps its rules, tools and prompt files out of case
    collection.
    """
    raw = _raw_family(path)
    return named_files(directory, (raw.get(key) for key in _NAMED_FILES))


def _raw_family(path: Path) -> Mapping[str, Any]:
    """A family file as YAML reads it, unvalidated (``{}`` when it cannot be read or is no mapping)."""
    try:
        raw = yaml_load(read_input_text(path, "utf-8-sig", pipes=False))
    except Exception:  # unreadable: nothing in it
        return {}
    return raw if isinstance(raw, Mapping) else {}


_NAMED_WHAT = {"oracle": "the oracle rules", "tools_file": "the tools file", "system_prompt_file": "the system prompt"}


def family_inputs(directories: Iterable[Path]) -> list[tuple[str, Path]]:
    """Every file a run reads in the family folders ``directories``, as ``(what, path)``: the family
    file, the files it names (oracle rules, tools, system prompt) and each case file.  The family
    file is read without validating it, so a family that does not load still lists its files.

    Args:
        directories: family folders (each holding :data:`FAMILY_FILE`).

    Returns:
        ``("the family file of the family in cases/demo", path)``, ``("a case file of the family in
        cases/demo", path)``, … in folder order (the folder, not the family's name, says which: a
        name is the family file's text, never printed unescaped).
    """
    out: list[tuple[str, Path]] = []
    for directory in directories:
        path = directory / FAMILY_FILE
        where = f"the family in {directory}"
        out.append((f"the family file of {where}", path))
        raw = _raw_family(path)
        for key in _NAMED_FILES:
            for named in named_files(directory, [raw.get(key)]):
                out.append((f"{_NAMED_WHAT[key]} of {where}", named))
        referenced = named_files(directory, (raw.get(key) for key in _NAMED_FILES))
        try:
            listed = sorted(directory.iterdir())
        except OSError:  # unreadable: collection says so
            continue
        out.extend((f"a case file of {where}", p) for p in listed if is_case_file(p, referenced))
    return out


def collected_as(path: Path) -> str | None:
    """What a file written at ``path`` would be read as by the next run, or ``None``: ``"the family
    file of a family in DIR"`` when it is named ``family.yaml`` (wherever it is: a new family folder
    included), ``"a case file of the family in DIR"`` when its folder holds a family and its name is a
    case file's (a case-file suffix; neither the family file nor a file the family file names).
    """
    folder = path.parent
    if path.name == FAMILY_FILE:  # a new family's file, in a folder that holds none yet: the next run reads it
        return f"the family file of a family in {folder}"
    if not is_family_dir(folder) or not is_case_file(path, _referenced_anyway(folder, folder / FAMILY_FILE)):
        return None
    return f"a case file of the family in {folder}"


#: the first characters of a family file where the command that wrote it says so
_WRITER_HEAD = 4096


def written_by(directory: Path, command: str) -> bool:
    """The family file in ``directory`` says ``command`` wrote it (``"`tooleffect import bfcl`"`` in
    its first lines): an earlier output of that command, which running it again may replace.
    """
    path = directory / FAMILY_FILE
    if not path.is_file():  # a pipe is never opened
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(_WRITER_HEAD).decode("utf-8", "replace")
    except OSError:
        return False
    return f"`{command}`" in head


def _read(path: Path, what: str, family_file: Path) -> str:
    try:
        return read_input_text(path, "utf-8-sig", pipes=False)
    except (OSError, UnicodeDecodeError) as exc:
        raise FamilyError(f"{family_file}: {what} {path}: cannot read: {exc}") from exc


def _load_family(directory: Path, path: Path) -> LoadedFamily:
    try:
        raw = yaml_load(_read(path, "family file", path))
    except yaml.YAMLError as exc:
        raise FamilyError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from exc
    if not isinstance(raw, Mapping):
        raise FamilyError(f"{path}: a family file is a mapping")
    raw = dict(raw)
    raw.setdefault("name", directory.name)
    if raw.get("tools_file"):
        if not isinstance(raw["tools_file"], str):
            raise FamilyError(f"{path}: tools_file: a path to a JSON list of tool specs")
        tf = directory / raw["tools_file"]
        try:
            listed = loads(_read(tf, "tools_file", path))
        except (RepeatedKey, LoneSurrogate) as exc:
            raise FamilyError(f"{path}: tools_file {tf}: {exc}") from exc
        except ValueError as exc:
            raise FamilyError(f"{path}: tools_file {tf}: not valid JSON: {exc}") from exc
        if not isinstance(listed, list):
            raise FamilyError(f"{path}: tools_file {tf}: holds a JSON {type(listed).__name__}, not a list of tools")
        inline = raw.get("tools") or []
        raw["tools"] = [*listed, *(inline if isinstance(inline, list) else [inline])]
    try:
        fam = Family.model_validate(raw)
    except ValidationError as exc:
        raise FamilyError("; ".join(f"{path}: {error_location(e['loc'])}: {extra_key_message(Family, e)}"
                                     for e in exc.errors())) from exc
    for t in fam.tools:
        props = t.parameters.get("properties", {})
        if not isinstance(props, Mapping) or t.parameters.get("type", "object") != "object":
            raise FamilyError(f"{path}: tools.{t.name}.parameters: an object schema with a properties mapping")
    prompt = fam.system_prompt
    if fam.system_prompt_file:
        prompt = _read(directory / fam.system_prompt_file, "system_prompt_file", path)
    if fam.oracle:  # the oracle reads its own file: a pipe or a device is refused here, never opened
        kind = special_kind(directory / fam.oracle)
        if kind is not None:
            raise FamilyError(f"{path}: oracle {directory / fam.oracle}: cannot read: is {kind}, not a file to "
                              "read: a rules file is a regular file")
    try:
        rules = load_rules(directory / fam.oracle) if fam.oracle else RuleSet()
    except RuleError as exc:
        raise FamilyError(f"{path}: oracle: {exc}") from exc
    names = [t.name for t in fam.tools]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise FamilyError(f"{path}: tools: duplicate tool names {dup}")
    if names:
        unknown = rules.unknown_tools(names)
        if unknown:
            raise FamilyError(f"{path}: oracle {directory / str(fam.oracle)}: rules for tools the family does not "
                              f"offer: {', '.join(unknown)} (tools: {', '.join(sorted(names))})")
        missing = rules.unknown_fields({t.name: t.parameters for t in fam.tools})
        if missing:
            raise FamilyError("; ".join(f"{path}: oracle {directory / str(fam.oracle)}: fields.{key}: {why}"
                                        for key, why in missing))
        silent = rule_problems(rules, {t.name: t.parameters for t in fam.tools}, unknown_tools=True)
        if silent:
            where = directory / fam.oracle if fam.oracle else path
            raise FamilyError("; ".join(f"{path}: oracle: {where}: fields.{key}: {reason} "
                                        "(the rule would not take effect)" for key, reason in silent))
    layout, world_tools = None, frozenset[str]()
    if fam.sandbox is not None:
        from pytest_tooleffect.sandbox.environment import SandboxError
        from pytest_tooleffect.sandbox.image import world_spec

        try:
            layout, world_tools = world_spec(fam.sandbox.world)
        except SandboxError as exc:
            raise FamilyError(f"{path}: sandbox.world: {exc}") from exc
    return LoadedFamily(fam.name, directory, fam, tuple(fam.tools), prompt, rules, {t.name: t for t in fam.tools},
                        layout, world_tools)


def error_location(loc: Sequence[Any]) -> str:
    """A pydantic error location as a field path: ``messages[2].content``.

    The name of a model a union tried (or a tagged union chose) is left out: it names no field.
    """
    out = ""
    for part in loc:
        if isinstance(part, str) and part in _MODEL_NAMES:
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


_MODEL_NAMES = frozenset(n for n in models.__all__ if n[:1].isupper())
