"""Every row of ``shared/field-cases/field-cases.jsonl`` is a test of the oracle.

Each row's prose ``arg_rules`` is written below in the rule language; a row whose prose has
no translation here fails, so a new row cannot slip through unruled.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_tooleffect.oracle import CompareContext, RuleSet, score
from tests.conftest import SHARED, SHARED_MISSING

if SHARED_MISSING:  # the rows are the parameters: without them there is nothing to collect
    pytest.skip(SHARED_MISSING, allow_module_level=True)
FIELD_CASES = SHARED / "field-cases" / "field-cases.jsonl"
ROWS: list[dict[str, Any]] = [json.loads(line) for line in FIELD_CASES.read_text().splitlines() if line.strip()]

#: The rows' prose arg_rules, in the rule language (keyed by the prose's own field list).
TRANSLATED: dict[str, dict[str, Any]] = {
    "dateOrTime+timezone": {"compare": "instant"},  # "compare the pair as one absolute instant"
    "item_ids+new_item_ids": {"compare": "paired"},  # "index-paired lists: compare as a set of pairs"
}


def _rules(row: dict[str, Any]) -> RuleSet:
    prose = row["label"].get("arg_rules") or {}
    fields = {}
    for key in prose:
        assert key in TRANSLATED, f"{row['id']}: arg_rules {key!r} has no translation into the rule language"
        for tool in row["tools"]:
            fields[f"{tool['name']}.{key}"] = TRANSLATED[key]
    return RuleSet.from_mapping({"fields": fields}, f"field-case {row['id']}")


def test_field_cases_present() -> None:
    assert len(ROWS) >= 14
    assert len({r["id"] for r in ROWS}) == len(ROWS)


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_field_case(row: dict[str, Any]) -> None:
    label = {k: v for k, v in row["label"].items() if k != "arg_rules"}
    verdict = score(row["predicted"], label, row["tools"], _rules(row), CompareContext(messages=row["context"]))
    # the shared file keeps its own key names: tool_ok is name_ok, args_ok is name_args_ok
    got = {"tool_ok": verdict.name_ok, "args_ok": verdict.name_args_ok, "kind": verdict.kind}
    assert got == row["expected_verdict"], (row["why"], verdict.to_dict())
