"""A count a user writes (a quota, a population, a step, a fault's repeat, a policy's token cap) is a
whole number, never ``true``/``false``: pydantic's lax mode read ``quota: {first: true}`` as a quota
of 1, and the error then said ``quota.first: 1``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from pytest_tooleffect.collect.family import FamilyError, load_family
from pytest_tooleffect.data.authored import Placement as AuthoredPlacement
from pytest_tooleffect.formats import Family, Fault, Placement, Policy, Source
from pytest_tooleffect.formats.mcp import McpWorld, SetupStep
from pytest_tooleffect.formats.perturb import PerturbationSpec

FAMILY: dict[str, Any] = {"name": "demo"}
PLACEMENT: dict[str, Any] = {"step": 0, "run_length": 2, "bucket": "first"}


@pytest.mark.parametrize(("model", "data", "field"), [
    (Family, {**FAMILY, "quota": {"first": True}}, "quota.first"),
    (Family, {**FAMILY, "population": {"first": False}}, "population.first"),
    (Family, {**FAMILY, "production": {"first": True}}, "production.first"),
    (Family, {**FAMILY, "seed": True}, "seed"),
    (Family, {**FAMILY, "annotations": {"weights": {"write": True}}}, "annotations.weights.write"),
    (Family, {**FAMILY, "policies": [{"name": "p", "model": "m", "max_tokens": True}]}, "policies.0.max_tokens"),
    (Policy, {"name": "p", "model": "m", "temperature": False}, "temperature"),
    (Policy, {"name": "p", "model": "m", "timeout_s": True}, "timeout_s"),
    (Placement, {**PLACEMENT, "step": False}, "step"),
    (Placement, {**PLACEMENT, "run_length": True}, "run_length"),
    (Source, {"kind": "trace", "position": True}, "position"),
    (Fault, {"kind": "status", "times": True}, "times"),
    (Fault, {"kind": "status", "status": True}, "status"),
    (Fault, {"kind": "slow", "ms": True}, "ms"),
    (AuthoredPlacement, {"id": "p", "step": True, "run_length": 2, "rules": {}}, "step"),
    (PerturbationSpec, {"kind": "distractors", "n": True}, "n"),
    (PerturbationSpec, {"kind": "scale", "sizes": [True, 8]}, "sizes.0"),
    (PerturbationSpec, {"kind": "shuffle", "seed": True}, "seed"),
    (McpWorld, {"command": ["srv"], "timeout_s": True}, "timeout_s"),
    (SetupStep, {"step": True, "op": "init"}, "step"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_a_boolean_is_no_count(model: type[Any], data: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    (error,) = caught.value.errors()
    assert ".".join(str(x) for x in error["loc"]) == field
    assert "not a boolean" in error["msg"], error["msg"]


def test_the_same_numbers_written_as_numbers_are_taken() -> None:
    fam = Family.model_validate({**FAMILY, "quota": {"first": 1}, "population": {"first": 0}, "seed": 0,
                                 "production": {"first": 1}})
    assert fam.quota == {"first": 1} and fam.population == {"first": 0} and fam.seed == 0
    assert Fault.model_validate({"kind": "status", "times": 2}).times == 2
    spec = PerturbationSpec.model_validate({"kind": "scale", "sizes": [1, 8], "seed": 3})
    assert spec.sizes == [1, 8] and spec.seed == 3
    assert PerturbationSpec.model_validate("distractors:4").n == 4
    assert McpWorld.model_validate({"command": ["srv"], "timeout_s": 2}).timeout_s == 2.0


def test_a_family_file_with_a_boolean_quota_names_the_file_and_the_field(tmp_path: Path) -> None:
    (tmp_path / "family.yaml").write_text("name: demo\nquota: {first: true, last: 2}\n")
    with pytest.raises(FamilyError) as caught:
        load_family(tmp_path)
    assert str(caught.value) == f"{tmp_path / 'family.yaml'}: quota.first: a whole number, not a boolean (true)"
