"""The report as text tables (rich), one block per family × policy, then comparisons and conventions."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from pytest_tooleffect.report.arithmetic import percent
from pytest_tooleffect.report.effects_model import Effects
from pytest_tooleffect.report.model import CLASSES, Block, Comparison, CostSummary, Report
from pytest_tooleffect.report.robustness_text import robustness_lines

__all__ = ["render_terminal", "shard_ranges"]

#: runs of consecutive shards written out by :func:`shard_ranges` before the rest is counted
RANGES_SHOWN = 10


def shard_ranges(shards: Sequence[int], shown: int = RANGES_SHOWN) -> str:
    """Sorted shard numbers as runs, the first ``shown`` of them written out: ``2-999, 1001``.

    The length of the text is bounded by ``shown``, not by how many shards there are; past
    ``shown`` runs it ends with how many shards are left out (``… and 40,000 more in 20,000 runs``).

    Args:
        shards: shard numbers, sorted ascending, each once.
        shown: how many runs to write out.

    Returns:
        The runs, comma-separated (``""`` for no shard).
    """
    runs: list[tuple[int, int]] = []
    for i in shards:
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs[:shown])
    rest = runs[shown:]
    if rest:
        text += f", … and {sum(b - a + 1 for a, b in rest):,} more in {len(rest):,} runs"
    return text


PIPED_WIDTH = 160
"""Characters per line when the output is not a terminal (a pipe, a file, CI's log): the widest
table fits, so no cell folds."""


def report_layout(stream: Any, columns: int) -> dict[str, Any]:
    """How to render for ``stream``: :func:`render_terminal`'s ``width`` and ``soft_wrap``.

    A terminal gets its own ``columns`` and lines wrapped to them; anything else (a pipe, a file,
    CI's log) gets :data:`PIPED_WIDTH` and each line of text whole, however long (so it reads as
    one line to grep), tables at their own width.
    """
    isatty = getattr(stream, "isatty", None)
    if callable(isatty) and isatty():
        return {"width": columns, "soft_wrap": False}
    return {"width": PIPED_WIDTH, "soft_wrap": True}


def render_terminal(report: Report, width: int = PIPED_WIDTH, soft_wrap: bool = False) -> str:
    """Render the report as text tables (rich), one block per family × policy.

    Args:
        report: the report.
        width: the console width in characters.
        soft_wrap: print each line of text whole instead of wrapping it at ``width`` (tables keep
            their width).

    Returns:
        The tables and lines, as plain text (no colour codes): every string of the report as
        :func:`~pytest_tooleffect.util.display.shown` shows it (no control character, escape or
        bidirectional override a model or a provider wrote; one line each, cut past
        :data:`~pytest_tooleffect.util.display.LIMIT` characters).
    """
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    report = report.shown()
    buf = StringIO()
    # data is text, never markup: family names, ids ("…[policy]"), provider messages may hold "[" and ":"
    console = Console(file=buf, width=width, force_terminal=False, color_system=None, highlight=False,
                      markup=False, emoji=False, soft_wrap=soft_wrap)
    shard, shards = report.shard, report.shards
    if shard:
        console.print(f"tooleffect: shard {shard.index}/{shard.count} of a sharded run", markup=False)
    if shards:
        missing = shards.missing
        console.print(f"tooleffect: shards {shard_ranges(shards.merged) or 'none'} of {shards.count} "
                      f"merged from {len(shards.logs)} record logs"
                      + (f"; status {report.status}: shard{'s' if len(missing) > 1 else ''} "
                         f"{shard_ranges(missing)} missing" if missing else "")
                      + (f"; shard{'s' if len(shards.empty) > 1 else ''} {shard_ranges(shards.empty)} selected no "
                         "item" if shards.empty else "")
                      + (f"; {shards.duplicates_dropped} repeated records left out"
                         if shards.duplicates_dropped else ""), markup=False)
    sel = report.selection
    if sel:
        console.print(f"tooleffect: the run selected {sel.selected} of {sel.collected} case items collected "
                      f"(selection {sel.digest}); {sel.recorded} have a record"
                      + (f", {sel.not_recorded} do not" if sel.not_recorded else ""), markup=False)
        for part in sel.short:
            where = f"shard {part.shard}" if part.shard is not None else "the run"
            console.print(f"  {where}: {part.recorded} of {part.selected} selected items have a record",
                          markup=False)
    _render_status(console, report)
    for b in report.blocks:
        console.print(f"tooleffect: family {b.family} · policy {b.policy}  "
                      f"n={b.n_scored} scored, {b.n_errors} errors, {b.n_xfail} xfail · "
                      f"label set {b.label_set_fingerprint}", style="bold")
        t = Table(show_edge=False, pad_edge=False)
        eff = b.effects
        cols = ["class", "n", "w", "name ok", "name %", "95% CI", "name+args ok", "name+args %", "95% CI "]
        if eff:
            cols += ["effect ok", "effect %"]
        for col in cols:
            t.add_column(col, justify="left" if col == "class" else "right", no_wrap=col == "class",
                         min_width=13 if col == "class" else None, overflow="fold")
        for cls in CLASSES:
            c = getattr(b.classes, cls)
            nm, fa = c.name, c.name_args
            row = [cls, f"{c.n}{'*' if c.small else ''}",
                   "–" if c.weight is None else f"{c.weight:.3f}",
                   f"{nm.correct}/{c.n}", nm.rate_display, _ci(nm.wilson95_pct),
                   f"{fa.correct}/{c.n}", fa.rate_display, _ci(fa.wilson95_pct)]
            if eff:
                e = getattr(eff.classes, cls)
                row += [f"{e.correct}/{e.n}", e.rate_display]
            t.add_row(*row)
        t.add_section()
        for avg in ("micro", "macro"):
            a = b.micro if avg == "micro" else b.macro
            row = [f"{avg}-average", "", "", "", a.name_display, _ci(a.name_ci95_pct), "",
                   a.name_args_display, _ci(a.name_args_ci95_pct)]
            if eff:
                row += ["", eff.micro_display if avg == "micro" else eff.macro_display]
            t.add_row(*row)
        console.print(t)
        _render_small(console, b)
        if eff:
            _render_effects(console, eff)
        if b.buckets:
            console.print("by position bucket")
            bt = Table(show_edge=False, pad_edge=False)
            for col in ("bucket", "n", "quota", "population", "classes", "name %", "name+args %"):
                bt.add_column(col, justify="left" if col in ("bucket", "classes") else "right", overflow="fold")
            for name, bucket in b.buckets.items():
                q = (b.quota or {}).get(name)
                pop = (b.population or {}).get(name)
                classes = " ".join(f"{k}:{v}" for k, v in sorted(bucket.classes.items()))
                bt.add_row(name, str(bucket.n), "–" if q is None else str(q), "–" if pop is None else str(pop),
                           classes, bucket.name_display, bucket.name_args_display)
            console.print(bt)
        est = b.post_stratified_estimate
        if est:
            console.print(f"post-stratified estimate of the production rate (an estimate; bucket weights from "
                          f"the family's {est.weights_from}): name {est.name_display} %, "
                          f"name+args {est.name_args_display} %")
        rep = b.repeats
        if rep:
            shown_k = rep.pass_hat_k.items() if rep.adaptive is None else [  # adaptive: 1, 2 and k* of up to k*
                (k, v) for k, v in rep.pass_hat_k.items() if k in ("1", "2", str(rep.adaptive.items_per_case))]
            ks = ", ".join(f"pass^{k} {100 * v:.1f} %" for k, v in shown_k)
            many = (f"{rep.trials} trials" if rep.adaptive is None else
                    f"{rep.adaptive.trials_run} adaptive trials (up to {rep.adaptive.items_per_case} a case)")
            console.print(f"repeats: {many} of {rep.cases} cases: {ks}; verdict flips between "
                          f"trials on {100 * rep.flip_share:.1f} % of cases")
        kinds = ", ".join(f"{k} {v}" for k, v in b.kinds if v)
        console.print(f"kinds: {kinds or 'none'}")
        console.print("no_tool failures: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in b.no_tool_failures))
        nc = b.needless_calls
        if nc is not None:
            console.print(f"no_tool by MCP hints of the calls: read {nc.read}, write {nc.write}, destructive "
                          f"{nc.destructive}, no call {nc.no_call} of {nc.n}; severity-weighted no_tool "
                          f"{nc.weighted_display} %")
        by_reply = b.no_tool_by_reply
        if set(by_reply) - {"unspecified"}:
            console.print("no_tool by the reply due: " + ", ".join(
                f"{due} {r.n} (no call {r.no_call_display} %, reply right {r.right_display} %)"
                for due, r in by_reply.items()))
        made_up = b.hallucinated_tools
        shown = "; ".join(f"{k} {v}" for k, v in list(made_up.tools.items())[:5])
        console.print("calls to tools not offered (hallucinated): " + ", ".join(
            f"{c} {n}" for c, n in made_up.classes) + (f" ({shown})" if shown else ""))
        ph = b.phantom_actions
        if ph is not None and ph.ids:
            console.print("phantom actions (a claim the conversation does not hold): " + ", ".join(
                f"{c} {n}" for c, n in ph.classes) + f" ({ph.action} action, {ph.result} result)")
        ar = b.approximate_replies
        if ar is not None and ar.kinds:
            console.print("reply kinds judged by the fallback: " + ", ".join(f"{k} {v}" for k, v in ar.kinds.items())
                          + f"; {ar.low_precision} of a kind under 0.8 precision")
        if b.argument_failures:
            af = ", ".join(f"{k} {v}" for k, v in list(b.argument_failures.items())[:8])
            console.print(f"argument failures by tool.field: {af}")
        if b.unruled_fields:
            console.print(f"unruled fields (compared raw): {', '.join(list(b.unruled_fields)[:8])}")
        cost = b.cost
        if cost.input_tokens is None and cost.cost_usd is None and (b.policy == "replay" or not b.n_scored):
            console.print("cost: not recorded" + (" (replayed decisions)" if b.policy == "replay" else ""))
        else:
            money = "money unknown" if cost.cost_usd is None else _usd(cost.cost_usd)
            if cost.cost_usd is not None and cost.cost_usd_unknown:
                money += f" (+{cost.cost_usd_unknown} decisions unpriced)"
            console.print(f"cost: {cost_tokens(cost, b.n_scored)}, {money}, "
                          f"latency p50 {_ms(cost.latency_ms_p50)} p95 {_ms(cost.latency_ms_p95)}; "
                          f"input tokens on no-tool rows {_n(cost.no_tool_input_tokens)}")
        if cost.from_cache:
            console.print(f"{cost.from_cache} decisions came from the model cache (their cost is what they "
                          "cost when first made)")
        nts = cost.no_tool_spend
        if nts.input_tokens is not None:
            console.print(f"spent on decisions whose right answer included no tool: {_n(nts.input_tokens)} "
                          f"input tokens, {_usd(nts.cost_usd)}")
        top = cost.most_expensive
        if top and top[0].input_tokens is not None:
            console.print("most expensive decisions: " + "; ".join(
                f"{t.id} ({t.kind}, {_n(t.input_tokens)} in)" for t in top[:5]))
        if b.error_types:
            console.print("errors by type (excluded from rates): " + ", ".join(
                f"{t} {n}" for t, n in b.error_types.items()))
        for e in b.errors[:10]:
            err = e.error or {}
            console.print(f"error (excluded from rates): {e.id}: {err.get('type') or 'unknown'}: "
                          f"{err.get('message') or 'no message'}")
        if len(b.errors) > 10:
            console.print(f"… and {len(b.errors) - 10} more errors (all in the JSON report and the record log)")
        console.print("")
    for comp in report.comparisons:
        _render_comparison(console, comp)
    for line in robustness_lines(report.robustness):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    conv = report.conventions
    console.print("conventions: " + " | ".join(f"{k}: {v}" for k, v in conv.items()))
    return buf.getvalue()


def _render_small(console: Any, b: Block) -> None:
    """The gap between the levels, the averages' interval methods, and the small classes."""
    console.print(f"gap name − name+args: micro {percent(_frac(b.micro.gap_pct))}, macro "
                  f"{percent(_frac(b.macro.gap_pct))} points · 95 % intervals: Wilson per class and for the "
                  "micro-average, Price–Bonett for the macro-average", markup=False, highlight=False, soft_wrap=True)
    small = b.small_classes
    if small:
        each = ", ".join(f"{cls} n={s.n} (one row: {s.one_row_pct:.1f} points of its rate, "
                         f"{s.one_row_macro_pct:.1f} of the macro-average)" for cls, s in small.items())
        console.print(f"* small classes (fewer than {b.min_class_n} rows; --tooleffect-min-class-n): {each}",
                      markup=False, highlight=False, soft_wrap=True)


def _render_status(console: Any, report: Report) -> None:
    """The status line, the decisions a failing rate limiter kept from being made, then the invalid
    cases per family, the skipped items per family × policy and the items with no record per family.
    """
    invalid, skipped, unrecorded = report.invalid, report.skipped, report.unrecorded
    n_invalid = sum(f.count for f in invalid)
    n_errors = sum(b.n_errors for b in report.blocks)
    n_skipped = sum(s.count for s in skipped)
    n_unrecorded = sum(u.count for u in unrecorded)
    without = f", {n_unrecorded} without a record" if n_unrecorded else ""
    console.print(f"tooleffect report status: {report.status} ({n_invalid} invalid cases, {n_errors} errors, "
                  f"{n_skipped} skipped{without})", markup=False, highlight=False, soft_wrap=True)
    limiter = report.rate_limiter
    if limiter is not None:
        where = ", ".join(f"{b} {n}" for b, n in limiter.blocks.items())
        console.print(f"the rate limiter failed: {limiter.decisions} decision{'s' if limiter.decisions != 1 else ''} "
                      f"not made ({where}; RateLimiterError, not a provider's error, no request sent): "
                      f"{limiter.first}", markup=False, highlight=False, soft_wrap=True)
    for fam in invalid:
        ids = ", ".join("<file>" if i is None else i for i in fam.ids[:10])
        more = f" and {fam.count - 10} more" if fam.count > 10 else ""
        console.print(f"invalid cases in family {fam.family}: {fam.count} ({ids}{more}); not scored, "
                      "not in any rate", markup=False, highlight=False, soft_wrap=True)
        for entry in fam.cases[:10]:
            console.print(f"  {entry.problems[0]}", markup=False, highlight=False, soft_wrap=True)
    for sk in skipped:
        reasons = ", ".join(f"{r} {n}" for r, n in sk.reasons.items())
        console.print(f"skipped in {sk.family} / {sk.policy}: {sk.count} ({reasons}); not in any rate",
                      markup=False, highlight=False, soft_wrap=True)
    for un in unrecorded:
        reasons = ", ".join(f"{r} {n}" for r, n in un.reasons.items())
        console.print(f"without a record in family {un.family}: {un.count} ({reasons}); not in any rate",
                      markup=False, highlight=False, soft_wrap=True)
        for nodeid in un.ids[:10]:
            console.print(f"  {nodeid}", markup=False, highlight=False, soft_wrap=True)
        if un.count > 10:
            console.print(f"  and {un.count - 10} more (the report's unrecorded ids)", markup=False,
                          highlight=False, soft_wrap=True)
    if invalid or skipped or unrecorded or limiter is not None:
        console.print("")


def _render_effects(console: Any, eff: Effects) -> None:
    kinds = ", ".join(f"{k} {v}" for k, v in eff.kinds if v)
    console.print(f"effects ({eff.n} decisions run in a sandbox): {kinds}")
    rec = eff.recovery
    if rec.observed or rec.by_kind.not_observed:
        by = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in rec.by_kind if v)
        console.print(f"recovery from injected faults: {rec.rate_display} % ({rec.recovered}/{rec.observed} "
                      f"observed; {by})")
    ro = eff.rollout
    if ro:
        console.print(f"rollouts (up to {ro.limit} steps, {ro.n} cases): single-step (teacher-forced, upper "
                      f"bound; first decision, name + args) {ro.single_step_display} % · self-steered (end state "
                      f"meets the effects) {ro.self_steered_display} % · mean {ro.mean_steps} steps")
    conv = eff.conversations
    if conv:
        failed = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in conv.kinds.items() if k != "ok" and v)
        console.print(f"conversations played through (self-steered, up to {conv.limit} steps a turn): "
                      f"{conv.self_steered_display} % ({conv.passed}/{conv.n}) whole conversation right · "
                      f"teacher-forced on the same conversations: {conv.decisions_display} % of "
                      f"{conv.decisions} decisions, {conv.turns_display} % of {conv.turns} turns"
                      + (f" · first failures: {failed}" if failed else ""))
    sb = eff.sandbox
    missing = f"; not in force: {', '.join(sb.restrictions_missing)}" if sb.restrictions_missing else ""
    console.print(f"sandbox {'/'.join(sb.providers)}: {', '.join(sb.restrictions) or 'no isolation'}"
                  f"{missing}")
    found = eff.annotation_violations
    if found:
        console.print(f"annotation violations (findings against the MCP server, not the agent's verdict): {found.n}",
                      markup=False, highlight=False)
        for t in found.tools:
            kinds = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in t.kinds if v)
            hints = ", ".join(k for k, v in t.hints.items() if v) or "no hint true"
            console.print(f"  {t.tool} [{hints}]: {kinds} · first in {t.first_case}: "
                          f"{'; '.join((t.diff + t.lost)[:3]) or 'no diff'}", markup=False, highlight=False,
                          soft_wrap=True)


def _render_comparison(console: Any, comp: Comparison) -> None:
    from rich.table import Table

    for view, title in (("all", "every case each policy scored"),
                        ("shared", f"the {comp.shared_n} cases every policy scored")):
        console.print(f"policies side by side · family {comp.family} · {title}")
        t = Table(show_edge=False, pad_edge=False)
        t.add_column("", overflow="fold")
        for p in comp.policies:
            t.add_column(p, justify="right", overflow="fold")
        rows = comp.all if view == "all" else comp.shared
        t.add_row("n", *(str(rows[p].n) for p in comp.policies))
        for cls in CLASSES:
            t.add_row(f"{cls} name %", *(f"{getattr(rows[p].classes_name_display, cls)} "
                                          f"(n={getattr(rows[p].classes_n, cls)})" for p in comp.policies))
        heads = [rows[p] for p in comp.policies]
        t.add_row("name micro", *(h.name_micro_display for h in heads))
        t.add_row("name macro", *(h.name_macro_display for h in heads))
        t.add_row("name+args micro", *(h.name_args_micro_display for h in heads))
        t.add_row("name+args macro", *(h.name_args_macro_display for h in heads))
        console.print(t)
    console.print("")


def cost_tokens(cost: CostSummary, n: int) -> str:
    """The tokens of a block's cost line: the known counts added, and how many of its ``n`` scored
    decisions had none (a provider or agent that reported no usage, or not that count), per
    direction when they differ; never counted as 0.

    Returns:
        ``100 in / 20 out tokens``, ``100 in / 20 out tokens (tokens unknown for 1 of 3 decisions: not
        added)``, ``50 in / unknown out tokens (output tokens unknown for 5 of 5 decisions: not
        added)``, ``100 in / 20 out tokens (input tokens unknown for 1 of 3 decisions, output tokens
        unknown for 2 of 3: not added)`` or ``tokens unknown for all 3 decisions (no usage
        reported)``.
    """
    if cost.input_tokens is None and cost.output_tokens is None:
        return f"tokens unknown for all {n} decisions (no usage reported)"
    said = f"{_n(cost.input_tokens)} in / {_n(cost.output_tokens)} out tokens"
    tin, tout = cost.input_tokens_unknown, cost.output_tokens_unknown
    if tin == tout:
        return said + (f" (tokens unknown for {tin} of {n} decisions: not added)" if tin else "")
    parts = [f"{what} tokens unknown for {k} of {n}" for what, k in (("input", tin), ("output", tout)) if k]
    return f"{said} ({parts[0]} decisions{''.join(', ' + p for p in parts[1:])}: not added)"


def _n(x: Any) -> str:
    """A count, or ``unknown`` (never ``None``)."""
    return "unknown" if x is None else str(x)


def _usd(x: Any) -> str:
    return "unknown" if x is None else f"${x:.6f}"


def _ms(x: Any) -> str:
    return "unknown" if x is None else f"{x:.0f} ms"


def _frac(p: float | None) -> Fraction | None:
    return None if p is None else Fraction(p) / 100


def _ci(ci: Sequence[float] | None) -> str:
    if ci is None:
        return "–"
    return f"{percent(Fraction(ci[0]) / 100)}–{percent(Fraction(ci[1]) / 100)}"
