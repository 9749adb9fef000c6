"""``tooleffect plan``: how many paired decisions a gated run needs (:mod:`pytest_tooleffect.ci.planning`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

__all__ = ["add_plan_parser", "cmd_plan", "render_plan"]


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a fraction in (0, 1) (0.05 = 5 points), got {text!r}") from None
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"a fraction in (0, 1) (0.05 = 5 points), got {text!r}")
    return value


def _margin(text: str) -> float:
    return 0.0 if text.strip() in ("0", "0.0") else _fraction(text)


def _sim_runs(text: str) -> int:
    from pytest_tooleffect.ci.planning import MAX_SIM_RUNS, MIN_SIM_RUNS

    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not MIN_SIM_RUNS <= value <= MAX_SIM_RUNS:
        raise argparse.ArgumentTypeError(f"a whole number from {MIN_SIM_RUNS:,} to {MAX_SIM_RUNS:,}, got {text!r}")
    return value


def _identities(path: Path, source: str | None) -> set[object]:
    """What a run given as ``path`` was read from: the file itself, and the record log a baseline
    was saved from (its ``source``); a file that exists is known by its device and inode (another
    path to it, a link, is the same file), else by its resolved path.
    """
    out: set[object] = set()
    for p in (str(path), source):
        if p is None:
            continue
        try:
            st = os.stat(p)
            out.add((st.st_dev, st.st_ino))
        except OSError:
            out.add(os.path.realpath(p))
    return out


def _same_run(paths: list[Path], runs: list[Any]) -> str | None:
    """Why two of the runs are one run (the same file, or a baseline and the record log it was
    saved from, or two baselines of one log), or ``None``: each run is a run of its own.
    """
    seen: list[tuple[Path, set[object]]] = []
    for path, run in zip(paths, runs, strict=True):
        mine = _identities(path, run.source)
        for other, theirs in seen:
            if mine & theirs:
                return (f"{other} and {path} are the same run (the same file, or a baseline and the record log it "
                        "was saved from): its decisions compared with themselves measure a discordance of 0, as "
                        "of a deterministic agent; give --repeats another run of the same agent")
        seen.append((path, mine))
    return None


def _label_sets(run: Any) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """Per ``(family, policy)`` block of ``run``: its ``(case id, label hash)`` pairs (trials counted once)."""
    out: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for d in run.decisions.values():
        out.setdefault((d.family, d.policy), set()).add((d.case_id, d.label_hash))
    return out


def _shown_set(run: Any, key: tuple[str, str], pairs: set[tuple[str, str]]) -> str:
    """The block's label-set fingerprint as its baseline group states it (else computed from ``pairs``)."""
    from pytest_tooleffect.report import fingerprint

    group = run.group(*key)
    return str(group.label_set_fingerprint) if group is not None else fingerprint(pairs)


def _other_cases(paths: list[Path], runs: list[Any]) -> str | None:
    """Why a ``--repeats`` run cannot be pooled with the baseline (a block of the same family and
    policy holding other cases, or the same cases under other labels), or ``None``.

    The discordance is the rate at which one agent's verdict on one decision changes between runs:
    pooling runs of other cases or labels would count decisions of one run only as measured.
    """
    base = _label_sets(runs[0])
    for path, run in zip(paths[1:], runs[1:], strict=True):
        for key, pairs in sorted(_label_sets(run).items()):
            mine = base.get(key)
            if mine is None or mine == pairs:
                continue
            cases, theirs = {c for c, _ in mine}, {c for c, _ in pairs}
            relabelled = ({c for c, _ in pairs} & cases) - {c for c, _ in mine & pairs}
            diff = [f"{n} {what}" for n, what in ((len(cases - theirs), f"cases only in {paths[0]}"),
                                                  (len(theirs - cases), f"only in {path}"),
                                                  (len(relabelled), "labelled otherwise")) if n]
            return (f"{paths[0]} (label set {_shown_set(runs[0], key, mine)}) and {path} (label set "
                    f"{_shown_set(run, key, pairs)}) hold "
                    f"other decisions for {key[0]} · {key[1]} ({', '.join(diff)}): the discordance is measured on "
                    "the same cases under the same labels; give --repeats a run of the baseline's cases")
    return None


def _identities_of(run: Any) -> list[tuple[str, tuple[str, str]]]:
    """``(policy name, (spec, digest))`` of each block of ``run`` whose records said what its policy
    was (a baseline group's ``policy_identity``, ``SPEC (DIGEST)``).
    """
    out = []
    for g in run.groups:
        if g.policy_identity:
            spec, _, digest = g.policy_identity.rpartition(" (")
            out.append((g.policy, (spec, digest.removesuffix(")")) if spec else (g.policy_identity, "")))
    return out


def _logged_identities(records: list[Any]) -> list[tuple[str, tuple[str, str]]]:
    """``(policy name, (spec, digest))`` of each record (a JSON object) that says what its policy was."""
    out = []
    for rec in records:
        ident = rec.get("policy_identity") if isinstance(rec, dict) else None
        if isinstance(ident, dict) and isinstance(rec.get("policy"), str):
            out.append((rec["policy"], (str(ident.get("spec")), str(ident.get("digest")))))
    return out


def _two_policies(named: list[tuple[Path, list[tuple[str, tuple[str, str]]]]]) -> str | None:
    """Why the runs (the baseline, each ``--repeats`` run and each ``--costs`` log, with the policies
    their records name) are not runs of one agent per policy name: two of them name two policies
    (another agent, model, api base or settings: the records' ``policy_identity``) under one name, as
    ``tooleffect report`` refuses (:func:`~pytest_tooleffect.report.merging.policy_clash`); ``None``
    when they are (runs whose records do not say are not checked).
    """
    from pytest_tooleffect.report.merging import policy_clash

    seen: dict[str, tuple[tuple[str, str], Path]] = {}
    for path, identities in named:
        for policy, ident in identities:
            first, first_path = seen.setdefault(policy, (ident, path))
            if first != ident:
                return (policy_clash(policy, first, first_path, ident, path) + ": the baseline, --repeats and "
                        "--costs are runs of the same agent (a discordance between two agents is their "
                        "disagreement, not one agent's noise); give the other agent its own policy name")
    return None


def add_plan_parser(sub: Any) -> None:
    """Register ``tooleffect plan`` on the subcommands' parser ``sub``."""
    p = sub.add_parser("plan", help="paired decisions (and their cost) a run needs to detect a regression: fixed-n "
                                    "exact McNemar and the sequential gate, from a baseline's measured discordance")
    p.add_argument("baseline", help="a baseline file or a record log (its repeated trials measure the discordance)")
    p.add_argument("--repeats", action="append", default=[], metavar="RUN",
                   help="another run of the same agent (record log or baseline): an A/A run, or a "
                        "--tooleffect-repeats run (repeatable); a run of another policy under the same name is "
                        "refused")
    p.add_argument("--costs", action="append", default=[], metavar="LOG",
                   help="a record log whose tokens and dollars per decision price the plan (repeatable; record "
                        "logs given as the baseline or --repeats are read too)")
    p.add_argument("--effect", type=_fraction, default=0.05, help="the regression to detect (default 0.05 = 5 points)")
    p.add_argument("--alpha", type=_fraction, default=0.05, help="false-regression rate, one-sided (default 0.05)")
    p.add_argument("--power", type=_fraction, default=0.8, help="power at --effect (default 0.8)")
    p.add_argument("--margin", type=_margin, default=0.0,
                   help="the sequential gate's no-regression margin (default 0: the effect)")
    p.add_argument("--sim-runs", type=_sim_runs, default=2000,
                   help="simulated runs per sequential figure, from 100 to 1,000,000 (default 2000)")
    p.add_argument("--allow-incomplete", action="store_true",
                   help="plan from the record log of a run that is not complete (interrupted, shards missing, items "
                        "without a record), as baseline save --allow-incomplete saves one. Refused without it")
    p.add_argument("--json", action="store_true", help="the rows as JSON")
    p.set_defaults(func=cmd_plan)


def _money(usd: float | None) -> str:
    if usd is None:
        return "–"
    return f"${usd:,.2f}" if usd >= 1 else f"${usd:.4f}" if usd >= 0.01 else f"${usd:.6f}"


def render_plan(rows: list[Any], effect: float, alpha: float, power: float) -> str:
    """The plan as text: one line per family × policy × class (``all`` = the block).

    Args:
        rows: :class:`pytest_tooleffect.ci.planning.PlanRow` objects.
        effect: the regression planned for.
        alpha: the false-regression rate.
        power: the power.

    Returns:
        The text, ending in a newline.
    """
    from pytest_tooleffect.ci.planning import runs_needed

    out = [f"plan: detect a {effect * 100:g}-point regression at alpha {alpha:g} (one-sided), power {power:g}",
           "  D = discordance of the unchanged agent (measured: decisions with 2+ verdicts); fixed n = exact McNemar; "
           "sequential = average decisions to a verdict (simulated), unchanged | regressed by the effect"]
    head = (f"  {'class':<8} {'decisions':>9} {'pass':>6} {'D':>7} {'fixed n':>8} {'runs':>5} {'seq unch':>9} "
            f"{'seq regr':>9} {'/fixed':>11} {'power':>6} {'cost fixed':>11} {'cost seq':>11}")
    block = None
    for r in rows:
        if (r.family, r.policy) != block:
            block = (r.family, r.policy)
            if r.cost.tokens is None and r.cost.usd is None:
                priced = f"no cost: none of its {r.cost.records} records states one" if r.cost.records else \
                    "no cost: no record log given (--costs)"
            else:
                tokens = "–" if r.cost.tokens is None else f"{r.cost.tokens:,.0f}"
                priced = f"per decision {tokens} tokens, {_money(r.cost.usd)}, over {r.cost.records} records"
            out.append(f"{r.family} · {r.policy}  ({priced})")
            out.append(head)
        m = r.measured
        d = "–" if m.rate is None else f"{m.rate:.4f}"
        line = f"  {r.label_class:<8} {m.decisions:>9} {m.pass_rate * 100:>5.1f}% {d:>7}"
        if r.fixed is None:
            out.append(f"{line}  {r.note}")
            continue
        n = r.fixed.n
        worst = max(r.asn_unchanged, r.asn_regressed)
        usd = r.cost.usd
        out.append(f"{line} {n:>8} {runs_needed(n, m.decisions):>5} {r.asn_unchanged:>9.1f} {r.asn_regressed:>9.1f} "
                   f"{r.asn_unchanged / n:>5.2f}|{r.asn_regressed / n:<5.2f} {r.power:>6.3f} "
                   f"{_money(None if usd is None else usd * n):>11} {_money(None if usd is None else usd * worst):>11}")
    return "\n".join(out) + "\n"


def _whole_run(path: Path, allow_incomplete: bool) -> list[Any] | int:
    """The records of the record log ``path`` when they are one run, and the whole of it (or
    ``allow_incomplete``), as ``tooleffect report`` and ``baseline save`` check a log
    (:func:`~pytest_tooleffect.commands.merged_logs.log_run`); else the exit status, the reason said
    on stderr in one line: 2 for logs that are not one run, 1 for a run that lacks a part.  ``[]`` for
    a file that is not a record log (a baseline file), left to :func:`~pytest_tooleffect.ci.baseline.load_runs`.
    """
    from pytest_tooleffect.commands.merged_logs import log_run
    from pytest_tooleffect.util.display import shown

    checked = log_run("plan", path)
    if isinstance(checked, int):
        return checked
    records, lacks = checked
    if lacks and not allow_incomplete:
        print(shown(f"tooleffect plan: {path}: the run is not complete: {'; '.join(lacks)}; its discordance and "
                    "costs would be measured on part of the run. Plan from it anyway with --allow-incomplete",
                    limit=None), file=sys.stderr)
        return 1
    for line in lacks:
        print(shown(f"tooleffect plan: {path}: incomplete (--allow-incomplete): {line}", limit=None), file=sys.stderr)
    return records


def cmd_plan(args: argparse.Namespace) -> int:
    """``tooleffect plan``: print the plan (text, or JSON with ``--json``).

    Args:
        args: the parsed command line.

    Returns:
        0 when printed; 1 for a record log that lacks part of its run (a shard missing, items without a
        record: said in one line) without ``--allow-incomplete``; 2 for a record log whose records are not
        one run (refused as ``tooleffect report`` refuses it: two runs joined, two policies under one name,
        a record twice), a run or a cost log that cannot be read, bad figures, or a
        ``--repeats`` run that is the baseline's own run (the same file, or the record log the
        baseline was saved from) or holds other cases, or the same cases under other labels, for
        a family × policy of the baseline (both files and label-set fingerprints named), or runs (the
        baseline, ``--repeats``, ``--costs``) whose records name two policies under one policy name
        (another agent, model or settings: both named, with their files).  Messages
        show a file's text as the run does (:func:`pytest_tooleffect.util.display.shown`).
    """
    from pytest_tooleffect.ci.baseline import BaselineError, load_runs
    from pytest_tooleffect.ci.planning import costs_of, plan
    from pytest_tooleffect.report.record_log import read_records
    from pytest_tooleffect.util.display import shown

    paths = [Path(args.baseline), *(Path(p) for p in args.repeats)]
    records: list[Any] = []
    for path in paths:  # a record log: checked as tooleffect report checks it, before it is read as a run
        checked = _whole_run(path, args.allow_incomplete)
        if isinstance(checked, int):
            return checked
        records += checked
    try:
        runs = [load_runs(p) for p in paths]
    except BaselineError as exc:
        print(shown(f"tooleffect plan: {exc}"), file=sys.stderr)
        return 2
    for path, run in zip(paths, runs, strict=True):
        if run.incomplete:  # a baseline saved with --allow-incomplete: said, as it was when saved
            print(shown(f"tooleffect plan: {path}: the baseline of an incomplete run (saved with "
                        f"--allow-incomplete): {'; '.join(run.incomplete)}", limit=None), file=sys.stderr)
    same = _same_run(paths, runs) or _other_cases(paths, runs)
    if same is not None:
        print(shown(f"tooleffect plan: {same}"), file=sys.stderr)
        return 2
    named = [(path, _identities_of(run)) for path, run in zip(paths, runs, strict=True)]
    for path in (Path(p) for p in args.costs):
        try:
            priced = read_records(path)
        except (OSError, ValueError) as exc:
            print(shown(f"tooleffect plan: {path}: cannot read its costs ({exc})"), file=sys.stderr)
            return 2
        records += priced
        named.append((path, _logged_identities(priced)))
    two = _two_policies(named)
    if two is not None:
        print(shown(f"tooleffect plan: {two}", limit=None), file=sys.stderr)
        return 2
    rows = plan(runs, effect=args.effect, alpha=args.alpha, power=args.power, margin=args.margin,
                costs=costs_of(records), sim_runs=args.sim_runs)
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=1))
    else:
        sys.stdout.write(render_plan(rows, args.effect, args.alpha, args.power))
    return 0
