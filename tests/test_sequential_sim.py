"""The sequential gate's error rates by simulation with a fixed seed (:mod:`pytest_tooleffect.ci.sequential_sim`):
2,000 runs per scenario; a rate above its bound by more than 3 standard errors fails.
``bench/sequential.py`` prints the 10,000-run table of ``docs/sequential.md``.
"""

from __future__ import annotations

import numpy as np
import pytest

from pytest_tooleffect.ci.sample_size import alternative, fixed_n
from pytest_tooleffect.ci.sequential import SequentialDesign, settle
from pytest_tooleffect.ci.sequential_sim import simulate

RUNS = 2000
SEED = 20261206


@pytest.mark.parametrize("planned", [True, False])
@pytest.mark.parametrize("d", [0.05, 0.2])
def test_the_false_regression_rate_at_every_stopping_time_is_at_most_alpha(d: float, planned: bool) -> None:
    design = SequentialDesign(discordance=d if planned else None)
    horizon = 3 * fixed_n(0.05, 0.2, 0.05, d).n
    sim = simulate(design, d / 2, d / 2, RUNS, horizon, SEED)
    assert sim.ever_regression <= design.alpha + 3 * sim.se(design.alpha)
    assert sim.regression <= sim.ever_regression
    assert sim.not_settled < 0.01  # an unchanged agent is settled long before three fixed n


def test_a_false_no_regression_at_the_margin_is_at_most_beta() -> None:
    design = SequentialDesign(margin=0.05, discordance=0.1)
    p10, p01 = alternative(0.1, 0.05)  # the agent regressed by exactly the margin
    sim = simulate(design, p10, p01, RUNS, 1500, SEED)
    assert sim.no_regression <= design.beta + 3 * sim.se(design.beta)


def test_the_gate_takes_at_most_half_the_fixed_n_on_an_unchanged_agent_at_the_same_power() -> None:
    d = 0.1
    design, fixed = SequentialDesign(discordance=d), fixed_n(0.05, 0.2, 0.05, d)
    unchanged = simulate(design, d / 2, d / 2, RUNS, 4 * fixed.n, SEED, fixed_n=fixed.n)
    regressed = simulate(design, *alternative(d, 0.05), RUNS, 4 * fixed.n, SEED + 1, fixed_n=fixed.n)
    assert unchanged.mean_pairs <= fixed.n / 2
    assert regressed.mean_pairs < fixed.n
    # power as the fixed-n test's (simulated on the same runs, and its exact figure)
    assert regressed.regression >= (regressed.fixed_reject or 0) - 3 * regressed.se(0.8)
    assert regressed.fixed_reject == pytest.approx(fixed.power, abs=3 * regressed.se(0.8))
    assert (unchanged.fixed_reject or 0) <= 0.05 + 3 * unchanged.se(0.05)


def test_the_simulation_decides_as_settle_does() -> None:
    design = SequentialDesign(discordance=0.1, max_pairs=400)
    # one simulated run, and the same stream (same seed) given to settle() pair after pair
    one = simulate(design, 0.1, 0.05, 1, 400, SEED)
    u = np.random.default_rng(SEED).random((1, 400))[0]
    r, i = np.cumsum(u < 0.1), np.cumsum((u >= 0.1) & (u < 0.15))
    first = next((n for n in range(1, 401) if settle(design, int(r[n - 1]), int(i[n - 1]), n) != "not_yet"), 400)
    expected = settle(design, int(r[first - 1]), int(i[first - 1]), first)
    assert one.mean_pairs == first
    assert (one.regression, one.no_regression, one.not_settled) == (
        float(expected == "regression"), float(expected == "no_regression"), float(expected == "not_settled"))
