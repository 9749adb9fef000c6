"""What a pytester run of the plugin wrote and printed, read the one way the tests read it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

__all__ = ["clean", "record_list", "records_by_case"]


def record_list(root: Path) -> list[dict[str, Any]]:
    """The run's records (the default record log under ``root``), in the order written."""
    text = (root / "reports" / "tooleffect-records.jsonl").read_text(encoding="utf-8")
    return [json.loads(x) for x in text.splitlines()]


def records_by_case(root: Path) -> dict[str, dict[str, Any]]:
    """The run's records by case id."""
    return {r["case_id"]: r for r in record_list(root)}


def clean(result: pytest.RunResult) -> str:
    """The run's output, checked to hold no INTERNALERROR, no traceback and no frame of the plugin."""
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out and "pytest_tooleffect/" not in out, out[-5000:]
    return out
