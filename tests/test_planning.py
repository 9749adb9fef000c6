"""Planning a gated run: the fixed-n exact McNemar design (:mod:`pytest_tooleffect.ci.sample_size`),
the measured discordance and the plan's rows (:mod:`pytest_tooleffect.ci.planning`), and
``tooleffect plan``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scipy.stats import binom

from pytest_tooleffect.ci.baseline import Baseline, BaselineDecision, BaselineGroup
from pytest_tooleffect.ci.comparison import mcnemar_exact
from pytest_tooleffect.ci.planning import ALL, Cost, costs_of, discordance, plan
from pytest_tooleffect.ci.sample_size import alternative, fixed_n, fixed_n_power, mcnemar_critical
from pytest_tooleffect.cli import main as cli
from pytest_tooleffect.collect.ids import record_id


@pytest.mark.parametrize("alpha", [0.05, 0.025])
def test_the_critical_values_are_the_shipped_exact_mcnemar_one_sided(alpha: float) -> None:
    crit = mcnemar_critical(80, alpha)
    for k in range(1, 81):
        rejects = [b for b in range(k + 1) if b > k - b and mcnemar_exact([[0, b], [k - b, 0]]) <= 2 * alpha]
        assert int(crit[k]) == (min(rejects) if rejects else k + 1), k


def test_a_deterministic_agent_needs_five_regressions_and_the_n_that_shows_them() -> None:
    # D = 0: every discordant pair is a regression, and 0.5^5 ≤ 0.05 < 0.5^4
    design = fixed_n(0.05, 0.2, 0.05, 0.0)
    expected = next(n for n in range(1, 1000) if binom.sf(4, n, 0.05) >= 0.8)
    assert design.n == expected
    assert design.power == pytest.approx(binom.sf(4, expected, 0.05))


@pytest.mark.parametrize("d", [0.05, 0.2])
def test_the_fixed_n_is_the_first_n_with_the_power(d: float) -> None:
    design = fixed_n(0.05, 0.2, 0.05, d)
    p10, p01 = alternative(d, 0.05)
    assert design.power >= 0.8
    assert all(fixed_n_power(m, 0.05, p10, p01) < 0.8 for m in range(design.n - 30, design.n))
    assert 0.9 * design.approx_n < design.n < 1.2 * design.approx_n  # Connor's approximation is close
    assert fixed_n_power(design.n, 0.05, d / 2, d / 2) <= 0.05  # the exact test holds its level


def _run(verdicts: dict[str, list[bool | None]], cls: str = "single", label: str = "h") -> Baseline:
    decisions = {}
    repeats = max(len(v) for v in verdicts.values())
    for case_id, trials in verdicts.items():
        for trial, passed in enumerate(trials, 1):
            rid = record_id("fam", case_id, "pol", trial, repeats)
            if passed is None:
                d = BaselineDecision(family="fam", policy="pol", case_id=case_id, trial=trial, outcome="error",
                                     passed=None, error="ProviderError", label_hash=label, **{"class": cls})
            else:
                d = BaselineDecision(family="fam", policy="pol", case_id=case_id, trial=trial, outcome="scored",
                                     passed=passed, kind="ok" if passed else "wrong_tool", label_hash=label,
                                     name_ok=passed, name_args_ok=passed, **{"class": cls})
            decisions[rid] = d
    group = BaselineGroup(family="fam", policy="pol", label_set_fingerprint="0" * 16, decisions=len(decisions),
                          errors=0)
    return Baseline(created="2026-01-01T00:00:00+00:00", groups=[group], decisions=decisions)


def test_the_discordance_of_trials_and_of_two_runs() -> None:
    # a: one pass of two (2·1·1/(2·1) = 1), b: always passes (0), c: one verdict only (not counted), d: an error
    within = discordance([_run({"a": [True, False], "b": [True, True], "c": [True], "d": [None, True]})])
    m = within[("fam", "pol", "single")]
    assert (m.decisions, m.repeated, m.rate) == (4, 2, pytest.approx(0.5))
    assert m.pass_rate == pytest.approx(5 / 6)
    # two A/A runs of one trial: a flips, b does not; three verdicts of a (T, F, F): 2·1·2/(3·2) = 2/3
    two = discordance([_run({"a": [True], "b": [False]}), _run({"a": [False], "b": [False]})])
    assert two[("fam", "pol", ALL)].rate == pytest.approx(0.5)
    three = discordance([_run({"a": [True, False]}), _run({"a": [False]})])
    assert three[("fam", "pol", ALL)].rate == pytest.approx(2 / 3)
    # a run under another label measures another question: left out
    relabelled = discordance([_run({"a": [True]}), _run({"a": [False]}, label="h2")])
    assert relabelled[("fam", "pol", ALL)].rate is None


def test_a_plan_uses_the_measured_discordance_or_says_it_has_none() -> None:
    verdicts = {f"c{i}": [True, i % 10 != 0] for i in range(100)}  # 10 % of decisions flip between trials
    rows = plan([_run(verdicts)], effect=0.05, sim_runs=300, costs={("fam", "pol"): Cost(100, 1200.0, 0.004)})
    row = next(r for r in rows if r.label_class == ALL)
    assert row.measured.rate == pytest.approx(0.1)
    assert row.fixed == fixed_n(0.05, 0.2, 0.05, 0.1)
    assert row.asn_unchanged is not None and row.asn_unchanged < row.fixed.n / 2
    assert row.asn_regressed is not None and row.asn_regressed < row.fixed.n
    assert row.power is not None and row.power > 0.7
    once = plan([_run({f"c{i}": [True] for i in range(20)})], sim_runs=300)
    assert once[0].fixed is None and "not measured" in once[0].note


def test_costs_are_averaged_per_block_from_the_records_that_state_them() -> None:
    records = [{"family": "f", "policy": "p", "cost": {"input_tokens": 100, "output_tokens": 20, "cost_usd": 0.01}},
               {"family": "f", "policy": "p", "cost": {"input_tokens": 300, "output_tokens": 60, "cost_usd": None}},
               {"family": "f", "policy": "q", "cost": {"input_tokens": None, "output_tokens": None}}]
    costs = costs_of(records)
    assert costs[("f", "p")] == Cost(2, 240.0, 0.01)
    assert costs[("f", "q")] == Cost(1, None, None)


def test_tooleffect_plan_prints_the_needed_n_and_its_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run({f"c{i}": [True, i % 10 != 0] for i in range(100)})
    base = tmp_path / "baseline.json"
    base.write_text(run.dumps(), encoding="utf-8")
    log = tmp_path / "costs.jsonl"
    log.write_text(json.dumps({"family": "fam", "policy": "pol", "cost": {"input_tokens": 900, "output_tokens": 100,
                                                                          "cost_usd": 0.002}}) + "\n", encoding="utf-8")
    assert cli(["plan", str(base), "--costs", str(log), "--sim-runs", "200"]) == 0
    out = capsys.readouterr().out
    n = fixed_n(0.05, 0.2, 0.05, 0.1).n
    assert "fam · pol  (per decision 1,000 tokens, $0.002000, over 1 records)" in out
    all_line = next(line for line in out.splitlines() if line.strip().startswith("all "))
    assert f" {n} " in all_line and f"${0.002 * n:.4f}" in all_line
    assert cli(["plan", str(base), "--json", "--sim-runs", "200"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[-1]["fixed"]["n"] == n and rows[-1]["label_class"] == "all"


def test_tooleffect_plan_names_an_unreadable_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["plan", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli(["plan", str(tmp_path / "x.json"), "--effect", "5"])


def test_a_repeat_that_is_the_baselines_own_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the same run compared with itself measures a discordance of 0: planned as for a deterministic agent
    from tests.test_records import shipped_record

    base = tmp_path / "baseline.json"
    base.write_text(_run({f"c{i}": [True, i % 10 != 0] for i in range(100)}).dumps(), encoding="utf-8")
    (tmp_path / "link.json").symlink_to(base)
    (tmp_path / "x").mkdir()
    for repeat in (base, tmp_path / "link.json", tmp_path / "x" / ".." / "baseline.json"):
        assert cli(["plan", str(base), "--repeats", str(repeat), "--sim-runs", "200"]) == 2
        assert "are the same run" in capsys.readouterr().err
    # a baseline and the record log it was saved from; two baselines saved from one log
    log = tmp_path / "run.jsonl"
    log.write_text("".join(json.dumps(shipped_record(i)) + "\n" for i in range(3)), encoding="utf-8")
    saved, again = tmp_path / "saved.json", tmp_path / "again.json"
    for out in (saved, again):
        assert cli(["baseline", "save", str(log), "--out", str(out)]) == 0
    capsys.readouterr()
    for args in ([saved, "--repeats", log], [log, "--repeats", saved], [saved, "--repeats", again]):
        assert cli(["plan", *map(str, args), "--sim-runs", "200"]) == 2
        err = capsys.readouterr().err
        assert "are the same run" in err and "discordance of 0" in err
    other = tmp_path / "other.json"
    other.write_text(_run({f"c{i}": [True, i % 7 != 0] for i in range(100)}).dumps(), encoding="utf-8")
    assert cli(["plan", str(base), "--repeats", str(other), "--sim-runs", "200"]) == 0


@pytest.mark.parametrize("runs", ["100000000", "1000001", "99", "-5", "1e8"])
def test_sim_runs_out_of_bounds_is_a_usage_error(tmp_path: Path, runs: str, capsys: pytest.CaptureFixture[str]) -> None:
    base = tmp_path / "baseline.json"
    base.write_text(_run({f"c{i}": [True, i % 10 != 0] for i in range(100)}).dumps(), encoding="utf-8")
    with pytest.raises(SystemExit) as stopped:
        cli(["plan", str(base), "--sim-runs", runs])
    assert stopped.value.code == 2
    assert "--sim-runs: invalid _sim_runs value" not in (err := capsys.readouterr().err)
    assert f"a whole number from 100 to 1,000,000, got '{runs}'" in err
    with pytest.raises(ValueError, match="sim_runs must be from 100 to 1,000,000"):
        plan([_run({"a": [True, False]})], sim_runs=10**8)


@pytest.mark.parametrize(("other", "said"), [
    ({f"d{i}": [True] for i in range(6)}, "(5 cases only in *, 6 only in *)"),  # the issue's: other cases
    ({f"c{i}": [True] for i in range(5)}, "(5 labelled otherwise)"),  # the same cases, other labels
    ({f"c{i}": [True] for i in range(3)}, "(2 cases only in *)"),  # a part of the cases
])
def test_a_repeat_of_other_cases_or_labels_is_refused_naming_both_label_sets(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], other: dict[str, list[bool | None]], said: str) -> None:
    import fnmatch

    base, repeat = tmp_path / "base.json", tmp_path / "b.json"
    base.write_text(_run({f"c{i}": [True] for i in range(5)}).dumps(), encoding="utf-8")
    run = _run(other, label="h2" if "labelled" in said else "h")
    group = run.groups[0].model_copy(update={"label_set_fingerprint": "1" * 16})
    repeat.write_text(run.model_copy(update={"groups": [group]}).dumps(), encoding="utf-8")
    assert cli(["plan", str(base), "--repeats", str(repeat), "--sim-runs", "200"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert captured.out == "" and len(err.splitlines()) == 1, err
    assert fnmatch.fnmatch(err, f"tooleffect plan: {base} (label set {'0' * 16}) and {repeat} (label set {'1' * 16}) "
                                f"hold other decisions for fam · pol {said}: the discordance is measured on the same "
                                "cases under the same labels; give --repeats a run of the baseline's cases"), err


def test_a_repeat_of_the_same_cases_and_labels_is_pooled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, repeat = tmp_path / "base.json", tmp_path / "b.json"
    base.write_text(_run({f"c{i}": [True] for i in range(5)}).dumps(), encoding="utf-8")
    repeat.write_text(_run({f"c{i}": [i != 0, True] for i in range(5)}).dumps(), encoding="utf-8")  # 2 trials each
    assert cli(["plan", str(base), "--repeats", str(repeat), "--sim-runs", "200", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[-1]["measured"]["decisions"] == 5 and rows[-1]["measured"]["repeated"] == 5


def test_a_repeat_of_another_policy_under_the_baseline_s_name_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--repeats`` is another run of the same agent: a run whose records say another policy under the
    baseline's name (another agent) is refused naming both, not pooled as the agent's discordance."""
    base, repeat, same = tmp_path / "base.json", tmp_path / "b.json", tmp_path / "same.json"

    def saved(path: Path, verdicts: dict[str, list[bool | None]], identity: str) -> None:
        run = _run(verdicts)
        group = run.groups[0].model_copy(update={"policy_identity": identity})
        path.write_text(run.model_copy(update={"groups": [group]}).dumps(), encoding="utf-8")

    careful, hasty = "agent agent:decide (aaaaaaaaaaaaaaaa)", "agent agent_hasty:decide (bbbbbbbbbbbbbbbb)"
    saved(base, {f"c{i}": [True] for i in range(5)}, careful)
    saved(repeat, {f"c{i}": [i % 2 == 0] for i in range(5)}, hasty)
    assert cli(["plan", str(base), "--repeats", str(repeat), "--sim-runs", "200"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert f"{careful} in {base} but {hasty} in {repeat}: one policy name, two policies" in captured.err
    saved(same, {f"c{i}": [i != 0] for i in range(5)}, careful)  # the same agent run again: pooled
    assert cli(["plan", str(base), "--repeats", str(same), "--sim-runs", "200"]) == 0


def test_runs_of_two_agents_under_one_policy_name_are_refused(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    # --repeats is another run of the same agent: a run of another agent under the same name would make the
    # two agents' disagreement the unchanged agent's discordance (so would --costs price another agent)
    from tests.test_records import shipped_record

    def log(name: str, spec: str, digest: str) -> Path:
        path = tmp_path / name
        path.write_text("".join(json.dumps({**shipped_record(i), "policy_identity": {"spec": spec, "digest": digest}})
                                + "\n" for i in range(3)), encoding="utf-8")
        return path

    careful = log("a.jsonl", "agent agent:decide", "0fc871bdfbe67bf9")
    hasty = log("b.jsonl", "agent agent_hasty:decide", "c4c974ed5b37a95c")
    again = log("a2.jsonl", "agent agent:decide", "0fc871bdfbe67bf9")
    tuned = log("a3.jsonl", "agent agent:decide", "1111111111111111")  # the same callable, other settings
    saved = tmp_path / "a.json"
    assert cli(["baseline", "save", str(careful), "--out", str(saved)]) == 0
    capsys.readouterr()
    for args, first, second in (([hasty, "--repeats", careful], hasty, careful),
                                ([saved, "--repeats", hasty], saved, hasty),
                                ([careful, "--repeats", again, "--costs", hasty], careful, hasty)):
        assert cli(["plan", *map(str, args), "--sim-runs", "200"]) == 2
        captured = capsys.readouterr()
        err = [line for line in captured.err.splitlines() if "two policies" in line]
        assert captured.out == "" and len(err) == 1, captured.err
        said = "agent agent:decide (0fc871bdfbe67bf9)", "agent agent_hasty:decide (c4c974ed5b37a95c)"
        if first == hasty:
            said = said[::-1]
        assert err[0].startswith(f"tooleffect plan: policy replay: {said[0]} in {first} but {said[1]} in {second}: "
                                 "one policy name, two policies: the baseline, --repeats and --costs are runs of "
                                 "the same agent"), err[0]
    assert cli(["plan", str(careful), "--repeats", str(tuned), "--sim-runs", "200"]) == 2
    assert "agent agent:decide with other settings (1111111111111111)" in capsys.readouterr().err
    assert cli(["plan", str(saved), "--repeats", str(again), "--costs", str(careful), "--sim-runs", "200"]) == 0

