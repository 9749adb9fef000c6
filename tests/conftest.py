"""Shared paths for the plugin's own tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOOLEFFECT_SHARED", REPO.parent / "shared"))
if not (SHARED / "field-cases").is_dir() or not (SHARED / "datasets").is_dir():
    raise SystemExit(f"the tests read public data from {SHARED} (datasets/, field-cases/), which is missing: put "
                     "the shared/ folder beside the checkout or set TOOLEFFECT_SHARED to where it is")


def generated_report_schema() -> dict[str, Any]:
    """The report's JSON Schema, generated from the report models (what ``tooleffect schema report`` prints)."""
    from pytest_tooleffect.report import report_schema

    return report_schema()
