"""Records in, the :class:`~.model.Report` out: the report's counting, by family × policy.

One block per family × policy: families are separate populations and are never pooled.  The
arithmetic (rates, averages, intervals, rounding) is :mod:`.arithmetic`'s; this module decides
which rows count where.  A row is correct at the ``name`` level when its verdict's ``name_ok``
holds, at the ``name_args`` level when ``name_ok`` and ``name_args_ok`` both hold.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from math import comb
from typing import Any, Literal

from pytest_tooleffect.outcomes import NOT_A_GAP, RATE_LIMITER_ERROR
from pytest_tooleffect.report.annotations_model import find_violations
from pytest_tooleffect.report.arithmetic import (
    exact_pct,
    fingerprint,
    macro_interval,
    percent,
    rate_table,
    wilson_interval,
)
from pytest_tooleffect.report.effects_model import (
    ConversationSummary,
    EffectKindCounts,
    EffectRate,
    Effects,
    Recovery,
    RecoveryKinds,
    RolloutSummary,
    SandboxSummary,
)
from pytest_tooleffect.report.model import (
    CLASSES,
    KINDS,
    ApproximateReplies,
    Average,
    Block,
    Bucket,
    ClassRates,
    Comparison,
    CostSummary,
    ErrorEntry,
    ExpensiveDecision,
    HallucinatedTools,
    Headline,
    KindCounts,
    NoToolFailures,
    PhantomActions,
    PostStratified,
    Rate,
    ReplyDue,
    Report,
    SmallClass,
    Spend,
)
from pytest_tooleffect.report.needless import needless_calls
from pytest_tooleffect.report.parts import PerClass
from pytest_tooleffect.report.repeats_model import Repeats
from pytest_tooleffect.report.rows import Row, VerdictRow
from pytest_tooleffect.report.run_model import (
    InvalidCase,
    InvalidFamily,
    RateLimiterFailures,
    SkippedItems,
    UnrecordedItems,
)
from pytest_tooleffect.scoring.record import EffectRecord, Record

__all__ = ["CONVENTIONS", "summarise"]

Level = Literal["name", "name_args"]
Entry = Mapping[str, Any]  # an invalid case's, a skipped item's or an unrecorded item's entry (as the wire carries it)

CONVENTIONS = {
    "parallel_matching": (
        "a parallel turn is one decision: its calls are matched to one valid alternative as a multiset by "
        "optimal assignment; every emitted call must be acceptable and every call of the alternative present"
    ),
    "conditioning": (
        "single-step, teacher-forced: each state's prefix is what the recorded agent did, so these rates are "
        "an upper bound on self-steered behaviour"
    ),
    "class_weights": "w_i = n_i / N come from the sampling quota, not from production",
    "intervals": (
        "95 %: Wilson score intervals for each class and for the micro-average; for the macro-average, the "
        "adjusted Wald interval for a linear function of independent proportions (Price & Bonett 2004: 2/k "
        "successes and 4/k trials added to each of the k classes)"
    ),
    "errors": (
        "provider errors are excluded from every rate, counted by type and listed apart; so are answers that are "
        "not decisions: ContentFilter (the provider's safety layer stopped the answer) and Truncated (cut off at "
        "the output cap)"
    ),
}


def summarise(records: Iterable[Record | Mapping[str, Any]], families: Mapping[str, Mapping[str, Any]] | None = None,
              status: str = "complete", invalid: Iterable[Entry] = (), skipped: Iterable[Entry] = (),
              min_class_n: int = 20, unrecorded: Iterable[Entry] = ()) -> Report:
    """Build the report from records, and from the items collected that made no record.

    Args:
        records: the records (a record's JSON object, as a log holds it, is read as a :class:`Record`);
            ``outcome`` ``"scored"`` or ``"error"``.  Read once, one at a time: what the counting
            keeps of each is its :class:`~.rows.Row`, so a lazy sequence
            (:class:`~.store.RecordStore`) never has every record made at once.
        families: per-family metadata (``quota``, ``population``, ``production``) by family name.
        status: ``complete`` (the run ended), ``interrupted``, or ``incomplete`` (merged shards lack one).
        invalid: the cases that failed validation, ``{family, file, case_id, problems}`` each
            (:meth:`~pytest_tooleffect.collect.items.InvalidCaseItem.entry`).
        skipped: the items skipped, ``{id, family, policy, reason}`` each.
        min_class_n: a class with rows, fewer than this, is flagged as small in each block
            (``--tooleffect-min-class-n``, default 20).
        unrecorded: the items collected that ended with no record, ``{id, family, reason}`` each
            (``id`` the pytest node id).

    Returns:
        The report: one block per family × policy, sorted, a comparison per family run under
        several policies, the invalid cases per family, the skipped items per family × policy and
        the unrecorded items per family.  Its status is ``incomplete`` when a run that ended has an
        invalid case, an error record, a skipped item or an unrecorded one (docs/design.md scoring
        rule 7: ``complete`` only when every item collected was scored); an item skipped as
        ``settled`` (its block's sequential gates had their verdict before it ran) is no gap.
        The order the records come in does not change it (rows are taken in record id and trial
        order), so shards merged give the unsharded run's report.

    Raises:
        ValueError: an unknown status; a JSON object that is not a record (pydantic's ValidationError).
    """
    if status not in ("complete", "interrupted", "incomplete"):
        raise ValueError(f"report status {status!r}: complete, interrupted or incomplete")
    invalid, skipped, unrecorded = list(invalid), list(skipped), list(unrecorded)
    families = families or {}
    groups: dict[tuple[str, str], list[Row]] = defaultdict(list)
    errs: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for rec in records:  # each record read once, and only its row kept (:mod:`.rows`)
        r = Row.of(rec if isinstance(rec, Record) else Record.model_validate(rec))
        key = (r.family, r.policy)
        (groups if r.outcome == "scored" else errs)[key].append(r)
        groups.setdefault(key, groups.get(key, []))
    for rows in (*groups.values(), *errs.values()):
        rows.sort(key=lambda r: (r.id, r.trial or 1))
    blocks = [_block(f, p, groups[(f, p)], errs.get((f, p), []), families.get(f, {})) for f, p in sorted(groups)]
    for block in blocks:
        _flag_small(block, min_class_n)
    comparisons = []
    for fam in sorted({f for f, _ in groups}):
        policies = sorted(p for f, p in groups if f == fam)
        if len(policies) > 1:
            comparisons.append(_comparison(fam, {p: groups[(fam, p)] for p in policies}))
    gaps = [e for e in skipped if e["reason"] not in NOT_A_GAP]  # a settled skip was not needed: no gap in the run
    unscored = bool(invalid or gaps or unrecorded or any(errs.values())) or status == "incomplete"
    final: Literal["complete", "incomplete", "interrupted"] = (
        "interrupted" if status == "interrupted" else "incomplete" if unscored else "complete")
    return Report(status=final, conventions=CONVENTIONS, blocks=blocks, comparisons=comparisons,
                  invalid=_invalid(invalid), skipped=_skipped(skipped), unrecorded=_unrecorded(unrecorded),
                  rate_limiter=_rate_limiter([r for rows in errs.values() for r in rows]))


def _flag_small(block: Block, min_class_n: int) -> None:
    """Mark the block's classes with rows, fewer than ``min_class_n``, and say how much one row weighs."""
    block.min_class_n = min_class_n
    rates = block.classes.model_dump()
    k = sum(1 for c in rates.values() if c["n"])
    for cls in CLASSES:
        rows: ClassRates = getattr(block.classes, cls)
        if 0 < rows.n < min_class_n:
            rows.small = True
            block.small_classes[cls] = SmallClass(n=rows.n, one_row_pct=round(100 / rows.n, 4),
                                                  one_row_macro_pct=round(100 / (k * rows.n), 4))


def _invalid(entries: Sequence[Entry]) -> list[InvalidFamily]:
    """The invalid cases per family: ids sorted, entries that are not one case (``case_id`` null) last."""
    by_family: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_family[e["family"]].append(e)
    out = []
    for fam in sorted(by_family):
        rows = sorted(by_family[fam], key=lambda e: (e.get("case_id") is None, e.get("case_id") or "", e["file"]))
        out.append(InvalidFamily(family=fam, count=len(rows), ids=[e.get("case_id") for e in rows],
                                 cases=[InvalidCase(case_id=e.get("case_id"), file=e["file"],
                                                    problems=list(e["problems"])) for e in rows]))
    return out


def _skipped(entries: Sequence[Entry]) -> list[SkippedItems]:
    """The skipped items per family × policy, with their reasons."""
    by_block: dict[tuple[str, str], list[Entry]] = defaultdict(list)
    for e in entries:
        by_block[(e["family"], e["policy"])].append(e)
    return [SkippedItems(family=f, policy=p, count=len(rows),
                         reasons=dict(Counter(e["reason"] for e in rows).most_common()),
                         ids=sorted(e["id"] for e in rows))
            for (f, p), rows in sorted(by_block.items())]


def _unrecorded(entries: Sequence[Entry]) -> list[UnrecordedItems]:
    """The items without a record per family, with their reasons."""
    by_family: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_family[e["family"]].append(e)
    return [UnrecordedItems(family=f, count=len(rows), reasons=dict(Counter(e["reason"] for e in rows).most_common()),
                            ids=sorted(e["id"] for e in rows))
            for f, rows in sorted(by_family.items())]


def _rate_limiter(errors: Sequence[Row]) -> RateLimiterFailures | None:
    """The decisions the rate limiter kept from being made (error records of its type), or ``None``."""
    rows = sorted((r for r in errors if r.error is not None and r.error.type == RATE_LIMITER_ERROR),
                  key=lambda r: (r.id, r.trial or 1))
    if not rows:
        return None
    blocks = Counter(f"{r.family} / {r.policy}" for r in rows)
    assert rows[0].error is not None
    return RateLimiterFailures(decisions=len(rows), blocks=dict(blocks.most_common()), first=rows[0].error.message)


def _verdict(r: Row) -> VerdictRow:
    """A scored row's verdict."""
    assert r.verdict is not None, r.id
    return r.verdict


def _correct(r: Row, level: Level) -> bool:
    v = _verdict(r)
    return v.name_ok if level == "name" else v.name_ok and v.name_args_ok


def _failed(r: Row) -> bool:
    """The row failed at some level: its kind (name or name + args) or its effect."""
    return _verdict(r).kind not in ("ok", "ok_no_tool") or (r.effect is not None and not r.effect.passed)


def _effect(r: Row) -> EffectRecord:
    """A sandboxed row's effect verdict."""
    assert r.effect is not None, r.id
    return r.effect


def _level(records: Sequence[Row], level: Level) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for cls in CLASSES:
        rows = [r for r in records if r.label_class == cls]
        out[cls] = (sum(1 for r in rows if _correct(r, level)), len(rows))
    return out


def _rate(row: Mapping[str, Any]) -> Rate:
    ci = wilson_interval(row["correct"], row["n"])
    return Rate(correct=row["correct"], rate_pct=exact_pct(row["rate"]), rate_display=percent(row["rate"]),
                wilson95_pct=None if ci is None else (round(ci[0] * 100, 4), round(ci[1] * 100, 4)))


def _average(name_t: Mapping[str, Any], args_t: Mapping[str, Any], which: str) -> Average:
    a, b = name_t[which], args_t[which]
    return Average(name_pct=exact_pct(a), name_display=percent(a), name_args_pct=exact_pct(b),
                   name_args_display=percent(b), gap_pct=None if a is None or b is None else exact_pct(a - b),
                   name_ci95_pct=_average_interval(name_t, which),
                   name_args_ci95_pct=_average_interval(args_t, which))


def _average_interval(table: Mapping[str, Any], which: str) -> tuple[float, float] | None:
    """The 95 % interval of an average, as percentages rounded to 4 digits: Wilson's for the micro-average
    (one proportion over all rows), Price & Bonett's for the macro-average (:func:`.arithmetic.macro_interval`).
    """
    counts = [(c["correct"], c["n"]) for c in table["classes"].values()]
    if which == "micro":
        ci = wilson_interval(sum(c for c, _ in counts), sum(n for _, n in counts))
    else:
        ci = macro_interval(counts)
    return None if ci is None else (round(ci[0] * 100, 4), round(ci[1] * 100, 4))


def _share(correct: int, n: int) -> tuple[float, str]:
    return exact_pct(Fraction(correct, n)), percent(Fraction(correct, n))


def _bucket_key(bucket: str, quota: Mapping[str, int] | None) -> tuple[int, int, str]:
    """Order buckets as the quota lists them, else first / middle / last, then q1, q2, … by number."""
    order = list(quota or {})
    if bucket in order:
        return (0, order.index(bucket), "")
    if bucket in ("first", "middle", "last"):
        return (1, ("first", "middle", "last").index(bucket), "")
    m = re.fullmatch(r"q(\d+)", bucket)
    return (2, int(m.group(1)), "") if m else (3, 0, bucket)


def _buckets(recs: Sequence[Row], quota: Mapping[str, int] | None) -> dict[str, Bucket]:
    out = {}
    for b in sorted({r.bucket for r in recs}, key=lambda x: _bucket_key(x, quota)):
        rows = [r for r in recs if r.bucket == b]
        name_pct, name_display = _share(sum(1 for r in rows if _correct(r, "name")), len(rows))
        args_pct, args_display = _share(sum(1 for r in rows if _correct(r, "name_args")), len(rows))
        out[b] = Bucket(n=len(rows), classes=dict(Counter(r.label_class for r in rows)), name_pct=name_pct,
                        name_display=name_display, name_args_pct=args_pct, name_args_display=args_display)
    return out


def _block(family: str, policy: str, recs: Sequence[Row], errors: Sequence[Row],
           family_meta: Mapping[str, Any]) -> Block:
    name_t = rate_table(_level(recs, "name"))
    args_t = rate_table(_level(recs, "name_args"))
    classes = {cls: ClassRates(n=name_t["classes"][cls]["n"],
                               weight=None if name_t["classes"][cls]["weight"] is None
                               else float(name_t["classes"][cls]["weight"]),
                               name=_rate(name_t["classes"][cls]), name_args=_rate(args_t["classes"][cls]))
               for cls in CLASSES}
    kinds = Counter(_verdict(r).kind for r in recs)
    arg_fail: Counter[str] = Counter()
    unruled: Counter[str] = Counter()
    for r in recs:
        v = _verdict(r)
        for path in v.unruled:
            unruled[path] += 1
        if v.kind == "right_tool_wrong_args":
            for path in v.failed_fields:
                arg_fail[re.sub(r"\[\d+\]", "", path)] += 1
    nt_fail: Counter[str] = Counter(r.no_tool_failure or "other" for r in recs
                                    if r.label_class == "no_tool" and _failed(r))
    made_up = [r for r in recs if _verdict(r).hallucinated]
    made_up_names = Counter(n for r in made_up for n in dict.fromkeys(_verdict(r).hallucinated))
    return Block(
        family=family,
        policy=policy,
        n_scored=len(recs),
        n_errors=len(errors),
        n_xfail=sum(1 for r in recs if r.expected_failure),
        classes=PerClass[ClassRates](**classes),
        micro=_average(name_t, args_t, "micro"),
        macro=_average(name_t, args_t, "macro"),
        buckets=_buckets(recs, family_meta.get("quota")),
        quota=family_meta.get("quota"),
        population=family_meta.get("population"),
        kinds=KindCounts(**{k: kinds.get(k, 0) for k in KINDS}),
        argument_failures=dict(arg_fail.most_common()),
        no_tool_failures=NoToolFailures(**{k: nt_fail.get(k, 0) for k in NoToolFailures.model_fields}),
        no_tool_by_reply=_by_reply(recs),
        needless_calls=needless_calls(recs),
        hallucinated_tools=HallucinatedTools(
            classes=PerClass[int](**{c: sum(1 for r in made_up if r.label_class == c) for c in CLASSES}),
            tools=dict(made_up_names.most_common())),
        unruled_fields=dict(unruled.most_common()),
        phantom_actions=_phantoms(recs),
        approximate_replies=ApproximateReplies(
            kinds=dict(sorted(Counter(k for r in recs if (k := _verdict(r).reply_fallback)).items(),
                              key=lambda kv: ("ask", "refuse", "answer").index(kv[0]))),
            low_precision=sum(1 for r in recs if _verdict(r).reply_low_precision)),
        approximate=sum(1 for r in recs if _verdict(r).approximate),
        cost=_cost(recs),
        errors=[ErrorEntry(id=e.id, error=None if e.error is None else e.error.model_dump(
            mode="json", by_alias=True, exclude_unset=True)) for e in errors],
        error_types=dict(Counter((e.error.type if e.error else None) or "unknown" for e in errors).most_common()),
        failing=[r.id for r in recs if _failed(r)],
        label_set_fingerprint=fingerprint((r.case_id, r.label_hash) for r in [*recs, *errors]),
        post_stratified_estimate=_post_stratified(recs, family_meta),
        repeats=_repeats(recs),
        effects=_effects(recs),
    )


def _phantoms(recs: Sequence[Row]) -> PhantomActions:
    """The decisions whose text claims what the conversation does not hold, per class and claim kind."""
    rows = [r for r in recs if _verdict(r).phantom is not None]
    return PhantomActions(classes=PerClass[int](**{c: sum(1 for r in rows if r.label_class == c) for c in CLASSES}),
                          action=sum(1 for r in rows if _verdict(r).phantom == "action"),
                          result=sum(1 for r in rows if _verdict(r).phantom == "result"),
                          ids=sorted(r.id for r in rows))


def _by_reply(recs: Sequence[Row]) -> dict[str, ReplyDue]:
    """The no-tool rows per reply kind their labels ask for (``reply_due``), in a fixed order."""
    groups: dict[str, list[Row]] = {}
    for r in recs:
        if r.label_class == "no_tool":
            groups.setdefault(r.reply_due or "unspecified", []).append(r)
    out = {}
    for due in ("ask", "refuse", "answer", "unspecified"):
        rows = groups.get(due)
        if rows:
            name = _share(sum(1 for r in rows if _correct(r, "name")), len(rows))
            right = _share(sum(1 for r in rows if _correct(r, "name_args")), len(rows))
            out[due] = ReplyDue(n=len(rows), no_call_pct=name[0], no_call_display=name[1], right_pct=right[0],
                                right_display=right[1])
    return out


def _repeats(recs: Sequence[Row]) -> Repeats | None:
    """pass^k over repeated trials, and the share of cases whose verdict flips between trials.

    pass^k (Yao et al., "τ-bench", 2024) is the chance that all of k trials of a case pass,
    estimated without bias from n ≥ k trials with c passes as C(c, k) / C(n, k), averaged over cases.
    """
    trials: dict[str, list[bool]] = defaultdict(list)
    for r in recs:
        trials[r.case_id].append(_verdict(r).kind in ("ok", "ok_no_tool"))
    k_max = max((len(v) for v in trials.values()), default=0)
    if k_max < 2:
        return None
    pass_hat = {}
    for k in range(1, k_max + 1):
        values = [comb(sum(v), k) / comb(len(v), k) for v in trials.values() if len(v) >= k]
        pass_hat[str(k)] = sum(values) / len(values)
    flips = sum(1 for v in trials.values() if len(set(v)) > 1)
    return Repeats(trials=k_max, cases=len(trials), pass_hat_k=pass_hat, flip_share=flips / len(trials))


def _post_stratified(recs: Sequence[Row], meta: Mapping[str, Any]) -> PostStratified | None:
    """Estimate the production rate from per-bucket rates, weighted by production shares.

    ``estimate = Σ_b P_b · r_b`` over the buckets with scored rows, with ``P_b`` the family's
    ``production`` shares when given, else its ``population`` counts normalised (the population
    the sample was drawn from), renormalised over the buckets present.  A standard
    post-stratification estimator (e.g. Lohr, *Sampling: Design and Analysis*, §4.4); it is an
    estimate, labelled so, and only as good as the weights.
    """
    weights = meta.get("production") or meta.get("population")
    source: Literal["production", "population"] = "production" if meta.get("production") else "population"
    if not weights:
        return None
    present = {r.bucket for r in recs}
    w = {b: float(v) for b, v in weights.items() if b in present and float(v) > 0}
    total = sum(w.values())
    if not total:
        return None
    est: dict[Level, Fraction] = {}
    for level in ("name", "name_args"):
        est[level] = Fraction(0)
        for b, wb in w.items():
            rows = [r for r in recs if r.bucket == b]
            est[level] += Fraction(wb / total) * Fraction(sum(1 for r in rows if _correct(r, level)), len(rows))
    return PostStratified(weights_from=source, weights={b: v / total for b, v in w.items()},
                          name_pct=exact_pct(est["name"]), name_display=percent(est["name"]),
                          name_args_pct=exact_pct(est["name_args"]), name_args_display=percent(est["name_args"]))


def _effects(recs: Sequence[Row]) -> Effects | None:
    """Effect-level rates (rows run in a sandbox), recovery from injected faults, single-step vs
    self-steered rates on the same cases, and the sandbox isolation in force.
    """
    rows = [r for r in recs if r.effect is not None]
    if not rows:
        return None
    counts = {cls: (sum(1 for r in rows if r.label_class == cls and _effect(r).passed),
                    sum(1 for r in rows if r.label_class == cls)) for cls in CLASSES}
    table = rate_table(counts)
    classes = {cls: EffectRate(n=table["classes"][cls]["n"], **_rate(table["classes"][cls]).model_dump())
               for cls in CLASSES}
    kinds = Counter(_effect(r).kind for r in rows)
    recovery: Counter[str] = Counter(r.recovery for r in rows if r.recovery is not None)
    observed = sum(v for k, v in recovery.items() if k != "not_observed")
    recovered = sum(recovery.get(k, 0) for k in ("retried", "other_path", "told_user"))
    # rollouts happen only for a live policy: a replayed decision is never self-steered
    steered = [(r, r.rollout) for r in rows if r.rollout is not None and r.rollout.limit > 1
               and r.rollout.stopped != "replay" and r.conversation is None]
    rollout = None
    if steered:
        single_pct, single_display = _share(sum(1 for r, _ in steered if _correct(r, "name_args")), len(steered))
        end_pct, end_display = _share(sum(1 for r, _ in steered if _effect(r).passed), len(steered))
        steps = [ro.steps for _, ro in steered]
        rollout = RolloutSummary(
            n=len(steered), limit=max(ro.limit for _, ro in steered),
            single_step_pct=single_pct, single_step_display=single_display,
            self_steered_pct=end_pct, self_steered_display=end_display,
            mean_steps=round(sum(steps) / len(steps), 2),
            stopped=dict(Counter(ro.stopped for _, ro in steered)),
        )
    sandboxes = [r.sandbox for r in rows]
    return Effects(
        n=len(rows),
        classes=PerClass[EffectRate](**classes),
        micro_pct=exact_pct(table["micro"]), micro_display=percent(table["micro"]),
        macro_pct=exact_pct(table["macro"]), macro_display=percent(table["macro"]),
        kinds=EffectKindCounts(**{k: kinds.get(k, 0) for k in EffectKindCounts.model_fields}),
        recovery=Recovery(
            observed=observed, recovered=recovered,
            rate_pct=exact_pct(Fraction(recovered, observed)) if observed else None,
            rate_display=percent(Fraction(recovered, observed)) if observed else "–",
            by_kind=RecoveryKinds(**{k: recovery.get(k, 0) for k in RecoveryKinds.model_fields}),
        ),
        rollout=rollout,
        conversations=_conversations(recs),
        sandbox=SandboxSummary(providers=sorted({s.provider if s else "?" for s in sandboxes}),
                               restrictions=sorted({x for s in sandboxes if s for x in s.restrictions}),
                               restrictions_missing=sorted({x for s in sandboxes if s
                                                            for x in s.restrictions_missing})),
        annotation_violations=find_violations((r.case_id, r.annotation_violations) for r in rows),
    )


def _conversations(recs: Sequence[Row]) -> ConversationSummary | None:
    """Whole-conversation success (self-steered) beside the teacher-forced decision points of the
    same conversations (rows sharing the conversation row's ``source.trace_id``): per decision
    point, and per user turn (``source.position``) whose every decision point is right.
    """
    played = [(r, r.conversation) for r in recs if r.conversation is not None]
    if not played:
        return None
    traces = {r.trace_id for r, _ in played}
    forced = [r for r in recs if r.verdict is not None and r.trace_id in traces]

    def right(r: Row) -> bool:
        return _correct(r, "name_args") and (r.effect is None or r.effect.passed)

    by_turn: dict[tuple[Any, Any], bool] = {}
    for r in forced:
        key = (r.trace_id, r.position)
        by_turn[key] = by_turn.get(key, True) and right(r)
    passed = sum(1 for _, c in played if c.passed)
    ok = sum(1 for r in forced if right(r))
    turns_ok = sum(by_turn.values())
    pct, display = _share(passed, len(played))
    return ConversationSummary(
        n=len(played), limit=max(r.rollout.limit if r.rollout else 1 for r, _ in played), passed=passed,
        self_steered_pct=pct, self_steered_display=display, decisions=len(forced),
        decisions_pct=_share(ok, len(forced))[0] if forced else None,
        decisions_display=_share(ok, len(forced))[1] if forced else "–",
        turns=len(by_turn), turns_pct=_share(turns_ok, len(by_turn))[0] if by_turn else None,
        turns_display=_share(turns_ok, len(by_turn))[1] if by_turn else "–",
        kinds=dict(sorted(Counter(c.kind for _, c in played).items())),
    )


def _known_sum(values: Sequence[Any]) -> Any:
    """The sum of the values that are known, ``None`` when none is."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _spend(rows: Sequence[Row]) -> Spend:
    money = [r.cost.cost_usd for r in rows]
    return Spend(n=len(rows), input_tokens=_known_sum([r.cost.input_tokens for r in rows]),
                 cost_usd=_known_sum(money), cost_usd_unknown=sum(1 for m in money if m is None))


def _cost(recs: Sequence[Row]) -> CostSummary:
    totals: dict[str, Any] = {}
    for key in ("input_tokens", "output_tokens", "cost_usd"):
        vals = [getattr(r.cost, key) for r in recs]
        totals[key] = _known_sum(vals)
        totals[f"{key}_unknown"] = sum(1 for v in vals if v is None)
    lat = sorted(r.cost.latency_ms for r in recs if r.cost.latency_ms is not None)
    p50 = p95 = None
    if lat:
        import numpy as np

        p50, p95 = float(np.percentile(lat, 50)), float(np.percentile(lat, 95))
    nt = [r for r in recs if r.label_class == "no_tool"]
    no_tool_input = sum(r.cost.input_tokens or 0 for r in nt) if any(
        r.cost.input_tokens is not None for r in nt) else None
    priced = [r for r in recs if r.cost.cost_usd is not None or r.cost.input_tokens is not None]
    top = sorted(priced, key=lambda r: (r.cost.cost_usd or 0, r.cost.input_tokens or 0), reverse=True)[:10]
    return CostSummary(
        **totals,
        latency_ms_p50=p50,
        latency_ms_p95=p95,
        no_tool_input_tokens=no_tool_input,
        by_class=PerClass[Spend](**{c: _spend([r for r in recs if r.label_class == c]) for c in CLASSES}),
        by_kind={k: _spend([r for r in recs if _verdict(r).kind == k]) for k in KINDS
                 if any(_verdict(r).kind == k for r in recs)},
        # the waste the no-tool class stands for: what decisions whose right answer was no tool spent
        no_tool_spend=_spend(nt),
        most_expensive=[ExpensiveDecision(id=r.id, kind=_verdict(r).kind, input_tokens=r.cost.input_tokens,
                                          output_tokens=r.cost.output_tokens, cost_usd=r.cost.cost_usd)
                        for r in top],
        from_cache=sum(1 for r in recs if r.cached),
    )


def _headline(recs: Sequence[Row]) -> Headline:
    name_t, args_t = rate_table(_level(recs, "name")), rate_table(_level(recs, "name_args"))
    return Headline(
        n=len(recs),
        classes_n=PerClass[int](**{c: name_t["classes"][c]["n"] for c in CLASSES}),
        name_micro_display=percent(name_t["micro"]), name_macro_display=percent(name_t["macro"]),
        name_args_micro_display=percent(args_t["micro"]), name_args_macro_display=percent(args_t["macro"]),
        classes_name_display=PerClass[str](**{c: percent(name_t["classes"][c]["rate"]) for c in CLASSES}),
    )


def _comparison(family: str, by_policy: Mapping[str, Sequence[Row]]) -> Comparison:
    """Policies side by side on one family: on all the cases each scored, and on the shared cases."""
    shared = set.intersection(*({r.case_id for r in recs} for recs in by_policy.values()))
    return Comparison(
        family=family,
        policies=list(by_policy),
        shared_n=len(shared),
        all={p: _headline(recs) for p, recs in by_policy.items()},
        shared={p: _headline([r for r in recs if r.case_id in shared]) for p, recs in by_policy.items()},
    )
