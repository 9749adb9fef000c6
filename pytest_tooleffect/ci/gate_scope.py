"""Which gates a filtered run can judge: a run filtered to one class (``-m no_tool``, ``-k``) or to
some of its policies judges those only.  A gate on a class, a policy or a family the run collected
and deselected, or on a policy defined (``[tool.tooleffect.policies]``, a family's ``policies:``,
``replay``) that the run did not run, is **not applicable**: it neither passes nor fails, and its
line says which filter left it out.  An average over a filtered block says how many of the block's
classes it covers, and a gate judged on a class (or block) the run selected only part of says how
many items the filter left out (``n=8, 2 of 10 no_tool items not selected by this run (-k "not nt-read")``).

A gate on something the run never had (a class with no case, a policy nobody defined: a typo)
stays NOT JUDGED, and a run whose gates judged nothing still fails (:mod:`.gate_keeper`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pytest_tooleffect.collect.scope import RunScope
from pytest_tooleffect.options import REPLAY

__all__ = ["GateScope"]


@dataclass(frozen=True)
class GateScope:
    """The run's selection as the gates read it.

    Attributes:
        run: what the run collected and selected (``None``: not known, e.g. every xdist worker
            crashed; then nothing is not applicable).
        policies: every policy name the run could have run: the pyproject's, the collected
            families' own and ``replay``.
        no_variants: the families that asked for perturbed catalogs and got no variant, each with
            why (:data:`~pytest_tooleffect.collect.variants.no_variants_key`): their ``max_drop``
            gates are NOT JUDGED for that reason, not for a filter.
    """

    run: RunScope | None
    policies: frozenset[str] = frozenset()
    no_variants: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, run: RunScope | None, pyproject_policies: Iterable[str],
           no_variants: Mapping[str, str] | None = None) -> GateScope:
        """The scope of a run, with the pyproject's policy names (and the families with no variant)."""
        defined = run.defined if run is not None else frozenset()
        return cls(run, frozenset({*pyproject_policies, *defined, REPLAY.name}), dict(no_variants or {}))

    def class_not_selected(self, family: str, policy: str, subject: str) -> str | None:
        """Why a gate on ``subject`` (a class) of a block does not apply, or ``None`` when it does."""
        if self.run is None or subject not in self.run.not_selected(family, policy):
            return None
        return f"class {subject} not selected by this run{self.run.why}"

    def partly(self, family: str, policy: str, subject: str | None = None) -> str:
        """What a gate judged on a filtered block leaves out: ``2 of 10 not selected by this run
        (-k "not nt-read")`` for a class (``subject``) whose items the run selected some of, or the
        same over the block's classes (``None``); ``""`` when it left none out.
        """
        if self.run is None:
            return ""
        left, collected = self.run.partly_selected(family, policy, subject)
        if not left:
            return ""
        return f"{left} of {collected} {'items' if subject is None else subject + ' items'} not selected by " \
               f"this run{self.run.why or ' (a plugin or hook)'}"

    def coverage(self, family: str, policy: str, judged: int) -> str:
        """What an average over a block covers when the run deselected some of its classes:
        ``over 1 of 3 classes (single, several not selected by this run (-m "no_tool"))``; ``""`` when
        it deselected none.

        Args:
            family: the block's family.
            policy: its policy.
            judged: the classes with rows the average is over.
        """
        if self.run is None:
            return ""
        left = self.run.not_selected(family, policy)
        if not left:
            return ""
        total = self.run.classes_collected(family, policy)
        return (f"over {judged} of {total} classes ({', '.join(left)} not selected by this run"
                f"{self.run.why})")

    def table_not_selected(self, family: str, policy: str) -> str | None:
        """Why a gate table that matches no block of the run does not apply: its family × policy was
        collected and deselected, or it names a policy the run could have run and did not.  ``None``
        when the table names what the run never had (NOT JUDGED: a typo fails the run).

        Args:
            family: the table's family (``*``: any).
            policy: the table's policy (``*``: any).
        """
        run = self.run
        if run is None or (family, policy) == ("*", "*"):
            return None
        blocks = [(f, p) for f, p in run.collected if family in ("*", f) and policy in ("*", p)]
        if blocks and all(run.deselected_block(f, p) for f, p in blocks):
            what = f"policy {policy}" if family == "*" else f"family {family}" if policy == "*" else \
                f"family {family} · policy {policy}"
            return f"{what} not selected by this run{run.why}"
        families = {f for f, _ in run.collected}
        if policy != "*" and policy in self.policies and (family == "*" or family in families) and not blocks:
            ran = sorted({p for f, p in run.selected if family in ("*", f)})
            return f"policy {policy} not selected by this run (it ran {', '.join(ran) or 'none'})"
        return None
