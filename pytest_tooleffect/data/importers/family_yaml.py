"""A family file an importer wrote before, rewritten with the user's comments kept.

An importer that runs again on its own output (``tooleffect import mcp``) replaces the keys it
owns and keeps the rest; a user's comments in ``family.yaml`` (why a policy was chosen, what a
key means to the team) are part of what is kept.  ruamel.yaml's round-trip mode (the ``mcp``
extra) reads the comments with the data and writes them back where they were; the keys the
importer owns are updated in place (a mapping key by key), so the comments next to them stay too.
The importer's own header (the comment lines it writes at the top) is made anew each time.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_tooleffect.util.extras import require

__all__ = ["rewrite_family"]


def _without_header(text: str, header: Sequence[str]) -> str:
    """``text`` without the lines of its leading comment block that start with one of ``header``'s
    prefixes (the importer's own lines; a user's comment lines there are kept).
    """
    lines = text.splitlines(keepends=True)
    kept: list[str] = []
    leading = True
    for line in lines:
        stripped = line.strip()
        if leading and not (stripped.startswith("#") or not stripped):
            leading = False
        if leading and stripped.startswith(tuple(header)):
            continue
        kept.append(line)
    return "".join(kept)


def _update(target: Any, value: Any) -> Any:
    """``value`` merged into ``target`` in place when both are mappings (keys kept in their place,
    with their comments; keys ``value`` lacks removed); otherwise ``value``.
    """
    if not (isinstance(target, dict) and isinstance(value, Mapping)):
        return value
    for key in [k for k in target if k not in value]:
        del target[key]
    for key, new in value.items():
        target[key] = _update(target[key], new) if key in target else new
    return target


def rewrite_family(text: str, header: Sequence[str], updates: Mapping[str, Any], feature: str,
                   width: int = 110) -> str | None:
    """An earlier family file with ``updates`` written into it, every comment but the header kept.

    Args:
        text: the family file as the importer (and then the user) left it; valid YAML.
        header: the prefixes of the importer's own comment lines (``"# Written by `tooleffect
            import mcp`"``): left out of the leading comment block, for the caller to write anew.
        updates: the keys the importer owns and their new values (JSON-like); a mapping value is
            merged into the earlier mapping in place, so its keys' comments stay.
        feature: the command, for the error a missing extra raises.
        width: the line width the YAML is written at.

    Returns:
        The new YAML text (without the header), or ``None`` when the document is not a mapping.

    Raises:
        MissingExtra: ruamel.yaml (the ``mcp`` extra) is not installed.
        ValueError: ``text`` is not valid YAML (ruamel.yaml's ``YAMLError``).
    """
    require("ruamel", feature)
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    yaml = YAML(typ="rt")
    yaml.width = width
    yaml.preserve_quotes = True
    try:
        data = yaml.load(_without_header(text, header))
    except YAMLError as exc:
        raise ValueError(" ".join(str(exc).split())) from None
    if not isinstance(data, dict):
        return None
    for key, value in updates.items():
        data[key] = _update(data[key], value) if key in data else value
    out = io.StringIO()
    yaml.dump(data, out)
    return out.getvalue()
