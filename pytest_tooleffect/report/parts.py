"""The building blocks every report model shares: the :class:`Part` and :class:`Closed` bases,
:class:`PerClass`, and the number types of the report's fields.

:mod:`.model` (the report and its blocks), :mod:`.effects_model` (a block's effect-level part) and
:mod:`.run_model` (the run-level parts) all build on these.
"""

from __future__ import annotations

from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Closed", "Count", "Number", "Part", "PerClass", "Pct", "is_none"]

Number = int | float  # sums of JSON numbers keep their type
Pct = Annotated[float, Field(ge=0, le=100)]  # an exact proportion as a percentage
Count = Annotated[int, Field(ge=0)]
T = TypeVar("T")


class Part(BaseModel):
    """Base of the report's models: keys in declared order, a docstring per field, keys added by
    ``pytest_tooleffect_modifyreport`` hooks kept.
    """

    model_config = ConfigDict(extra="allow", use_attribute_docstrings=True, ser_json_inf_nan="constants")


class Closed(Part):
    """A part whose keys are a fixed partition: no other key."""

    model_config = ConfigDict(extra="forbid")


class PerClass(Closed, Generic[T]):
    """One value per label class."""

    single: T
    """Exactly one valid action, a tool."""
    several: T
    """Two or more valid alternatives, none of them no tool."""
    no_tool: T
    """No tool is among the valid actions."""


def is_none(value: Any) -> bool:
    """``value`` is ``None``: the ``exclude_if`` of a field left out of the JSON when it has no value."""
    return value is None
