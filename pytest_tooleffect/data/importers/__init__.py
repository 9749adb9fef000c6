"""Importers: public data sets (BFCL, tau-bench airline, ToolTalk) into case families."""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["oracle_reference"]


def _shipped_rules(name: str) -> Path:
    """The rules file ``<name>.yaml`` the project ships: the checkout's ``oracle/``, else the copy
    inside the package (``_oracle``).
    """
    package = Path(__file__).resolve().parents[2]
    for folder in (package.parent / "oracle", package / "_oracle"):
        if (folder / f"{name}.yaml").is_file():
            return folder / f"{name}.yaml"
    raise FileNotFoundError(f"no oracle rules {name}.yaml (looked in oracle/ beside {package} and in the package)")


def oracle_reference(out: Path, name: str) -> str:
    """The ``oracle:`` entry of an imported family written to ``out``, for the shipped rules ``name``.

    In a project laid out as this repository (``cases/<family>/`` beside ``oracle/``) that already
    holds ``oracle/<name>.yaml``: ``../../oracle/<name>.yaml``.  Anywhere else the shipped rules are
    copied into the family folder as ``oracle.yaml``, so the family runs wherever it was written.

    Raises:
        FileNotFoundError: the rules are not shipped (neither in a checkout nor in the package).
    """
    beside = out.resolve().parent.parent / "oracle" / f"{name}.yaml"
    if beside.is_file():
        return f"../../oracle/{name}.yaml"
    shutil.copyfile(_shipped_rules(name), out / "oracle.yaml")
    return "oracle.yaml"
