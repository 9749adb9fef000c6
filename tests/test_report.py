"""Report arithmetic: the seed's table from DESIGN.md, round-half-up, Wilson intervals, blocks."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import pytest

from pytest_tooleffect.report import percent, rate_table, render_terminal, summarise, wilson_interval
from tests.verdicts import no_tool_bucket, verdict

SEED = {"single": (179, 187), "several": (21, 22), "no_tool": (13, 31)}


def test_seed_arithmetic() -> None:
    t = rate_table(SEED)
    assert t["N"] == 240
    assert t["micro"] == Fraction(213, 240)
    assert percent(t["micro"]) == "88.8"  # 88.75 rounds half up
    assert [percent(t["classes"][c]["rate"]) for c in ("single", "several", "no_tool")] == ["95.7", "95.5", "41.9"]
    assert percent(t["macro"]) == "77.7"
    # micro = Σ w_i r_i with w_i = n_i / N
    assert sum(t["classes"][c]["weight"] * t["classes"][c]["rate"] for c in SEED) == t["micro"]
    assert sum(t["classes"][c]["weight"] for c in SEED) == 1
    # a class's most possible effect on micro is its weight (w_j · d with d ≤ 1)
    moved = rate_table({**SEED, "no_tool": (31, 31)})
    assert moved["micro"] - t["micro"] == t["classes"]["no_tool"]["weight"] * (1 - t["classes"]["no_tool"]["rate"])


@pytest.mark.parametrize(("value", "shown"), [
    (Fraction(7125, 10000), "71.3"), (0.7125, "71.3"), (Fraction(71, 1000) * 10, "71.0"),
    (Fraction(1, 8), "12.5"), (Fraction(2, 3), "66.7"), (Fraction(0), "0.0"), (Fraction(1), "100.0"), (None, "–"),
])
def test_round_half_up(value: Any, shown: str) -> None:
    assert percent(value) == shown
    if value == 0.7125:
        assert f"{100 * value:.1f}" == "71.2"  # why the project does not use format()


def test_wilson_interval_matches_the_closed_form() -> None:
    c, n, z = 13, 31, 1.959963984540054
    p = c / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    lo, hi = wilson_interval(c, n)  # type: ignore[misc]
    assert lo == pytest.approx(centre - half, abs=1e-9)
    assert hi == pytest.approx(centre + half, abs=1e-9)
    assert wilson_interval(0, 0) is None


@pytest.mark.parametrize("n", [1, 2, 7, 31, 187, 50_000])
def test_wilson_interval_agrees_with_scipy(n: int) -> None:
    from scipy.stats import binomtest

    for c in sorted({0, 1, n // 3, n - 1, n}):
        for confidence in (0.9, 0.95, 0.99):
            ci = binomtest(c, n).proportion_ci(confidence_level=confidence, method="wilson")
            assert wilson_interval(c, n, confidence) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_report_building_does_not_import_scipy_stats() -> None:
    """SciPy's statistics take seconds to import: the end of every run would pay them."""
    import subprocess
    import sys

    code = ("import sys; from pytest_tooleffect.report import summarise; summarise([]); "
            "from pytest_tooleffect.report.arithmetic import wilson_interval; wilson_interval(3, 7); "
            "print('scipy.stats' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _rec(family: str, cls: str, name_ok: bool, name_args_ok: bool, kind: str, bucket: str = "last",
         policy: str = "replay", outcome: str = "scored", **extra: Any) -> dict[str, Any]:
    v = None if outcome == "error" else verdict(kind, name_ok=name_ok, fields=extra.get("fields", []))
    assert v is None or (v["name_ok"], v["name_args_ok"]) == (name_ok, name_args_ok), "the levels follow the kind"
    return {"family": family, "policy": policy, "case_id": f"{cls}-{kind}-{bucket}-{extra.get('n', 0)}",
            "label_hash": "h", "class": cls, "bucket": bucket, "step": 0, "run_length": 1, "source": {"kind": "authored"}, "outcome": outcome, "xfail": False,
            "verdict": v,
            "no_tool_failure": extra.get("ntf", no_tool_bucket(cls, v)), "cost": {"input_tokens": None, "output_tokens": None,
                                                         "latency_ms": None, "cost_usd": None},
            "id": f"{family}/{cls}[{policy}]", "error": extra.get("error")}


def test_families_are_never_pooled_and_errors_are_excluded() -> None:
    recs = [
        _rec("a", "single", True, True, "ok", n=1),
        _rec("a", "no_tool", False, False, "tool_when_none_needed", ntf="redundant_read", n=2),
        _rec("a", "no_tool", False, False, "forbidden", ntf="forbidden", n=3),
        _rec("a", "single", True, False, "right_tool_wrong_args", n=4,
             fields=[{"path": "f.start", "ok": False}, {"path": "f.items[0].id", "ok": False}]),
        _rec("a", "single", False, False, "", outcome="error", error={"type": "Timeout", "message": "t"}, n=5),
        _rec("b", "several", True, True, "ok", n=6),
    ]
    rep = summarise(recs, {"a": {"quota": {"last": 4}, "population": {"last": 40}}})
    assert rep.version == 1 and rep.status == "incomplete"  # an error record: not every item was scored
    a, b = rep.to_json()["blocks"]
    assert (a["family"], b["family"]) == ("a", "b")
    assert a["n_scored"] == 4 and a["n_errors"] == 1
    assert a["classes"]["single"]["name"]["correct"] == 2 and a["classes"]["single"]["name_args"]["correct"] == 1
    assert a["micro"]["name_display"] == "50.0" and a["micro"]["name_args_display"] == "25.0"
    assert a["macro"]["name_display"] == "50.0"  # (2/2 + 0/2) / 2: classes with no rows are left out
    assert a["no_tool_failures"] == {"redundant_read": 1, "unwanted_write": 0, "forbidden": 1, "should_have_asked": 0,
                                    "tool_not_offered": 0, "wrong_reply": 0, "phantom_action": 0, "other": 0}
    assert a["argument_failures"] == {"f.start": 1, "f.items.id": 1}
    assert a["errors"] == [{"id": "a/single[replay]", "error": {"type": "Timeout", "message": "t"}}]
    assert a["quota"] == {"last": 4} and a["buckets"]["last"]["n"] == 4
    assert b["classes"]["several"]["n"] == 1 and b["micro"]["name_display"] == "100.0"
    assert a["label_set_fingerprint"] != b["label_set_fingerprint"]


def test_post_stratified_estimate() -> None:
    recs = [_rec("a", "single", True, True, "ok", bucket="first", n=1),
            _rec("a", "single", False, False, "wrong_tool", bucket="first", n=2),
            _rec("a", "no_tool", True, True, "ok_no_tool", bucket="last", n=3),
            _rec("a", "no_tool", True, False, "right_tool_wrong_args", bucket="last", n=4)]
    (block,) = summarise(recs, {"a": {"quota": {"first": 2, "last": 2}, "population": {"first": 30, "last": 10}}}
                         ).to_json()["blocks"]
    est = block["post_stratified_estimate"]
    assert est["weights_from"] == "population" and est["weights"] == {"first": 0.75, "last": 0.25}
    assert est["name_display"] == "62.5"  # 0.75 * 1/2 + 0.25 * 2/2
    assert est["name_args_display"] == "50.0"  # 0.75 * 1/2 + 0.25 * 1/2
    (block,) = summarise(recs, {"a": {"population": {"first": 30, "last": 10},
                                      "production": {"first": 0.5, "last": 0.5}}}).to_json()["blocks"]
    assert block["post_stratified_estimate"]["weights_from"] == "production"
    assert block["post_stratified_estimate"]["name_display"] == "75.0"
    assert summarise(recs, {}).blocks[0].post_stratified_estimate is None


def test_an_error_line_keeps_the_record_id_and_leaves_the_traceback_to_the_record() -> None:
    from pytest_tooleffect.report import render_terminal

    error = {"type": "RuntimeError", "message": "tool router [down]", "traceback": "Traceback (most recent call last)"}
    recs = [_rec("a", "single", True, True, "ok", n=1),
            _rec("a", "single", False, False, "", outcome="error", error=error, n=2)]
    text = render_terminal(summarise(recs, {}), width=160)
    assert "error (excluded from rates): a/single[replay]: RuntimeError: tool router [down]" in text
    assert "Traceback" not in text


# ------------------------------------------------------------------- averages' intervals, small classes


def test_macro_interval_is_price_bonett_in_closed_form() -> None:
    from pytest_tooleffect.report.arithmetic import macro_interval

    z = 1.959963984540054
    k = 3
    tilde = [((c + 2 / k) / (n + 4 / k), n + 4 / k) for c, n in SEED.values()]
    centre = sum(p for p, _ in tilde) / k
    half = z * math.sqrt(sum(p * (1 - p) / t for p, t in tilde)) / k
    lo, hi = macro_interval(SEED.values())  # type: ignore[misc]
    assert (lo, hi) == (pytest.approx(centre - half, abs=1e-12), pytest.approx(centre + half, abs=1e-12))
    assert lo < float(rate_table(SEED)["macro"]) < hi
    assert macro_interval([(4, 4), (0, 0)]) == macro_interval([(4, 4)])  # an empty class is not in the average
    assert macro_interval([]) is None and macro_interval([(0, 0)]) is None
    assert macro_interval([(4, 4), (12, 12), (194, 194)])[1] == 1.0  # type: ignore[index]  # clipped to [0, 1]


@pytest.mark.parametrize("sizes", [(4, 12, 194), (5, 5, 5), (187, 22, 31)])
def test_macro_interval_covers_where_a_plain_wald_interval_does_not(sizes: tuple[int, int, int]) -> None:
    """Coverage by simulation: at least 94 % of 95 % intervals hold the true macro-average, at class
    rates where small classes sit at or near 100 % (a plain Wald interval over the per-class variances
    then has width zero from a class that happens to be all right).
    """
    import numpy as np

    from pytest_tooleffect.report.arithmetic import macro_interval

    rng = np.random.default_rng(7)
    for rates in ((0.95, 0.95, 0.87), (0.99, 0.99, 0.99), (0.9, 0.5, 0.7), (1.0, 0.9, 0.8)):
        truth = sum(rates) / 3
        draws = rng.binomial(sizes, rates, size=(2000, 3))
        hits = wald = 0
        for row in draws:
            counts = list(zip((int(c) for c in row), sizes, strict=True))
            lo, hi = macro_interval(counts)  # type: ignore[misc]
            hits += lo <= truth <= hi
            p = [c / n for c, n in counts]
            half = 1.96 * math.sqrt(sum(q * (1 - q) / n for q, n in zip(p, sizes, strict=True))) / 3
            wald += sum(p) / 3 - half <= truth <= sum(p) / 3 + half
        assert hits / 2000 >= 0.94, (sizes, rates, hits / 2000)
        if rates == (0.99, 0.99, 0.99):
            assert wald / 2000 < 0.9  # why not the plain interval


def test_averages_carry_intervals_and_small_classes_are_flagged() -> None:
    recs = [_rec("a", "single", True, True, "ok", n=i) for i in range(4)]
    recs += [_rec("a", "no_tool", i < 20, i < 20, "ok_no_tool" if i < 20 else "tool_when_none_needed", n=10 + i)
             for i in range(25)]
    block = summarise(recs, min_class_n=20).to_json()["blocks"][0]
    assert block["min_class_n"] == 20
    assert block["classes"]["single"]["small"] is True and block["classes"]["no_tool"]["small"] is False
    assert block["classes"]["several"]["small"] is False  # no rows: nothing to flag
    assert block["small_classes"] == {"single": {"n": 4, "one_row_pct": 25.0, "one_row_macro_pct": 12.5}}
    lo, hi = wilson_interval(24, 29)  # type: ignore[misc]
    assert block["micro"]["name_ci95_pct"] == [round(lo * 100, 4), round(hi * 100, 4)]
    from pytest_tooleffect.report.arithmetic import macro_interval

    mlo, mhi = macro_interval([(4, 4), (20, 25)])  # type: ignore[misc]
    assert block["macro"]["name_ci95_pct"] == [round(mlo * 100, 4), round(mhi * 100, 4)]
    assert summarise(recs, min_class_n=4).to_json()["blocks"][0]["small_classes"] == {}
    text = render_terminal(summarise(recs, min_class_n=20))
    assert "small classes (fewer than 20 rows; --tooleffect-min-class-n): single n=4 (one row: 25.0 points of its " \
           "rate, 12.5 of the macro-average)" in text
    assert "│4*│" in text.replace(" ", "")
