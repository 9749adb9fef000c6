"""What a run selected, by family × policy and class: the case items collected, those the run kept
after every deselection (``-m``, ``-k``, ``--lf``, ``--deselect``, another shard's), and the policies
the collected families define.

Part of the collection stage (``docs/design.md``, "Architecture").  The gates read it
(:mod:`pytest_tooleffect.ci.gate_scope`) so that a run filtered to one class or policy judges that
class or policy only, and says which it did not select.  It is counted by
:class:`~pytest_tooleffect.collect.sharding.RunSelection` on whichever process collects; under
xdist a worker hands it to the controller in its ``workeroutput``
(:data:`pytest_tooleffect.wire.WORKER_SCOPE`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_tooleffect.collect.items import CaseItem
from pytest_tooleffect.options import OPT_SHARD
from pytest_tooleffect.util.display import shown

__all__ = ["RunScope", "count_classes", "defined_policies", "filters_of"]

#: ``(family, policy)`` → label class → case items
Counts = dict[tuple[str, str], dict[str, int]]


def count_classes(items: Iterable[pytest.Item]) -> Counts:
    """The case items among ``items`` by ``(family, policy)`` and label class (an unlabelled case
    has no class and is not counted).
    """
    out: Counts = {}
    for item in items:
        if isinstance(item, CaseItem) and item.ref.label_class is not None:
            key = (item.family.name, item.policy.name)
            counts = out.get(key)
            if counts is None:
                counts = out[key] = {}
            counts[item.ref.label_class] = counts.get(item.ref.label_class, 0) + 1
    return out


def defined_policies(items: Iterable[pytest.Item]) -> frozenset[str]:
    """The policy names the collected families define in their own ``policies:``."""
    return frozenset(p.name for item in items if isinstance(item, CaseItem) for p in item.family.family.policies)


def filters_of(config: pytest.Config) -> str:
    """The run's item filters as given: ``-m "no_tool"``, ``-k "nt-"``, ``--lf``, ``--deselect ID``
    (``(and N more)`` when several) and ``--tooleffect-shard 1/4``; ``""`` when none was given
    (another plugin deselected).  Control characters are shown escaped.
    """
    parts = []
    markexpr = config.getoption("markexpr", None)
    keyword = config.getoption("keyword", None)
    if markexpr:
        parts.append(f'-m "{markexpr}"')
    if keyword:
        parts.append(f'-k "{keyword}"')
    if config.getoption("lf", None):
        parts.append("--lf")
    deselect = config.getoption("deselect", None)
    if deselect:
        parts.append(f"--deselect {deselect[0]}" + (f" (and {len(deselect) - 1} more)" if len(deselect) > 1 else ""))
    shard = config.getoption(OPT_SHARD, None)
    if shard is not None:
        parts.append(f"{OPT_SHARD} {shard[0]}/{shard[1]}")
    return shown(" ".join(parts))


@dataclass(frozen=True)
class RunScope:
    """What the run collected and selected.

    Attributes:
        collected: case items collected (before any deselection) by ``(family, policy)`` and class.
        selected: those the run kept (after every deselection, and a shard's part).
        defined: the policy names the collected families define (their ``policies:``).
        filters: the item filters as given (:func:`filters_of`), ``""`` when none was.
    """

    collected: Counts = field(default_factory=dict)
    selected: Counts = field(default_factory=dict)
    defined: frozenset[str] = frozenset()
    filters: str = ""

    @classmethod
    def of(cls, collected: Counts, kept: Iterable[pytest.Item], defined: frozenset[str],
           config: pytest.Config) -> RunScope:
        """The scope of a run that collected ``collected`` and kept ``kept``."""
        return cls(collected=collected, selected=count_classes(kept), defined=defined, filters=filters_of(config))

    def not_selected(self, family: str, policy: str) -> list[str]:
        """The classes of a family × policy collected and none of whose items the run selected, in the
        report's class order.
        """
        got = self.collected.get((family, policy), {})
        kept = self.selected.get((family, policy), {})
        return [c for c in ("single", "several", "no_tool") if got.get(c) and not kept.get(c)]

    def classes_collected(self, family: str, policy: str) -> int:
        """How many classes of a family × policy have collected items."""
        return sum(1 for n in self.collected.get((family, policy), {}).values() if n)

    def deselected_block(self, family: str, policy: str) -> bool:
        """Items of the family × policy were collected and the run selected none."""
        return bool(self.collected.get((family, policy))) and not self.selected.get((family, policy))

    def partly_selected(self, family: str, policy: str, subject: str | None = None) -> tuple[int, int]:
        """``(left out, collected)``: the case items of a class (``subject``; ``None``: of every class
        of the family × policy) that the run left out although it selected others of the same class.
        A class the run selected none of is not counted (it is not selected: :meth:`not_selected`).
        """
        got = self.collected.get((family, policy), {})
        kept = self.selected.get((family, policy), {})
        classes = [subject] if subject is not None else list(got)
        left = [(got.get(c, 0) - kept.get(c, 0), got.get(c, 0)) for c in classes if kept.get(c)]
        return sum(n for n, _ in left), sum(n for _, n in left)

    def left_out(self) -> tuple[int, int]:
        """``(left out, collected)``: the case items of the whole run that it did not select."""
        collected = sum(sum(c.values()) for c in self.collected.values())
        return collected - sum(sum(c.values()) for c in self.selected.values()), collected

    @property
    def filtered(self) -> str:
        """What left case items out, in words: ``-k "not nt-read": 2 of 13 case items not selected``;
        ``""`` when the run selected every case item it collected.
        """
        left, collected = self.left_out()
        if not left:
            return ""
        return f"{self.filters or 'a plugin or hook'}: {left} of {collected} case items not selected"

    @property
    def why(self) -> str:
        """``(-m "no_tool")``, or ``""`` when the filters are not known."""
        return f" ({self.filters})" if self.filters else ""

    def to_json(self) -> dict[str, Any]:
        """JSON form (a worker's ``workeroutput``)."""
        def rows(counts: Counts) -> list[list[Any]]:
            return [[fam, pol, dict(classes)] for (fam, pol), classes in sorted(counts.items())]

        return {"collected": rows(self.collected), "selected": rows(self.selected), "defined": sorted(self.defined),
                "filters": self.filters}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunScope:
        """Read :meth:`to_json`'s form back."""
        def counts(rows: Iterable[Any]) -> Counts:
            return {(str(fam), str(pol)): {str(c): int(n) for c, n in classes.items()} for fam, pol, classes in rows}

        return cls(collected=counts(data["collected"]), selected=counts(data["selected"]),
                   defined=frozenset(map(str, data["defined"])), filters=str(data["filters"]))
