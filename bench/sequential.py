"""The sequential gate's error rates and average sample number against the fixed-n exact McNemar
test, by simulation (``docs/sequential.md`` holds the table this prints).

Per scenario (an unchanged agent's discordance ``D`` × a true regression ``Δ``), ``--runs``
simulated runs (default 10,000, fixed seed) of the design ``α = 0.05``, ``β = 0.2``, effect 5
points, the bets tuned to ``D`` (or, with ``--unplanned``, spread over every ``D``); the fixed-n
design is the exact McNemar test's ``n`` for the same ``α``, power and effect at that ``D``, applied
to the first ``n`` pairs of the same runs.  Prints a Markdown table and one ``BENCH-RESULT`` line
per scenario: the average sample number over the fixed ``n`` (goal ≤ 0.5).

Run on demand: ``.venv/bin/python bench/sequential.py [--runs 10000] [--unplanned] [--margin 0.02]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from results import emit  # bench/results.py: this folder is on sys.path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_tooleffect.ci.sample_size import alternative, fixed_n  # noqa: E402
from pytest_tooleffect.ci.sequential import SequentialDesign  # noqa: E402
from pytest_tooleffect.ci.sequential_sim import simulate  # noqa: E402

DISCORDANCES = (0.0, 0.05, 0.1, 0.2, 0.3)
REGRESSIONS = (0.0, 0.02, 0.05, 0.1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=45)
    parser.add_argument("--unplanned", action="store_true", help="bets spread over every discordance")
    parser.add_argument("--margin", type=float, default=0.0, help="the no-regression margin (default 0: the effect)")
    parser.add_argument("--discordances", type=float, nargs="+", default=DISCORDANCES)
    parser.add_argument("--regressions", type=float, nargs="+", default=REGRESSIONS)
    args = parser.parse_args()
    alpha, beta, effect = 0.05, 0.2, 0.05
    print(f"{args.runs} runs per scenario, seed {args.seed}; design alpha {alpha}, beta {beta}, effect {effect}, "
          f"margin {args.margin or effect}, bets {'spread over every D' if args.unplanned else 'tuned to D'}; "
          "horizon 4 x fixed n")
    print("| D | Δ | fixed n | fixed-n rejects | gate: regression | gate: no regression | not settled | "
          "max over stopping times P(regression) (SE) | average decisions | / fixed n |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    start = time.monotonic()
    for d in args.discordances:
        fixed = fixed_n(alpha, beta, effect, d)
        design = SequentialDesign(alpha=alpha, beta=beta, effect=effect, margin=args.margin,
                                  discordance=None if args.unplanned else d)
        for delta in args.regressions:
            p10, p01 = alternative(d, delta)
            sim = simulate(design, p10, p01, args.runs, 4 * fixed.n, args.seed, fixed_n=fixed.n)
            ratio = sim.mean_pairs / fixed.n
            print(f"| {d:g} | {delta * 100:g} pts | {fixed.n} | {sim.fixed_reject:.4f} | {sim.regression:.4f} | "
                  f"{sim.no_regression:.4f} | {sim.not_settled:.4f} | {sim.ever_regression:.4f} "
                  f"({sim.se(sim.ever_regression):.4f}) | {sim.mean_pairs:.1f} | {ratio:.2f} |", flush=True)
            emit(f"sequential gate D={d:g} regression={delta * 100:g} pts: average decisions",
                 f"fixed-n exact McNemar n={fixed.n}", ratio, "<= 0.5",
                 f"{args.runs} runs; gate regression {sim.regression:.4f}, fixed-n rejects {sim.fixed_reject:.4f}")
    print(f"({time.monotonic() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
