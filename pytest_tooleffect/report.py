"""Records in, the per-class report out (JSON and a terminal table).

One block per family × policy: families are separate populations and are never pooled.

Arithmetic (DESIGN.md "Report arithmetic"): for classes ``i`` with ``n_i`` rows and ``c_i``
correct, ``r_i = c_i / n_i``; micro-average ``Σc_i / Σn_i = Σ w_i r_i`` with ``w_i = n_i / N``;
macro-average ``Σ r_i / k`` over the ``k`` classes that have rows.  Percentages display with
round-half-up on the exact fraction (71.25 → 71.3).  Class intervals are Wilson score
intervals at 95 % (Wilson, JASA 22(158), 1927), computed by ``scipy.stats.binomtest``.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from typing import Any

__all__ = [
    "CLASSES",
    "REPORT_VERSION",
    "fingerprint",
    "percent",
    "rate_table",
    "render_terminal",
    "summarise",
    "wilson_interval",
]

REPORT_VERSION = 1
CLASSES = ("single", "several", "no_tool")
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
    "errors": "provider errors are excluded from every rate and listed apart",
}


def percent(value: Fraction | float | None, digits: int = 1) -> str:
    """Format a proportion as a percentage, rounding half up (0.7125 → ``"71.3"``).

    Python's ``round`` and ``format`` round half to even on the binary float and print 71.2;
    this works on the exact fraction.  ``None`` (no rows) formats as ``"–"``.
    """
    if value is None:
        return "–"
    frac = value if isinstance(value, Fraction) else Fraction(value)
    d = Decimal(frac.numerator) * 100 / Decimal(frac.denominator)
    return str(d.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def wilson_interval(correct: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval for ``correct`` successes in ``n`` trials (``None`` if ``n == 0``)."""
    if n == 0:
        return None
    from scipy.stats import binomtest

    ci = binomtest(correct, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def rate_table(counts: Mapping[str, tuple[int, int]]) -> dict[str, Any]:
    """Per-class rates with micro- and macro-average from ``{class: (correct, n)}``.

    Returns:
        ``{"classes": {name: {n, correct, rate, weight}}, "micro": Fraction, "macro": Fraction,
        "N": int}``; rates are :class:`~fractions.Fraction` (``None`` for an empty class).
        Classes with no rows are left out of the macro-average's ``k``.

    """
    total_n = sum(n for _, n in counts.values())
    total_c = sum(c for c, _ in counts.values())
    classes: dict[str, dict[str, Any]] = {}
    rates = []
    for name, (c, n) in counts.items():
        r = Fraction(c, n) if n else None
        classes[name] = {"n": n, "correct": c, "rate": r, "weight": Fraction(n, total_n) if total_n else None}
        if r is not None:
            rates.append(r)
    micro = Fraction(total_c, total_n) if total_n else None
    macro = sum(rates, Fraction(0)) / len(rates) if rates else None
    return {"classes": classes, "micro": micro, "macro": macro, "N": total_n}


def fingerprint(labels: Iterable[tuple[str, str]]) -> str:
    """Label-set fingerprint: SHA-256 over sorted ``(case id, label hash)`` pairs, 16 hex digits."""
    h = hashlib.sha256()
    for cid, lh in sorted(labels):
        h.update(f"{cid}\t{lh}\n".encode())
    return h.hexdigest()[:16]


def _pct(r: Fraction | None) -> float | None:
    return None if r is None else float(Decimal(r.numerator) * 100 / Decimal(r.denominator))


def _level(records: Sequence[Mapping[str, Any]], key: str) -> dict[str, tuple[int, int]]:
    out: dict[str, tuple[int, int]] = {}
    for cls in CLASSES:
        rows = [r for r in records if r["class"] == cls]
        out[cls] = (sum(1 for r in rows if _correct(r, key)), len(rows))
    return out


def _correct(r: Mapping[str, Any], key: str) -> bool:
    v = r["verdict"]
    return bool(v["tool_ok"]) if key == "name" else bool(v["tool_ok"] and v["args_ok"])


def _jsonable_table(table: Mapping[str, Any], digits: int = 1) -> dict[str, Any]:
    classes = {}
    for name, row in table["classes"].items():
        ci = wilson_interval(row["correct"], row["n"])
        classes[name] = {
            "n": row["n"],
            "correct": row["correct"],
            "rate_pct": _pct(row["rate"]),
            "rate_display": percent(row["rate"], digits),
            "weight": None if row["weight"] is None else float(row["weight"]),
            "wilson95_pct": None if ci is None else [round(ci[0] * 100, 4), round(ci[1] * 100, 4)],
        }
    return {
        "classes": classes,
        "micro_pct": _pct(table["micro"]),
        "micro_display": percent(table["micro"], digits),
        "macro_pct": _pct(table["macro"]),
        "macro_display": percent(table["macro"], digits),
        "N": table["N"],
    }


def _no_tool_failure(r: Mapping[str, Any]) -> str | None:
    return r.get("no_tool_failure")


def _repeats(recs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """pass^k over repeated trials, and the share of cases whose verdict flips between trials.

    pass^k (Yao et al., "τ-bench", 2024) is the chance that all of k trials of a case pass,
    estimated without bias from n ≥ k trials with c passes as C(c, k) / C(n, k), averaged over cases.
    """
    from math import comb

    trials: dict[str, list[bool]] = defaultdict(list)
    for r in recs:
        trials[r["case_id"]].append(r["verdict"]["kind"] in ("ok", "ok_no_tool"))
    k_max = max((len(v) for v in trials.values()), default=0)
    if k_max < 2:
        return None
    pass_hat = {}
    for k in range(1, k_max + 1):
        values = [comb(sum(v), k) / comb(len(v), k) for v in trials.values() if len(v) >= k]
        pass_hat[str(k)] = sum(values) / len(values)
    flips = sum(1 for v in trials.values() if len(set(v)) > 1)
    return {"trials": k_max, "cases": len(trials), "pass_hat_k": pass_hat, "flip_share": flips / len(trials)}


def _post_stratified(recs: Sequence[Mapping[str, Any]], meta: Mapping[str, Any]) -> dict[str, Any] | None:
    """Estimate the production rate from per-bucket rates, weighted by production shares.

    ``estimate = Σ_b P_b · r_b`` over the buckets with scored rows, with ``P_b`` the family's
    ``production`` shares when given, else its ``population`` counts normalised (the population
    the sample was drawn from), renormalised over the buckets present.  A standard
    post-stratification estimator (e.g. Lohr, *Sampling: Design and Analysis*, §4.4); it is an
    estimate, labelled so, and only as good as the weights.
    """
    weights = meta.get("production") or meta.get("population")
    source = "production" if meta.get("production") else "population"
    if not weights:
        return None
    present = {r["bucket"] for r in recs}
    w = {b: float(v) for b, v in weights.items() if b in present and float(v) > 0}
    total = sum(w.values())
    if not total:
        return None
    out: dict[str, Any] = {"weights_from": source, "weights": {b: v / total for b, v in w.items()}}
    for level in ("name", "full"):
        est = Fraction(0)
        for b, wb in w.items():
            rows = [r for r in recs if r["bucket"] == b]
            est += Fraction(wb / total) * Fraction(sum(1 for r in rows if _correct(r, level)), len(rows))
        key = "name" if level == "name" else "name_args"
        out[f"{key}_pct"] = _pct(est)
        out[f"{key}_display"] = percent(est)
    return out


def _bucket_key(bucket: str, quota: Mapping[str, int] | None) -> tuple[int, int, str]:
    """Order buckets as the quota lists them, else first / middle / last, then q1, q2, … by number."""
    order = list(quota or {})
    if bucket in order:
        return (0, order.index(bucket), "")
    if bucket in ("first", "middle", "last"):
        return (1, ("first", "middle", "last").index(bucket), "")
    import re

    m = re.fullmatch(r"q(\d+)", bucket)
    return (2, int(m.group(1)), "") if m else (3, 0, bucket)


def _block(family: str, policy: str, recs: Sequence[Mapping[str, Any]], errors: Sequence[Mapping[str, Any]],
           family_meta: Mapping[str, Any]) -> dict[str, Any]:
    name_t = rate_table(_level(recs, "name"))
    full_t = rate_table(_level(recs, "full"))
    name_j, full_j = _jsonable_table(name_t), _jsonable_table(full_t)
    classes = {}
    for cls in CLASSES:
        classes[cls] = {
            "n": name_j["classes"][cls]["n"],
            "weight": name_j["classes"][cls]["weight"],
            "name": {k: v for k, v in name_j["classes"][cls].items() if k not in ("n", "weight")},
            "name_args": {k: v for k, v in full_j["classes"][cls].items() if k not in ("n", "weight")},
        }

    def gap(a: Fraction | None, b: Fraction | None) -> float | None:
        return None if a is None or b is None else _pct(a - b)

    buckets: dict[str, dict[str, Any]] = {}
    for b in sorted({r["bucket"] for r in recs}, key=lambda x: _bucket_key(x, family_meta.get("quota"))):
        rows = [r for r in recs if r["bucket"] == b]
        nc = sum(1 for r in rows if _correct(r, "name"))
        fc = sum(1 for r in rows if _correct(r, "full"))
        buckets[b] = {
            "n": len(rows),
            "classes": dict(Counter(r["class"] for r in rows)),
            "name_pct": _pct(Fraction(nc, len(rows))), "name_display": percent(Fraction(nc, len(rows))),
            "name_args_pct": _pct(Fraction(fc, len(rows))), "name_args_display": percent(Fraction(fc, len(rows))),
        }
    estimate = _post_stratified(recs, family_meta)
    repeats = _repeats(recs)
    kinds = Counter(r["verdict"]["kind"] for r in recs)
    arg_fail: Counter[str] = Counter()
    unruled: Counter[str] = Counter()
    for r in recs:
        v = r["verdict"]
        for path in v.get("unruled") or []:
            unruled[path] += 1
        if v["kind"] == "right_tool_wrong_args":
            for f in v["fields"]:
                if not f["ok"]:
                    import re

                    arg_fail[re.sub(r"\[\d+\]", "", f["path"])] += 1
    nt_fail = Counter(_no_tool_failure(r) for r in recs if r["class"] == "no_tool" and not r["verdict"]["tool_ok"])
    cost = _cost(recs)
    fp = fingerprint((r["case_id"], r["label_hash"]) for r in [*recs, *errors])
    return {
        "family": family,
        "policy": policy,
        "n_scored": len(recs),
        "n_errors": len(errors),
        "n_xfail": sum(1 for r in recs if r.get("xfail")),
        "classes": classes,
        "micro": {"name_pct": name_j["micro_pct"], "name_display": name_j["micro_display"],
                  "name_args_pct": full_j["micro_pct"], "name_args_display": full_j["micro_display"],
                  "gap_pct": gap(name_t["micro"], full_t["micro"])},
        "macro": {"name_pct": name_j["macro_pct"], "name_display": name_j["macro_display"],
                  "name_args_pct": full_j["macro_pct"], "name_args_display": full_j["macro_display"],
                  "gap_pct": gap(name_t["macro"], full_t["macro"])},
        "buckets": buckets,
        "quota": family_meta.get("quota"),
        "population": family_meta.get("population"),
        "kinds": {k: kinds.get(k, 0) for k in _KINDS},
        "argument_failures": dict(arg_fail.most_common()),
        "no_tool_failures": {k: nt_fail.get(k, 0) for k in ("redundant_read", "unwanted_write", "forbidden", "other")},
        "unruled_fields": dict(unruled.most_common()),
        "approximate": sum(1 for r in recs if r["verdict"].get("approximate")),
        "cost": cost,
        "errors": [{"id": e["id"], "error": e.get("error")} for e in errors],
        "label_set_fingerprint": fp,
        "post_stratified_estimate": estimate,
        "repeats": repeats,
        "effects": _effects(recs),
    }


def _effects(recs: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Effect-level rates (rows run in a sandbox), recovery from injected faults, single-step vs
    self-steered rates on the same cases, and the sandbox isolation in force.
    """
    rows = [r for r in recs if r.get("effect") is not None]
    if not rows:
        return None
    counts = {cls: (sum(1 for r in rows if r["class"] == cls and r["effect"]["passed"]),
                    sum(1 for r in rows if r["class"] == cls)) for cls in CLASSES}
    table = _jsonable_table(rate_table(counts))
    kinds = Counter(r["effect"]["kind"] for r in rows)
    recovery = Counter(r.get("recovery") for r in rows if r.get("recovery") is not None)
    observed = sum(v for k, v in recovery.items() if k != "not_observed")
    recovered = sum(recovery.get(k, 0) for k in ("retried", "other_path", "told_user"))
    # rollouts happen only for a live policy: a replayed decision is never self-steered
    steered = [r for r in rows if (r.get("rollout") or {}).get("limit", 1) > 1
               and r["rollout"].get("stopped") != "replay"]
    rollout = None
    if steered:
        single = sum(1 for r in steered if _correct(r, "full"))
        end = sum(1 for r in steered if r["effect"]["passed"])
        steps = [r["rollout"]["steps"] for r in steered]
        rollout = {
            "n": len(steered), "limit": max(r["rollout"]["limit"] for r in steered),
            "single_step_pct": _pct(Fraction(single, len(steered))),
            "single_step_display": percent(Fraction(single, len(steered))),
            "self_steered_pct": _pct(Fraction(end, len(steered))),
            "self_steered_display": percent(Fraction(end, len(steered))),
            "mean_steps": round(sum(steps) / len(steps), 2),
            "stopped": dict(Counter(r["rollout"]["stopped"] for r in steered)),
        }
    in_force = sorted({x for r in rows for x in (r.get("sandbox") or {}).get("restrictions", [])})
    missing = sorted({x for r in rows for x in (r.get("sandbox") or {}).get("restrictions_missing", [])})
    return {
        "n": len(rows),
        "classes": {cls: {"n": table["classes"][cls]["n"], **{k: v for k, v in table["classes"][cls].items()
                                                              if k not in ("n", "weight")}} for cls in CLASSES},
        "micro_pct": table["micro_pct"], "micro_display": table["micro_display"],
        "macro_pct": table["macro_pct"], "macro_display": table["macro_display"],
        "kinds": {k: kinds.get(k, 0) for k in ("ok", "forbidden_effect", "unexpected_change", "effect_missing")},
        "recovery": {
            "observed": observed, "recovered": recovered,
            "rate_pct": _pct(Fraction(recovered, observed)) if observed else None,
            "rate_display": percent(Fraction(recovered, observed)) if observed else "–",
            "by_kind": {k: recovery.get(k, 0) for k in ("retried", "other_path", "told_user", "none", "not_observed")},
        },
        "rollout": rollout,
        "sandbox": {"providers": sorted({(r.get("sandbox") or {}).get("provider", "?") for r in rows}),
                    "restrictions": in_force, "restrictions_missing": missing},
    }


_KINDS = ("ok", "ok_no_tool", "wrong_tool", "tool_when_none_needed", "none_when_tool_needed", "forbidden",
          "right_tool_wrong_args", "malformed_call")


def _cost(recs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    def total(key: str) -> tuple[float | None, int]:
        vals = [r.get("cost", {}).get(key) for r in recs]
        known = [v for v in vals if v is not None]
        return (sum(known) if known else None), len(vals) - len(known)

    out: dict[str, Any] = {}
    for key in ("input_tokens", "output_tokens", "cost_usd"):
        tot, unknown = total(key)
        out[key] = tot
        out[f"{key}_unknown"] = unknown
    lat = sorted(r["cost"]["latency_ms"] for r in recs if r.get("cost", {}).get("latency_ms") is not None)
    if lat:
        import numpy as np

        out["latency_ms_p50"] = float(np.percentile(lat, 50))
        out["latency_ms_p95"] = float(np.percentile(lat, 95))
    else:
        out["latency_ms_p50"] = out["latency_ms_p95"] = None
    nt = [r for r in recs if r["class"] == "no_tool"]
    out["no_tool_input_tokens"] = sum(r["cost"].get("input_tokens") or 0 for r in nt) if any(
        r.get("cost", {}).get("input_tokens") is not None for r in nt) else None

    def spend(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        tokens = [r["cost"].get("input_tokens") for r in rows]
        money = [r["cost"].get("cost_usd") for r in rows]
        return {"n": len(rows),
                "input_tokens": sum(t for t in tokens if t is not None) if any(t is not None for t in tokens) else None,
                "cost_usd": sum(m for m in money if m is not None) if any(m is not None for m in money) else None,
                "cost_usd_unknown": sum(1 for m in money if m is None)}

    out["by_class"] = {c: spend([r for r in recs if r["class"] == c]) for c in CLASSES}
    out["by_kind"] = {k: spend([r for r in recs if r["verdict"]["kind"] == k]) for k in _KINDS
                      if any(r["verdict"]["kind"] == k for r in recs)}
    # the waste the no-tool class stands for: what decisions whose right answer was no tool spent
    out["no_tool_spend"] = spend(nt)
    priced = [r for r in recs if r["cost"].get("cost_usd") is not None or r["cost"].get("input_tokens") is not None]
    top = sorted(priced, key=lambda r: (r["cost"].get("cost_usd") or 0, r["cost"].get("input_tokens") or 0),
                 reverse=True)[:10]
    out["most_expensive"] = [
        {"id": r["id"], "kind": r["verdict"]["kind"], "input_tokens": r["cost"].get("input_tokens"),
         "output_tokens": r["cost"].get("output_tokens"), "cost_usd": r["cost"].get("cost_usd")} for r in top]
    out["from_cache"] = sum(1 for r in recs if r.get("cached"))
    return out


def summarise(records: Iterable[Mapping[str, Any]], families: Mapping[str, Mapping[str, Any]] | None = None,
              status: str = "complete") -> dict[str, Any]:
    """Build the report from records.

    Args:
        records: record dicts (see :mod:`pytest_tooleffect.records`); ``outcome`` ``"scored"`` or
            ``"error"``.
        families: per-family metadata (``quota``, ``population``) by family name.
        status: ``complete`` or ``interrupted``.

    Returns:
        The JSON-able report: ``{"version", "status", "conventions", "blocks": [...]}``, one
        block per family × policy, sorted.

    """
    families = families or {}
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    errs: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        key = (r["family"], r["policy"])
        (groups if r["outcome"] == "scored" else errs)[key].append(r)
        groups.setdefault(key, groups.get(key, []))
    blocks = [_block(f, p, groups[(f, p)], errs.get((f, p), []), families.get(f, {})) for f, p in sorted(groups)]
    comparisons = []
    for fam in sorted({f for f, _ in groups}):
        policies = sorted(p for f, p in groups if f == fam)
        if len(policies) > 1:
            comparisons.append(_comparison(fam, {p: groups[(fam, p)] for p in policies}))
    return {"version": REPORT_VERSION, "status": status, "conventions": CONVENTIONS, "blocks": blocks,
            "comparisons": comparisons}


def _headline(recs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    name_t, full_t = rate_table(_level(recs, "name")), rate_table(_level(recs, "full"))
    return {
        "n": len(recs),
        "classes_n": {c: name_t["classes"][c]["n"] for c in CLASSES},
        "name_micro_display": percent(name_t["micro"]), "name_macro_display": percent(name_t["macro"]),
        "name_args_micro_display": percent(full_t["micro"]), "name_args_macro_display": percent(full_t["macro"]),
        "classes_name_display": {c: percent(name_t["classes"][c]["rate"]) for c in CLASSES},
    }


def _comparison(family: str, by_policy: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """Policies side by side on one family: on all the cases each scored, and on the shared cases."""
    shared = set.intersection(*({r["case_id"] for r in recs} for recs in by_policy.values()))
    return {
        "family": family,
        "policies": list(by_policy),
        "shared_n": len(shared),
        "all": {p: _headline(recs) for p, recs in by_policy.items()},
        "shared": {p: _headline([r for r in recs if r["case_id"] in shared]) for p, recs in by_policy.items()},
    }


def render_terminal(report: Mapping[str, Any], width: int = 110) -> str:
    """Render the report as text tables (rich), one block per family × policy."""
    from io import StringIO

    from rich.console import Console
    from rich.table import Table

    buf = StringIO()
    console = Console(file=buf, width=width, force_terminal=False, color_system=None, highlight=False)
    for b in report["blocks"]:
        console.print(f"[bold]tooleffect: family {b['family']} · policy {b['policy']}[/bold]  "
                      f"n={b['n_scored']} scored, {b['n_errors']} errors, {b['n_xfail']} xfail · "
                      f"label set {b['label_set_fingerprint']}")
        t = Table(show_edge=False, pad_edge=False)
        eff = b.get("effects")
        cols = ["class", "n", "w", "name ok", "name %", "95% CI", "name+args ok", "name+args %", "95% CI "]
        if eff:
            cols += ["effect ok", "effect %"]
        for col in cols:
            t.add_column(col, justify="left" if col == "class" else "right", no_wrap=col == "class",
                         min_width=13 if col == "class" else None)
        for cls in CLASSES:
            c = b["classes"][cls]
            nm, fa = c["name"], c["name_args"]
            row = [cls, str(c["n"]), "–" if c["weight"] is None else f"{c['weight']:.3f}",
                   f"{nm['correct']}/{c['n']}", nm["rate_display"], _ci(nm["wilson95_pct"]),
                   f"{fa['correct']}/{c['n']}", fa["rate_display"], _ci(fa["wilson95_pct"])]
            if eff:
                e = eff["classes"][cls]
                row += [f"{e['correct']}/{e['n']}", e["rate_display"]]
            t.add_row(*row)
        t.add_section()
        for avg in ("micro", "macro"):
            a = b[avg]
            row = [f"{avg}-average", "", "", "", a["name_display"], "", "", a["name_args_display"],
                   f"gap {percent(_frac(a['gap_pct']))}"]
            if eff:
                row += ["", eff[f"{avg}_display"]]
            t.add_row(*row)
        console.print(t)
        if eff:
            _render_effects(console, eff)
        if b["buckets"]:
            console.print("by position bucket")
            bt = Table(show_edge=False, pad_edge=False)
            for col in ("bucket", "n", "quota", "population", "classes", "name %", "name+args %"):
                bt.add_column(col, justify="left" if col in ("bucket", "classes") else "right")
            for name, row in b["buckets"].items():
                q = (b.get("quota") or {}).get(name)
                pop = (b.get("population") or {}).get(name)
                classes = " ".join(f"{k}:{v}" for k, v in sorted(row["classes"].items()))
                bt.add_row(name, str(row["n"]), "–" if q is None else str(q), "–" if pop is None else str(pop),
                           classes, row["name_display"], row["name_args_display"])
            console.print(bt)
        est = b.get("post_stratified_estimate")
        if est:
            console.print(f"post-stratified estimate of the production rate (an estimate; bucket weights from "
                          f"the family's {est['weights_from']}): name {est['name_display']} %, "
                          f"name+args {est['name_args_display']} %")
        rep = b.get("repeats")
        if rep:
            ks = ", ".join(f"pass^{k} {100 * v:.1f} %" for k, v in rep["pass_hat_k"].items())
            console.print(f"repeats: {rep['trials']} trials of {rep['cases']} cases: {ks}; verdict flips between "
                          f"trials on {100 * rep['flip_share']:.1f} % of cases")
        kinds = ", ".join(f"{k} {v}" for k, v in b["kinds"].items() if v)
        console.print(f"kinds: {kinds or 'none'}")
        nt = b["no_tool_failures"]
        console.print("no_tool failures: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in nt.items()))
        if b["argument_failures"]:
            af = ", ".join(f"{k} {v}" for k, v in list(b["argument_failures"].items())[:8])
            console.print(f"argument failures by tool.field: {af}")
        if b["unruled_fields"]:
            console.print(f"unruled fields (compared raw): {', '.join(list(b['unruled_fields'])[:8])}")
        cost = b["cost"]
        if cost["input_tokens"] is None and cost["cost_usd"] is None:
            console.print("cost: not recorded" + (" (replayed decisions)" if b["policy"] == "replay" else ""))
        else:
            money = f"${cost['cost_usd']:.6f}" if cost["cost_usd"] is not None else "unknown"
            if cost["cost_usd"] is not None and cost["cost_usd_unknown"]:
                money += f" (+{cost['cost_usd_unknown']} decisions unpriced)"
            console.print(f"cost: {cost['input_tokens']} in / {cost['output_tokens']} out tokens, {money}, "
                          f"latency p50 {cost['latency_ms_p50']:.0f} ms p95 {cost['latency_ms_p95']:.0f} ms; "
                          f"input tokens on no-tool rows {cost['no_tool_input_tokens']}")
        if cost.get("from_cache"):
            console.print(f"{cost['from_cache']} decisions came from the model cache (their cost is what they "
                          "cost when first made)")
        nts = cost.get("no_tool_spend") or {}
        if nts.get("input_tokens") is not None:
            money = "unknown" if nts["cost_usd"] is None else f"${nts['cost_usd']:.6f}"
            console.print(f"spent on decisions whose right answer included no tool: {nts['input_tokens']} input "
                          f"tokens, {money}")
        top = cost.get("most_expensive") or []
        if top and top[0].get("input_tokens") is not None:
            console.print("most expensive decisions: " + "; ".join(
                f"{t['id']} ({t['kind']}, {t['input_tokens']} in)" for t in top[:5]))
        for e in b["errors"][:10]:
            console.print(f"error (excluded from rates): {e['id']}: {e['error']}")
        if len(b["errors"]) > 10:
            console.print(f"… and {len(b['errors']) - 10} more errors (all in the JSON report and the record log)")
        console.print("")
    for comp in report.get("comparisons", []):
        _render_comparison(console, comp)
    conv = report.get("conventions", {})
    console.print("conventions: " + " | ".join(f"{k}: {v}" for k, v in conv.items()))
    return buf.getvalue()


def _render_effects(console: Any, eff: Mapping[str, Any]) -> None:
    kinds = ", ".join(f"{k} {v}" for k, v in eff["kinds"].items() if v)
    console.print(f"effects ({eff['n']} decisions run in a sandbox): {kinds}")
    rec = eff["recovery"]
    if rec["observed"] or rec["by_kind"]["not_observed"]:
        by = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in rec["by_kind"].items() if v)
        console.print(f"recovery from injected faults: {rec['rate_display']} % ({rec['recovered']}/{rec['observed']} "
                      f"observed; {by})")
    ro = eff.get("rollout")
    if ro:
        console.print(f"rollouts (up to {ro['limit']} steps, {ro['n']} cases): single-step (teacher-forced, upper "
                      f"bound; first decision, name + args) {ro['single_step_display']} % · self-steered (end state "
                      f"meets the effects) {ro['self_steered_display']} % · mean {ro['mean_steps']} steps")
    sb = eff["sandbox"]
    missing = f"; not in force: {', '.join(sb['restrictions_missing'])}" if sb["restrictions_missing"] else ""
    console.print(f"sandbox {'/'.join(sb['providers'])}: {', '.join(sb['restrictions']) or 'no isolation'}"
                  f"{missing}")


def _render_comparison(console: Any, comp: Mapping[str, Any]) -> None:
    from rich.table import Table

    for view, title in (("all", "every case each policy scored"),
                        ("shared", f"the {comp['shared_n']} cases every policy scored")):
        console.print(f"policies side by side · family {comp['family']} · {title}")
        t = Table(show_edge=False, pad_edge=False)
        t.add_column("")
        for p in comp["policies"]:
            t.add_column(p, justify="right")
        rows = comp[view]
        t.add_row("n", *(str(rows[p]["n"]) for p in comp["policies"]))
        for cls in CLASSES:
            t.add_row(f"{cls} name %", *(f"{rows[p]['classes_name_display'][cls]} (n={rows[p]['classes_n'][cls]})"
                                          for p in comp["policies"]))
        for key, label in (("name_micro_display", "name micro"), ("name_macro_display", "name macro"),
                           ("name_args_micro_display", "name+args micro"),
                           ("name_args_macro_display", "name+args macro")):
            t.add_row(label, *(rows[p][key] for p in comp["policies"]))
        console.print(t)
    console.print("")


def _frac(p: float | None) -> Fraction | None:
    return None if p is None else Fraction(p) / 100


def _ci(ci: Sequence[float] | None) -> str:
    if ci is None:
        return "–"
    return f"{percent(Fraction(ci[0]) / 100)}–{percent(Fraction(ci[1]) / 100)}"


def dumps(report: Mapping[str, Any]) -> str:
    """The report as indented JSON."""
    return json.dumps(report, indent=2, sort_keys=False, ensure_ascii=False)
