"""The sequential paired gate's test (:mod:`pytest_tooleffect.ci.sequential`): verdicts on counts,
the budget, bad input, and the error bound computed exactly over every path of the counts.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_tooleffect.ci.sequential import SequentialDesign, bets, log_wealth, settle


def test_a_clear_regression_is_a_regression() -> None:
    # 30 of 32 discordant pairs are regressions: Δ ≈ 0.14 on 200 pairs
    assert settle(SequentialDesign(), regressions=30, improvements=2, pairs=200) == "regression"


def test_an_unchanged_agent_settles_as_no_regression() -> None:
    # 20 discordant pairs split evenly in 400: Δ = 0, well inside a 5-point effect
    assert settle(SequentialDesign(), regressions=10, improvements=10, pairs=400) == "no_regression"


def test_few_pairs_are_not_yet_and_a_budget_end_is_not_settled_never_a_pass() -> None:
    design = SequentialDesign(max_pairs=20)
    assert settle(design, 1, 1, 19) == "not_yet"
    assert settle(design, 1, 1, 20) == "not_settled"
    assert settle(design, 1, 1, 25) == "not_settled"
    assert settle(SequentialDesign(), 1, 1, 20) == "not_yet"


def test_a_margin_asks_for_more_evidence_than_the_effect() -> None:
    # 10/10 in 300 pairs rules out a 5-point drop, not yet a 1-point one
    assert settle(SequentialDesign(), 10, 10, 300) == "no_regression"
    assert settle(SequentialDesign(margin=0.01), 10, 10, 300) == "not_yet"
    assert SequentialDesign(margin=0.01).no_regression_margin == 0.01
    assert SequentialDesign().no_regression_margin == 0.05


def test_concordant_pairs_do_not_move_the_regression_side() -> None:
    design = SequentialDesign(discordance=0.1)
    few, many = log_wealth(design, 5, 1, 20), log_wealth(design, 5, 1, 2000)
    assert float(few[0]) == pytest.approx(float(many[0]))
    assert float(many[1]) > float(few[1])  # but they are evidence of no regression


def test_verdicts_are_monotone_in_the_regressions() -> None:
    design = SequentialDesign(discordance=0.1)
    seen = [settle(design, r, 4, 200) for r in range(0, 40)]
    first_regression = seen.index("regression")
    assert all(v == "regression" for v in seen[first_regression:])
    assert "no_regression" in seen[:first_regression]
    assert "regression" not in seen[:first_regression]


@pytest.mark.parametrize("kwargs, field", [
    ({"alpha": 0.0}, "alpha"), ({"beta": 1.0}, "beta"), ({"effect": -0.1}, "effect"),
    ({"margin": 1.0}, "margin"), ({"max_pairs": 0}, "max_pairs"), ({"discordance": 1.5}, "discordance"),
])
def test_a_design_out_of_range_is_refused_naming_the_field(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=f"SequentialDesign.{field} "):
        SequentialDesign(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("counts", [(-1, 0, 5), (3, 3, 5), (0, 0, -1)])
def test_impossible_counts_are_refused(counts: tuple[int, int, int]) -> None:
    with pytest.raises(ValueError, match="settle: counts"):
        settle(SequentialDesign(), *counts)


def test_the_bets_are_tuned_to_the_design() -> None:
    lambdas, logw, mus, _ = bets(SequentialDesign(discordance=0.1, effect=0.05))
    assert lambdas[1] == pytest.approx(1 / 3)  # Kelly: effect / (discordance + effect)
    assert sum(math.exp(w) for w in logw) == pytest.approx(1.0)
    assert all(0 < mu < 0.9 / 0.95 for mu in mus)
    wide = bets(SequentialDesign())
    assert len(wide[0]) > 3 and max(wide[0]) <= 0.9


def _crossing_probability(design: SequentialDesign, p10: float, p01: float, horizon: int, side: int) -> float:
    """P(the martingale of ``side`` (0 regression, 1 no regression) reaches its threshold by ``horizon``),
    exactly: a forward pass over the counts (r, i) at each n, absorbing the paths that crossed."""
    threshold = math.log(1 / (design.alpha if side == 0 else design.beta))
    prob = np.zeros((horizon + 1, horizon + 1))
    prob[0, 0] = 1.0
    crossed = 0.0
    r_idx, i_idx = np.meshgrid(np.arange(horizon + 1), np.arange(horizon + 1), indexing="ij")
    regression_side = log_wealth(design, r_idx, i_idx, r_idx + i_idx)[0]  # concordant pairs do not move it
    for n in range(1, horizon + 1):
        nxt = (1 - p10 - p01) * prob
        nxt[1:, :] += p10 * prob[:-1, :]
        nxt[:, 1:] += p01 * prob[:, :-1]
        reachable = r_idx + i_idx <= n
        stat = regression_side if side == 0 else log_wealth(design, r_idx, i_idx, np.full_like(r_idx, n))[1]
        hit = (stat >= threshold) & reachable
        crossed += float(nxt[hit].sum())
        nxt[hit] = 0.0
        prob = nxt
    return crossed


@pytest.mark.parametrize("discordance", [0.05, 0.3])
def test_the_false_regression_rate_over_every_stopping_time_is_at_most_alpha_exactly(discordance: float) -> None:
    design = SequentialDesign(discordance=discordance)
    p = _crossing_probability(design, discordance / 2, discordance / 2, horizon=300, side=0)
    assert 0.0 < p <= design.alpha


def test_a_false_no_regression_verdict_is_at_most_beta_exactly() -> None:
    design = SequentialDesign(discordance=0.2, margin=0.05)
    # a drop of exactly the margin: 12.5 % regressions, 7.5 % improvements
    p = _crossing_probability(design, 0.125, 0.075, horizon=300, side=1)
    assert 0.0 < p <= design.beta
