"""Adaptive repeats (:mod:`pytest_tooleffect.ci.adaptive_repeats`): the decision rule, its exact error
bound, and the trials it spends against a fixed k.
"""

from __future__ import annotations

import numpy as np
import pytest

from pytest_tooleffect.ci.adaptive_repeats import RepeatDesign, expected_trials, next_step, trials_to_stable


@pytest.mark.parametrize("tolerance, k", [(0.1, 29), (0.2, 14), (0.3, 9), (0.5, 6)])
def test_stable_takes_the_fewest_identical_verdicts_the_bound_allows(tolerance: float, k: int) -> None:
    design = RepeatDesign(alpha=0.05, tolerance=tolerance)
    assert trials_to_stable(design) == k
    assert (1 - tolerance) ** k + tolerance ** k <= 0.05 < (1 - tolerance) ** (k - 1) + tolerance ** (k - 1)


def test_a_flip_is_flaky_agreement_repeats_until_stable_and_a_cap_is_not_settled() -> None:
    design = RepeatDesign(alpha=0.05, tolerance=0.3, max_trials=20)
    assert next_step(design, 1, 2) == "flaky"
    assert [next_step(design, k, k) for k in range(1, 10)] == ["repeat"] * 8 + ["stable"]
    assert next_step(design, 0, 9) == "stable"
    capped = RepeatDesign(alpha=0.05, tolerance=0.1, max_trials=10)
    assert next_step(capped, 10, 10) == "not_settled"
    assert next_step(capped, 9, 9) == "repeat"


def test_calling_a_flaky_case_stable_is_at_most_alpha_for_every_flaky_pass_rate() -> None:
    design = RepeatDesign(alpha=0.05, tolerance=0.2)
    k = trials_to_stable(design)
    for pi in np.linspace(0.2, 0.8, 61):
        assert pi ** k + (1 - pi) ** k <= 0.05  # the only path to "stable" is k identical verdicts
    # and by simulation of the rule itself, at the boundary π = ε
    rng = np.random.default_rng(45)
    stable = 0
    for _ in range(4000):
        passes = trials = 0
        while (step := next_step(design, passes, trials)) == "repeat":
            passes += int(rng.random() < 0.8)
            trials += 1
        stable += step == "stable"
    assert stable / 4000 <= 0.05 + 3 * (0.05 * 0.95 / 4000) ** 0.5


def test_flaky_cases_stop_early_and_expected_trials_match_simulation() -> None:
    design = RepeatDesign(alpha=0.05, tolerance=0.1)
    k = trials_to_stable(design)
    assert expected_trials(design, 1.0) == k
    assert expected_trials(design, 0.5) == pytest.approx(3.0, abs=1e-6)
    rng = np.random.default_rng(7)
    spent = []
    for _ in range(3000):
        passes = trials = 0
        while next_step(design, passes, trials) == "repeat":
            passes += int(rng.random() < 0.9)
            trials += 1
        spent.append(trials)
    assert np.mean(spent) == pytest.approx(expected_trials(design, 0.9), rel=0.05)
    assert expected_trials(design, 0.9) < k / 2


@pytest.mark.parametrize("kwargs", [{"alpha": 1.0}, {"tolerance": 0.6}, {"tolerance": 0.0}, {"max_trials": 1}])
def test_a_design_out_of_range_is_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="RepeatDesign."):
        RepeatDesign(**kwargs)  # type: ignore[arg-type]


def test_impossible_counts_are_refused() -> None:
    with pytest.raises(ValueError, match="passes must be in 0..trials"):
        next_step(RepeatDesign(), 3, 2)
