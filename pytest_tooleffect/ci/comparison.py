"""Two runs compared decision by decision: per family × policy × class the rates before and
after at each level on the paired decisions, the decisions that flipped (both ways), the known
failures whose kind changed (``changed``: never counted as known), known failures, new and
left-out decisions with the reason, and an exact McNemar test on the pairs
(:func:`mcnemar_exact`).  The report's ``baseline`` block and ``tooleffect compare`` print it.
Two runs whose label-set fingerprints differ are not one quantity measured twice
(:func:`fingerprint_mismatches`): the comparison is refused, or restricted to the shared
decisions with unchanged labels when asked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from pytest_tooleffect.ci.baseline import CLASSES, LEFT_OUT, LEVELS, Baseline, BaselineDecision, classify
from pytest_tooleffect.collect.ids import record_id
from pytest_tooleffect.report import percent
from pytest_tooleffect.report.arithmetic import mcnemar_exact
from pytest_tooleffect.util.display import shown

__all__ = ["ERRORS_AFTER_PASS", "compare", "fingerprint_mismatch_line", "fingerprint_mismatches", "mcnemar_exact",
           "mismatch_line", "policy_mismatches", "render_comparison", "repeats_line", "repeats_mismatches",
           "summary_lines"]


def _rate(correct: int, n: int) -> dict[str, Any]:
    r = Fraction(correct, n) if n else None
    return {"correct": correct, "n": n, "rate_pct": None if r is None else float(r * 100), "display": percent(r)}


def _rates(pairs: Sequence[tuple[BaselineDecision, BaselineDecision]]) -> dict[str, Any]:
    """Before and after at each level on paired decisions (``effect`` only over pairs judged on it)."""
    out: dict[str, Any] = {"n": len(pairs)}
    for level in LEVELS:
        judged = [(b, a) for b, a in pairs if b.level(level) is not None and a.level(level) is not None]
        if level == "effect" and not judged:
            continue
        out[level] = {"before": _rate(sum(1 for b, _ in judged if b.level(level)), len(judged)),
                      "after": _rate(sum(1 for _, a in judged if a.level(level)), len(judged))}
    return out


def _flip(rid: str, before: BaselineDecision, after: BaselineDecision) -> dict[str, Any]:
    return {"id": rid, "class": after.label_class, "before": before.describe(), "after": after.describe()}


#: ``tooleffect compare --errors``: a decision that passed in A and is an error in B is a regression
#: (``regression``) or left out as an error (``skip``)
ERRORS_AFTER_PASS = ("regression", "skip")


def compare(before: Baseline, after: Baseline, changed_labels: str = "skip", errors: str = "skip",
            adaptive_after: int | None = None) -> dict[str, Any]:
    """Compare two runs' decisions, paired by record id, per family × policy.

    Args:
        before: the baseline (or an earlier run read as one).
        after: the new run.
        changed_labels: ``skip`` leaves out decisions whose label hash changed; ``compare`` pairs them.
        errors: what a decision that passed before and is an error now is: ``regression`` (listed
            with the regressions, ``"error": true``, and counted in them; outside the paired rates
            and McNemar's table, which hold verdicts) or ``skip`` (left out as ``error_after``, as
            every other error).
        adaptive_after: the new run's most trials of a case under ``--tooleffect-repeats adaptive``
            (``None``: fixed repeats, or not known), for :func:`repeats_mismatches`.

    Returns:
        ``{"changed_labels", "blocks": [...], "totals": {...}}``.  A block per family × policy of
        either side: ``label_set_fingerprint`` ``{before, after}`` and ``same_label_set``;
        ``compared`` (paired decisions); ``classes`` (per class, and ``all``: ``n`` and per level
        ``{before, after}`` rates on the paired decisions: ``correct``, ``n``, ``rate_pct``,
        ``display``); ``regressions``, ``fixes`` and ``changed`` (failed in both, with another kind
        now; not counted in ``known``) as ``{id, class, before, after}``; ``known``, ``passing``,
        ``new`` counts; ``left_out`` counts by reason (:data:`LEFT_OUT`) and
        ``label_changed_ids``; ``label_changed_compared``; ``mcnemar`` (``table``, ``b``, ``c``,
        ``p_value``, ``test``).  ``totals`` sums the counts (rates are never pooled across
        families).  ``policy_mismatches``: :func:`policy_mismatches`; ``repeats_mismatches``:
        :func:`repeats_mismatches`.
    """
    keys = sorted({(g.family, g.policy) for g in (*before.groups, *after.groups)})
    blocks: list[dict[str, Any]] = []
    for family, policy in keys:
        b_grp, a_grp = before.group(family, policy), after.group(family, policy)
        b_dec = {k: d for k, d in before.decisions.items() if (d.family, d.policy) == (family, policy)}
        a_dec = {k: d for k, d in after.decisions.items() if (d.family, d.policy) == (family, policy)}
        statuses: Counter[str] = Counter()
        left_out: Counter[str] = Counter({k: 0 for k in LEFT_OUT})
        pairs: list[tuple[BaselineDecision, BaselineDecision]] = []
        regressions, fixes, kind_changed, changed_ids = [], [], [], []
        changed_compared = 0
        for rid, a in a_dec.items():
            b = b_dec.get(rid)
            status = classify(b, a, changed_labels)
            statuses[status] += 1
            if b is None:
                continue
            if status == "not_compared":
                if errors == "regression" and b.outcome == "scored" and b.passed and a.outcome == "error":
                    regressions.append({**_flip(rid, b, a), "error": True})  # B failed to decide what A got right
                    continue
                left_out["error_before" if b.outcome == "error" else "error_after"] += 1
            elif status == "label_changed":
                left_out["label_changed"] += 1
                changed_ids.append(rid)
            else:
                pairs.append((b, a))
                changed_compared += b.label_hash != a.label_hash
                if status == "regression":
                    regressions.append(_flip(rid, b, a))
                elif status == "fixed":
                    fixes.append(_flip(rid, b, a))
                elif status == "changed":
                    kind_changed.append(_flip(rid, b, a))
        left_out["not_in_after"] = sum(1 for rid in b_dec if rid not in a_dec)
        both = sum(1 for b, a in pairs if b.passed and a.passed)
        neither = sum(1 for b, a in pairs if not b.passed and not a.passed)
        flipped = sum(1 for f in regressions if not f.get("error"))  # the verdicts' pass→fail, for the test
        table = [[both, flipped], [len(fixes), neither]]
        classes = {cls: _rates([(b, a) for b, a in pairs if a.label_class == cls]) for cls in CLASSES}
        fp_b = b_grp.label_set_fingerprint if b_grp else None
        fp_a = a_grp.label_set_fingerprint if a_grp else None
        block: dict[str, Any] = {
            "family": family, "policy": policy,
            "label_set_fingerprint": {"before": fp_b, "after": fp_a},
            "same_label_set": fp_b is not None and fp_b == fp_a,
            "compared": len(pairs),
            "classes": {**classes, "all": _rates(pairs)},
            "regressions": regressions, "fixes": fixes, "changed": kind_changed,
            "known": statuses["known"], "passing": statuses["passing"], "new": statuses["new"],
            "left_out": dict(left_out), "label_changed_ids": changed_ids,
            "label_changed_compared": changed_compared,
            "mcnemar": {"table": table, "b": flipped, "c": len(fixes), "p_value": mcnemar_exact(table),
                        "test": "exact McNemar (binomial, two-sided) on the paired pass/fail; McNemar 1947; "
                                "scipy.stats.binomtest"},
        }
        if errors == "regression":  # said only when asked for (a run's baseline section leaves errors out)
            block["errors_after_pass"] = len(regressions) - flipped
        blocks.append(block)
    mismatches = policy_mismatches(before, after, blocks)
    totals: dict[str, Any] = {k: sum(len(b[k]) if isinstance(b[k], list) else b[k] for b in blocks)
                              for k in ("compared", "regressions", "fixes", "changed", "known", "passing", "new")}
    totals["left_out"] = {k: sum(b["left_out"][k] for b in blocks) for k in LEFT_OUT}
    out = {"changed_labels": changed_labels, "left_out_reasons": LEFT_OUT, "blocks": blocks, "totals": totals,
           "policy_mismatches": mismatches,
           "repeats_mismatches": repeats_mismatches(before, after, blocks, adaptive_after)}
    if errors == "regression":
        totals["errors_after_pass"] = sum(b["errors_after_pass"] for b in blocks)
        out["errors"] = errors
    return out


def policy_mismatches(before: Baseline, after: Baseline,
                      blocks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The families both sides hold under different policy names: record ids name the policy, so
    the decisions of a policy only one side ran pair with nothing (they are ``new`` on one side and
    ``not_in_after`` on the other).

    Args:
        before: the baseline.
        after: the new run.
        blocks: :func:`compare`'s blocks (for the decisions compared per family).

    Returns:
        Per such family, sorted: ``{family, baseline_policies, run_policies, compared, line}``, the
        policies (sorted) of each side, the decisions of the family that were compared all the same
        (those of the policies both sides ran) and :func:`mismatch_line`.  A family whose policies on
        one side are a subset of the other's is no mismatch (a run that ran fewer policies, or more).
    """
    out = []
    for family in sorted({g.family for g in before.groups} & {g.family for g in after.groups}):
        b_pol = sorted({g.policy for g in before.groups if g.family == family})
        a_pol = sorted({g.policy for g in after.groups if g.family == family})
        if set(b_pol) - set(a_pol) and set(a_pol) - set(b_pol):
            compared = sum(int(b["compared"]) for b in blocks if b["family"] == family)
            entry: dict[str, Any] = {"family": family, "baseline_policies": b_pol, "run_policies": a_pol,
                                     "compared": compared}
            out.append({**entry, "line": mismatch_line(entry)})
    return out


def mismatch_line(mismatch: Mapping[str, Any], before: str = "the baseline", after: str = "this run") -> str:
    """One of :func:`policy_mismatches` in words: ``family F: the baseline holds policy A; this run ran B:
    no decision compared (…how to pair them)``.

    Args:
        mismatch: one entry of :func:`policy_mismatches`.
        before: what to call the baseline's side.
        after: what to call the run's side.
    """
    def names(policies: Sequence[str]) -> str:
        return ("policy " if len(policies) == 1 else "policies ") + ", ".join(policies)

    compared = mismatch["compared"]
    what = "no decision compared" if not compared else f"{compared} decisions compared (of the policies both ran)"
    return shown(f"family {mismatch['family']}: {before} holds {names(mismatch['baseline_policies'])}; {after} ran "
                 f"{', '.join(mismatch['run_policies'])}: {what} (a decision pairs by record id, which names its "
                 "policy: run the policy under the baseline's name, e.g. --tooleffect-agent NAME=module:function, or "
                 "save a new baseline)", limit=None)


def _trials(run: Baseline, family: str, policy: str) -> tuple[bool, int]:
    """Whether a side's record ids of a family × policy name their trial, and its most trials of a case."""
    per_case: Counter[str] = Counter()
    repeated = False
    for rid, d in run.decisions.items():
        if (d.family, d.policy) == (family, policy):
            per_case[d.case_id] += 1
            repeated = repeated or rid != record_id(family, d.case_id, policy)
    return repeated, max(per_case.values(), default=0)


def repeats_mismatches(before: Baseline, after: Baseline, blocks: Sequence[Mapping[str, Any]],
                       adaptive_after: int | None = None) -> list[dict[str, Any]]:
    """The family × policy blocks both sides hold where one side ran repeats (``--tooleffect-repeats``,
    fixed or adaptive) and the other did not: record ids under repeats name the trial
    (``family/case[policy:trial]``), so no decision of one pairs with a decision of the other.

    Args:
        before: the baseline.
        after: the new run.
        blocks: :func:`compare`'s blocks (for the decisions compared per block).
        adaptive_after: the new run's most trials of a case under adaptive repeats, ``None`` otherwise.

    Returns:
        Per such block, sorted: ``{family, policy, baseline_trials, run_trials, run_adaptive, compared,
        line}``: each side's most trials of a case (1 without repeats), whether the run's were adaptive,
        the decisions compared and :func:`repeats_line`.
    """
    out = []
    for block in blocks:
        family, policy = block["family"], block["policy"]
        if before.group(family, policy) is None or after.group(family, policy) is None:
            continue
        (b_rep, b_k), (a_rep, a_k) = _trials(before, family, policy), _trials(after, family, policy)
        if b_rep == a_rep:
            continue
        adaptive = adaptive_after is not None and a_rep
        entry: dict[str, Any] = {"family": family, "policy": policy, "baseline_trials": b_k,
                                 "run_trials": max(a_k, adaptive_after or 0) if adaptive else a_k,
                                 "run_adaptive": adaptive, "compared": int(block["compared"])}
        out.append({**entry, "line": repeats_line(entry)})
    return out


def repeats_line(mismatch: Mapping[str, Any], before: str = "the baseline", after: str = "this run") -> str:
    """One of :func:`repeats_mismatches` in words: ``family F, policy P: the baseline holds 1 trial per
    case; this run ran up to 29 (adaptive): no decision compared (…how to pair them)``.

    Args:
        mismatch: one entry of :func:`repeats_mismatches`.
        before: what to call the baseline's side.
        after: what to call the run's side.
    """
    b_k, a_k = mismatch["baseline_trials"], mismatch["run_trials"]
    ran = f"up to {a_k} (adaptive)" if mismatch.get("run_adaptive") else str(a_k)
    compared = mismatch["compared"]
    what = "no decision compared" if not compared else f"{compared} decisions compared"
    return shown(f"family {mismatch['family']}, policy {mismatch['policy']}: {before} holds {b_k} "
                 f"trial{'s' if b_k != 1 else ''} per case; {after} ran {ran}: {what} (a decision pairs by record "
                 "id, which names its trial: save the baseline from a run with the same --tooleffect-repeats)",
                 limit=None)


def fingerprint_mismatches(before: Baseline, after: Baseline) -> list[tuple[str, str, str, str]]:
    """The family × policy blocks both sides hold whose label-set fingerprints differ.

    Returns:
        ``(family, policy, fingerprint before, fingerprint after)`` per such block, sorted.
    """
    out = []
    for g in before.groups:
        other = after.group(g.family, g.policy)
        if other is not None and other.label_set_fingerprint != g.label_set_fingerprint:
            out.append((g.family, g.policy, g.label_set_fingerprint, other.label_set_fingerprint))
    return sorted(out)


def _some(ids: Sequence[str], most: int = 3) -> str:
    more = f", and {len(ids) - most} more" if len(ids) > most else ""
    return ", ".join(ids[:most]) + more


def fingerprint_mismatch_line(before: Baseline, after: Baseline, family: str, policy: str) -> str:
    """Why one family × policy's label-set fingerprints differ, in words: labels that changed on
    cases both runs hold, or one run lacking cases the other holds (a run cut part way, or one that
    selected fewer), or both.

    Args:
        before: run A.
        after: run B.
        family: the block's family.
        policy: the block's policy.

    Returns:
        One line, without the command's name, ending with what ``--shared-only`` would compare.
    """
    def labels(run: Baseline) -> dict[str, str]:
        return {d.case_id: d.label_hash for d in run.decisions.values() if (d.family, d.policy) == (family, policy)}

    a, b = labels(before), labels(after)
    shared = sorted(a.keys() & b.keys())
    changed = [c for c in shared if a[c] != b[c]]
    only_a, only_b = sorted(a.keys() - b.keys()), sorted(b.keys() - a.keys())
    parts = []
    if changed:
        parts.append(f"labels changed on {len(changed)} of the {len(shared)} cases both hold ({_some(changed)}): not "
                     "one quantity measured twice")
    if only_a:
        parts.append(f"B lacks {len(only_a)} of A's {len(a)} cases ({_some(only_a)})")
    if only_b:
        parts.append(f"A lacks {len(only_b)} of B's {len(b)} cases ({_some(only_b)})")
    if not changed:
        parts.append(f"the labels of the {len(shared)} cases both hold are the same: a run is short (cut part way, "
                     "or it selected fewer)")
    same = len(shared) - len(changed)
    fingerprints = [g.label_set_fingerprint if g else "none" for g in (before.group(family, policy),
                                                                         after.group(family, policy))]
    return shown(f"family {family}, policy {policy}: label-set fingerprints differ (A {fingerprints[0]}, B "
                 f"{fingerprints[1]}): {'; '.join(parts)}; --shared-only compares the {same} cases both hold with "
                 "unchanged labels", limit=None)


def _counts(block: Mapping[str, Any]) -> str:
    left = {k: v for k, v in block["left_out"].items() if v}
    left_s = (f"left out {sum(left.values())} (" + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in left.items())
              + ")") if left else "none left out"
    errored = block.get("errors_after_pass", 0)
    also = f" (and {errored} that passed in A are errors in B: regressions)" if errored else ""
    regressed = len(block["regressions"]) - errored
    return (f"{block['compared']} compared: {regressed} regressed, {len(block['changed'])} changed, "
            f"{len(block['fixes'])} fixed, known failures {block['known']}, passing {block['passing']}; "
            f"new {block['new']}; {left_s}{also}")


def _mcnemar_line(block: Mapping[str, Any]) -> str:
    m = block["mcnemar"]
    return (f"{block['family']}/{block['policy']}: McNemar exact p = {m['p_value']:.4g} (pass→fail {m['b']}, "
            f"fail→pass {m['c']}, on {block['compared']} paired decisions)")


def summary_lines(comparison: Mapping[str, Any]) -> list[str]:
    """The few terminal lines of a run against its baseline: counts, regressions by record id,
    known failures whose kind changed, fixes, and McNemar's p-value per family × policy.
    """
    t = comparison["totals"]
    lines = [f"baseline {comparison.get('path', '')}: {t['compared']} decisions compared: {t['regressions']} "
             f"regressed, {t['changed']} changed, {t['fixes']} fixed, known failures {t['known']}, new {t['new']}"]
    lines += ["policy names differ: " + m["line"] for m in comparison.get("policy_mismatches", [])]
    lines += ["repeats differ: " + m["line"] for m in comparison.get("repeats_mismatches", [])]
    left = {k: v for k, v in t["left_out"].items() if v}
    if left:
        lines.append("left out: " + "; ".join(f"{v} {LEFT_OUT[k]}" for k, v in left.items()))
    for block in comparison["blocks"]:
        for f in block["regressions"]:
            lines.append(f"regression {f['id']}: {f['before']} → {f['after']}")
        for f in block["changed"]:
            lines.append(f"changed {f['id']}: {f['before']} → {f['after']} (failed in the baseline too, another "
                         "kind now)")
        for f in block["fixes"]:
            lines.append(f"fixed {f['id']}: {f['before']} → {f['after']}")
    for block in comparison["blocks"]:
        if block["compared"]:
            lines.append(_mcnemar_line(block))
    return [shown(line, limit=None) for line in lines]  # ids and kinds come from files: no control character raw


def render_comparison(comparison: Mapping[str, Any], names: tuple[str, str] = ("A", "B")) -> str:
    """The comparison as text: per family × policy the class table at each level, the flips both
    ways, the counts and McNemar's p-value (``tooleffect compare``).

    Args:
        comparison: what :func:`compare` returns.
        names: what to call the two sides.
    """
    a, b = names
    out = ["policy names differ: " + mismatch_line(m, a, b) for m in comparison.get("policy_mismatches", [])]
    out += ["repeats differ: " + repeats_line(m, a, b) for m in comparison.get("repeats_mismatches", [])]
    for block in comparison["blocks"]:
        fp = block["label_set_fingerprint"]
        same = "same label set" if block["same_label_set"] else "label sets differ"
        out.append(f"{block['family']} / {block['policy']}  label set {fp['before'] or '–'} ({a}) vs "
                   f"{fp['after'] or '–'} ({b}): {same}")
        out.append("  " + _counts(block))
        levels = [lv for lv in LEVELS if lv in block["classes"]["all"]]
        head = "".join(f"{lv + f' {a} → {b}':>24}" for lv in levels)
        out.append(f"  {'class':<9}{'n':>5}{head}")
        for cls, row in block["classes"].items():
            if not row["n"] and cls != "all":
                continue
            cells = "".join(f"{row[lv]['before']['display'] + ' → ' + row[lv]['after']['display'] + ' %':>24}"
                            if lv in row else f"{'–':>24}" for lv in levels)
            out.append(f"  {cls:<9}{row['n']:>5}{cells}")
        for what, flips in (("regressions", block["regressions"]), ("changed", block["changed"]),
                            ("fixes", block["fixes"])):
            if flips:
                out.append(f"  {what} ({len(flips)}): " + ", ".join(f"{f['id']} ({f['before']} → {f['after']})"
                                                                   for f in flips))
        if block["label_changed_ids"]:
            out.append("  label changed, left out: " + ", ".join(block["label_changed_ids"]))
        out.append("  " + _mcnemar_line(block))
    return "\n".join(shown(line, limit=None) for line in out) + "\n"  # ids and kinds come from files
