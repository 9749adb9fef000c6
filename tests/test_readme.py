"""The documentation's family, case, rules, policy and world examples are valid as written
(the README's quickstart runs in tests/test_packaging.py)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from pytest_tooleffect import Policy
from pytest_tooleffect.collect.cases import load_case_file, load_family
from pytest_tooleffect.oracle import RuleSet, score
from tests.conftest import REPO

DOCS = REPO / "docs"


def _yaml_blocks(*pages: str) -> list[str]:
    return [b for page in pages for b in re.findall(r"```yaml\n(.*?)```", (DOCS / page).read_text(), re.S)]


#: the pages whose YAML examples are checked here: the case format, and every page with a policy
BLOCKS = _yaml_blocks("case-format.md", "models.md", "agents.md", "sandboxes.md")


def test_readme_examples_load_and_score(tmp_path: Path) -> None:
    family = next(b for b in BLOCKS if b.startswith("# cases/<family>/family.yaml"))
    cases = next(b for b in BLOCKS if b.startswith("# cases/<family>/cases.yaml"))
    rules = next(b for b in BLOCKS if b.startswith("version: 1 "))
    policies = [b for b in BLOCKS if b.startswith("policies:")]
    fam_dir = tmp_path / "cases" / "scheduling"
    fam_dir.mkdir(parents=True)
    (fam_dir / "family.yaml").write_text(family)
    (fam_dir / "cases.yaml").write_text(cases)
    fam = load_family(fam_dir)  # its oracle line is commented out: no rules, every field unruled
    loaded, problems = load_case_file(fam_dir / "cases.yaml", fam)
    assert problems == [] and [c.id for c in loaded] == ["tsel-0142"]
    case = loaded[0]
    assert case.label is not None and case.label.label_class == "no_tool"
    v = score(case.recorded.model_dump() if case.recorded else None, case.label, fam.tools, fam.rules)
    assert v.kind == "tool_when_none_needed"  # read_thread is not in the set; nothing forbids it
    RuleSet.from_mapping(yaml.safe_load(rules), "docs rules")
    assert len(policies) >= 3  # models.md's named and keyed policies, agents.md's agent policy
    for block in policies:
        for p in yaml.safe_load(block)["policies"]:
            Policy.model_validate(p)


def test_readme_sandbox_example_is_a_valid_world_case() -> None:
    from pytest_tooleffect.collect.cases import validate_case
    from pytest_tooleffect.formats import Case

    block = next(b for b in BLOCKS if b.startswith("world:"))
    fam = load_family(REPO / "cases" / "scheduling")
    case = Case.model_validate({
        "id": "readme-world", "placement": {"step": 0, "run_length": 1, "bucket": "last"}, "source": "authored",
        "timezone": "Europe/Madrid", "messages": [{"role": "user", "content": "hi"}],
        "label": {"valid_actions": [{"tool": None}]}, **yaml.safe_load(block)})
    assert validate_case(case, fam) == []
    assert case.faults["calendar.create_event"].status == 503
    assert [e.describe() for e in case.forbidden_effects] == ["no event created"]


def _phony_targets() -> list[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8").replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith(".PHONY:"))
    return line.removeprefix(".PHONY:").split()


@pytest.mark.parametrize("target", _phony_targets())
def test_every_make_target_resolves_its_prerequisites(target: str) -> None:
    # make expands a rule's prerequisites as it reads the rule: a variable defined further down is
    # empty there, and `make TARGET` stops with "No rule to make target".  -n runs nothing.
    out = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
