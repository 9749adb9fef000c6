"""Shared paths for the plugin's own tests."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("TOOLEFFECT_SHARED", REPO.parent / "shared"))
if not (SHARED / "field-cases").is_dir() or not (SHARED / "datasets").is_dir():
    raise SystemExit(f"the tests read public data from {SHARED} (datasets/, field-cases/), which is missing: put "
                     "the shared/ folder beside the checkout or set TOOLEFFECT_SHARED to where it is")

