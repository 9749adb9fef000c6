"""Case files and labelling files as the labelling commands read them: a case file's cases as JSON
objects (JSON Lines or YAML), and which of the paths given are no file to read.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["YAML_SUFFIXES", "not_files", "read_case_lines"]


def not_files(paths: Sequence[str]) -> list[str]:
    """``"<path>: no such file"``, ``"<path>: is a directory, not a file to read"``, ``"<path>: is a
    character device, not a file to read"`` … for each path that is neither a regular file nor a pipe.
    """
    from pytest_tooleffect.util.input_files import not_an_input

    return [f"{p}: {why}" for p in paths if (why := not_an_input(p)) is not None]


#: the suffixes of YAML case files (a list of cases, or a mapping with ``cases:``)
YAML_SUFFIXES = (".yaml", ".yml")


def read_case_lines(path: Path, needs: Sequence[str] = ("id",)) -> list[dict[str, Any]]:
    """The cases of a case file as JSON objects, each with the keys ``needs``: one a line of a JSONL
    file, or the items of a YAML file's list (``*.yaml``/``*.yml``: a list of cases, or ``{cases: [...]}``).

    Raises:
        ValueError: the file is not UTF-8, not valid YAML, or a line (item) is not a JSON object
            (mapping) with those keys (names the file and the line).
        OSError: the file cannot be read.
    """
    if path.suffix.lower() in YAML_SUFFIXES:
        return _yaml_cases(path, needs)
    from pytest_tooleffect.util.jsonl import read_objects

    out = []
    for n, c in read_objects(path, "a case"):
        missing = [k for k in needs if k not in c]
        if missing:
            raise ValueError(f"{path}: line {n}: field {missing[0]!r} is missing")
        out.append(c)
    return out


def _yaml_cases(path: Path, needs: Sequence[str]) -> list[dict[str, Any]]:
    """The cases of a YAML case file (see :func:`read_case_lines`), each named by the line its item starts at."""
    from collections.abc import Mapping

    import yaml

    from pytest_tooleffect.collect.family import yaml_load_with_lines
    from pytest_tooleffect.util.input_files import read_input_text

    try:
        doc, lines = yaml_load_with_lines(read_input_text(path, "utf-8-sig"), "cases")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    if isinstance(doc, Mapping) and "cases" in doc:
        doc = doc["cases"]
    if doc is None:
        return []
    if not isinstance(doc, list):
        raise ValueError(f"{path}: a YAML case file holds a list of cases (or a mapping with 'cases:')")
    out = []
    for n, c in enumerate(doc):
        where = f"line {lines[n]}" if lines is not None and n < len(lines) else f"case {n + 1}"
        if not isinstance(c, dict):
            raise ValueError(f"{path}: {where}: a case is a mapping, not {type(c).__name__}")
        missing = [k for k in needs if k not in c]
        if missing:
            raise ValueError(f"{path}: {where}: field {missing[0]!r} is missing")
        out.append(c)
    return out
