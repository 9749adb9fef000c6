"""The ``perturbations:`` of a family file and ``--tooleffect-perturb``: which perturbed tool catalogs
a run adds beside each case (``docs/robustness.md``).

A perturbation is written as a mapping (``{kind: distractors, n: 8, pool: same-domain}``) or as a
short string, ``KIND`` or ``KIND:ARG`` (``shuffle``, ``distractors:8``, ``scale:1/8/32/128``,
``describe:first-sentence``), the form the command line takes.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pytest_tooleffect.formats.policy import Count, ShowableName

__all__ = ["DESCRIBE_RULES", "KINDS", "PerturbationSpec", "parse_perturbation"]

#: the kinds of perturbation, in the order the docs list them
KINDS = ("shuffle", "rename", "distractors", "remove-valid", "describe", "scale")
#: the named rules of ``describe``: superlatives removed, the first sentence only, the family's rewrites
DESCRIBE_RULES = ("no-superlatives", "first-sentence", "family")
#: a variant's name: what node and record ids carry after ``+``
_VARIANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class PerturbationSpec(BaseModel):
    """One perturbation of the tool catalog, run as its own item beside every case it applies to.

    Attributes:
        kind: ``shuffle`` (seeded order, label unchanged), ``rename`` (every tool a neutral name,
            label mapped), ``distractors`` (``n`` tools added from ``pool``), ``remove-valid`` (the
            tools of the first valid tool alternative removed, label derived), ``describe``
            (descriptions rewritten by ``rule``), ``scale`` (the catalog grown or cut to each of ``sizes``).
        name: the variant's name in ids (default: the kind; ``scale`` adds ``-SIZE`` per size).
        seed: the seed of every random choice (with the case id): one seed, one catalog per case.
        n: ``distractors``: how many tools are added.
        pool: ``distractors`` and ``scale``: ``unrelated`` (other families' tools, BFCL's functions
            when present) or ``same-domain`` (``tools`` given here, else the family's tools not
            offered at the state).
        tools: near-miss tools of the family's own (``same-domain`` pool), as tool specs.
        pool_files: more ``unrelated`` tools: files relative to the family folder, each a JSON list
            of tool specs or BFCL's JSON Lines (every line's ``function`` list).
        rule: ``describe``: one of :data:`DESCRIBE_RULES`.
        rewrites: ``describe`` with ``rule: family``: tool name → its rewritten description.
        sizes: ``scale``: the catalog sizes, each ≥ 1.
        remove: ``remove-valid``: ``first`` (the first valid tool alternative's tools) or ``all``
            (every tool a valid action names).
        labels: ``remove-valid``: case id → the label to use instead of the derived one.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["shuffle", "rename", "distractors", "remove-valid", "describe", "scale"]
    name: ShowableName | None = None
    seed: Count = 0
    n: Count = Field(default=5, ge=1, le=1000)
    pool: Literal["unrelated", "same-domain"] = "unrelated"
    tools: list[dict[str, Any]] = Field(default_factory=list)
    pool_files: list[str] = Field(default_factory=list)
    rule: Literal["no-superlatives", "first-sentence", "family"] = "no-superlatives"
    rewrites: dict[str, str] = Field(default_factory=dict)
    sizes: list[Count] = Field(default_factory=lambda: [1, 8, 32, 128])
    remove: Literal["first", "all"] = "first"
    labels: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, data: Any) -> Any:
        return parse_perturbation(data) if isinstance(data, str) else data

    @model_validator(mode="after")
    def _consistent(self) -> PerturbationSpec:
        if self.name is not None and not _VARIANT_NAME.match(self.name):
            raise ValueError(f"name {self.name!r}: letters, digits, '_', '.' and '-' only (it is part of node ids)")
        if self.kind == "scale" and (not self.sizes or any(s < 1 for s in self.sizes)
                                     or len(set(self.sizes)) != len(self.sizes)):
            raise ValueError(f"sizes {self.sizes}: one or more distinct catalog sizes, each at least 1")
        if self.rule == "family" and self.kind == "describe" and not self.rewrites:
            raise ValueError("rule 'family' needs rewrites: {tool name: description}")
        if self.labels and self.kind != "remove-valid":
            raise ValueError(f"labels: only remove-valid takes per-case labels, not {self.kind}")
        return self

    def variants(self) -> list[tuple[str, int | None]]:
        """The variants this perturbation adds to each case: ``(name, catalog size or None)``;
        ``scale`` gives one per size (``scale-8``), every other kind one.
        """
        base = self.name or self.kind
        if self.kind == "scale":
            return [(f"{base}-{size}", size) for size in self.sizes]
        return [(base, None)]


def parse_perturbation(text: str) -> dict[str, Any]:
    """A perturbation's short form as its mapping.

    ``KIND`` or ``KIND:ARG``: ``distractors:N`` (or ``distractors:same-domain``, or
    ``distractors:N/same-domain``), ``scale:S1/S2/…``, ``describe:RULE``, ``remove-valid:all``,
    ``shuffle:SEED``.

    Args:
        text: the short form.

    Returns:
        The mapping :class:`PerturbationSpec` validates.

    Raises:
        ValueError: an unknown kind, or an argument the kind does not take.
    """
    kind, _, arg = text.strip().partition(":")
    if kind not in KINDS:
        raise ValueError(f"unknown perturbation {kind!r}: one of {', '.join(KINDS)}")
    out: dict[str, Any] = {"kind": kind}
    if not arg:
        return out
    parts = arg.split("/")
    try:
        if kind == "scale":
            out["sizes"] = [int(p) for p in parts]
        elif kind == "distractors":
            for p in parts:
                if p in ("unrelated", "same-domain"):
                    out["pool"] = p
                else:
                    out["n"] = int(p)
        elif kind == "describe":
            out["rule"] = arg
        elif kind == "remove-valid":
            out["remove"] = arg
        else:
            out["seed"] = int(arg)
    except ValueError:
        raise ValueError(f"perturbation {text!r}: {arg!r} is not an argument {kind} takes "
                         "(distractors:N, scale:1/8/32, describe:RULE, remove-valid:all, shuffle:SEED)") from None
    return out
