"""The nodes of case files whose names hold control characters: pytest prints node ids raw.

pytest prints a node id as it is (``FAILED cases/support/c<ESC>]0;PWN<BEL>.yaml::refund-asked[…]``,
``ERROR at setup of …``): a case file named with an escape sequence (an OSC window title, a
screen clear), NUL or a bidirectional override would reach the terminal.  Such a file's collector
gets the shown form of its node id and name (:func:`~pytest_tooleffect.collect.ids.node_names`)
and its items' locations the shown form of its path; every other file keeps pytest's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import pytest

from pytest_tooleffect.collect.ids import node_names
from pytest_tooleffect.util.display import shown

__all__ = ["file_node", "location_path"]

_File = TypeVar("_File", bound=pytest.File)


def file_node(cls: type[_File], parent: pytest.Collector, path: Path, escaped_ids: set[str]) -> _File:
    r"""The collector of a case file (or a family file): pytest's own node id and name, unless they
    hold control characters, NUL or bidirectional overrides (a file named ``c<ESC>]0;PWN<BEL>.yaml``),
    which pytest would print raw in ``FAILED path::name`` lines: then their shown form
    (:func:`~pytest_tooleffect.collect.ids.node_names`), unique among the run's files.

    Args:
        cls: the collector's class.
        parent: the collector's parent (a directory).
        path: the file.
        escaped_ids: the node ids given so far to files named so (updated).

    Returns:
        The collector.
    """
    node = cls.from_parent(parent, path=path)
    if shown(node.nodeid) == node.nodeid and shown(node.name) == node.name:
        return node
    root = node.config.rootpath
    nodeid = node_names([node.nodeid], taken=lambda n: n in escaped_ids or (root / n).exists())[node.nodeid]
    escaped_ids.add(nodeid)
    suffix = nodeid[len(shown(node.nodeid)):]
    return cls.from_parent(parent, path=path, name=shown(node.name) + suffix, nodeid=nodeid)


def location_path(path: Path) -> Path | str:
    """The path an item's location gives (pytest prints it beside the node id, ``-rs``, ``-vv``): the
    file's, or its shown form when it holds control characters.
    """
    text = str(path)
    return path if shown(text) == text else shown(text, limit=None)
