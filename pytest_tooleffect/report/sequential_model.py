"""The report's ``sequential`` section, as typed data: each sequential gate's verdict, when it was
reached, what stopping there saved against the full run, and the order the run took its items in.

Written on the controller by ``ci/sequential_gate.py`` through the report's section protocol
(:mod:`.assembly`), read by the gates (a sequential gate's result) and by every renderer.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pytest_tooleffect.report.parts import Count, Number, Part, is_none

__all__ = ["RunOrder", "SavedSpend", "SequentialBlock", "SequentialSection", "Verdict"]

#: a sequential gate's verdict: ``regression`` (fails), ``no_regression`` (beyond the margin: passes),
#: ``not_settled`` (a budget ended it, or the items ran out first: fails, never a pass), ``not_yet`` (a report
#: made from record logs that lack part of their run, with no verdict on what they hold: fails, never a pass)
Verdict = Literal["regression", "no_regression", "not_settled", "not_yet"]


class SavedSpend(Part):
    """What the stop saved against the full run: the decisions never made and their estimated spend."""

    decisions: Count
    """Items of the block skipped as ``settled`` (no model turn sent for them)."""
    full_decisions: Count
    """The block's items in the full run (made, skipped as settled, or left by a budget)."""
    tokens: int | None
    """Their estimated input plus output tokens (``null`` when no estimate was measured)."""
    cost_usd: Number | None
    """Their estimated cost, USD (``null`` when no price was measured)."""
    basis: str
    """Where the estimate comes from: the baseline's measured tokens and price of the same decisions, or,
    for decisions it does not price, the mean of this run's decisions of the block."""


class SequentialBlock(Part):
    """One family × policy's sequential gate."""

    family: str
    """The family."""
    policy: str
    """The policy."""
    alpha: Number
    """The false-regression rate held at every stopping time."""
    margin: Number
    """The margin: a regression up to it (a fraction of pairs) is "no regression beyond the margin"."""
    beta: Number
    """One minus the power against ``effect``."""
    effect: Number
    """The regression the test is designed to find (a fraction)."""
    discordance: Number | None = None
    """The share of pairs an unchanged agent flips that the test's bets were tuned for (``null``: not given)."""
    budget_decisions: int | None
    """The most decisions it may spend (``null``: no such budget)."""
    budget_usd: Number | None
    """The most USD it may spend (``null``: no such budget)."""
    verdict: Verdict
    """The verdict (a gate that never settled is ``not_settled``)."""
    why: str
    """The verdict in words: when it was reached, or what ended the run first."""
    stopped_early: bool
    """The verdict came before the block's last item: the rest were skipped as ``settled``."""
    decisions: Count
    """Decisions made when the verdict was reached (or at the end, never settled)."""
    pairs: Count
    """Of which paired with the baseline."""
    regressions: Count
    """Pairs that passed in the baseline and fail now."""
    improvements: Count
    """Pairs that failed in the baseline and pass now."""
    cost_usd: Number
    """The known cost of the decisions made by then, USD."""
    decisions_run: Count
    """Decisions the run made in all (turns already in flight at the stop are scored, and counted here)."""
    saved: SavedSpend | None = Field(default=None, exclude_if=is_none)
    """What the stop saved; absent when nothing was skipped as settled."""
    budget_skipped: Count = 0
    """Items left unsent because a budget was spent before a verdict."""


class RunOrder(Part):
    """The order the run took its case items in."""

    order: Literal["informative-first", "collection", "logs"]
    """``informative-first``: cases discordant among the baseline's trials, then the rest, each tier stratified by
    class and by the baseline's pass or fail, interleaved in proportion, seeded by the baseline
    (``collect/order.py``); ``collection``: as collected; ``logs``: a report made from record logs takes the
    records in the order the logs wrote them, shards interleaved in proportion (``ci/sequential_merged.py``)."""
    tiers: dict[str, int]
    """Items per tier (``discordant``, ``rest``)."""
    moved: Count
    """Items whose position changed (node ids never change)."""


class SequentialSection(Part):
    """The run's sequential gates (``sequential`` in ``[tool.tooleffect.gates]``)."""

    test: str
    """The anytime-valid test (named and cited on the documentation's sequential page)."""
    shared: Literal["process", "file", "redis", "logs"]
    """Where the running tallies were kept: this process, a file its xdist workers shared, Redis (shards), or
    ``logs``: judged again on the record logs a report was made from."""
    order: RunOrder
    """The order the run took its items in."""
    blocks: list[SequentialBlock]
    """One per family × policy with a sequential gate and decisions in the run, sorted."""

    def lines(self) -> list[str]:
        """The section in lines: the order, then one line per gate with what its stop saved (the
        terminal's, the Markdown summary's and the HTML page's text).
        """
        o = self.order
        if o.order == "logs":
            out = ["judged again on the merged record logs, in the order they wrote the decisions (shards interleaved "
                   "in proportion)"]
        else:
            out = [f"order: {o.order}" + (f" ({', '.join(f'{n} {t}' for t, n in o.tiers.items())}; {o.moved} items "
                                          "moved)" if o.order != "collection" else "")]
        for b in self.blocks:
            head = b.verdict.upper().replace("_", " ")
            said = b.why if b.why.startswith(head) else f"{head} — {b.why}"  # a why that opens with it: once
            line = (f"{b.family}/{b.policy}: {said}: {b.regressions} "
                    f"regressions, {b.improvements} improvements in {b.pairs} pairs (alpha {b.alpha:g}, margin "
                    f"{_pts(b.margin)}, effect {_pts(b.effect)})")
            if b.saved is not None:
                s = b.saved
                tokens = "tokens unknown" if s.tokens is None else f"~{s.tokens:,} tokens"
                usd = "cost unknown" if s.cost_usd is None else f"~${s.cost_usd:.4f}"
                line += (f"; stopped early: {s.decisions} of {s.full_decisions} decisions skipped as settled, saving "
                         f"{tokens} and {usd} ({s.basis})")
            if b.budget_skipped:
                line += f"; {b.budget_skipped} items left unsent by the budget"
            out.append(line)
        return out


def _pts(fraction: float) -> str:
    return f"{fraction * 100:g} points"
