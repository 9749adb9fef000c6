"""The pure catalog and label transforms of ``collect/perturb.py`` and the perturbation format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from pytest_tooleffect.collect.perturb import PerturbError, perturb, remove_valid_label
from pytest_tooleffect.collect.variants import load_pool
from pytest_tooleffect.formats import Action, Label, ToolSpec
from pytest_tooleffect.formats.perturb import PerturbationSpec

TOOLS = [ToolSpec(name=n, description=f"The most powerful and best {n} tool. Use it always for {n}.")
         for n in ("alpha", "beta", "gamma", "delta")]
POOL = [ToolSpec(name=f"pool_{i}", description=f"pool tool {i}") for i in range(50)]
LABEL = Label(valid_actions=[Action(tool="beta"), Action(tool="gamma")], forbidden_actions=[{"tool": "delta"}])


def spec(text: str | dict[str, object]) -> PerturbationSpec:
    return PerturbationSpec.model_validate(text)


def test_shuffle_is_seeded_always_moves_the_first_tool_and_keeps_the_label() -> None:
    seen = set()
    for cid in (f"c{i}" for i in range(30)):
        out = perturb(spec("shuffle"), "shuffle", None, cid, TOOLS, LABEL)
        assert out is not None and out.label is LABEL
        names = [t.name for t in out.tools]
        assert sorted(names) == sorted(t.name for t in TOOLS) and names[0] != "alpha"
        assert names == [t.name for t in perturb(spec("shuffle"), "shuffle", None, cid, TOOLS, LABEL).tools]
        seen.add(tuple(names))
    assert len(seen) > 3  # the case id seeds it: not one order for all
    assert perturb(spec("shuffle"), "shuffle", None, "c", TOOLS[:1], LABEL) is None  # one tool: no variant


def test_rename_gives_neutral_names_keeps_descriptions_and_maps_back() -> None:
    out = perturb(spec("rename"), "rename", None, "c1", TOOLS, LABEL)
    assert out is not None
    assert all(t.name.startswith("tool_") for t in out.tools)
    assert [t.description for t in out.tools] == [t.description for t in TOOLS]
    assert sorted(out.back.values()) == sorted(t.name for t in TOOLS)
    assert {out.back[t.name] for t in out.tools} == {t.name for t in TOOLS}
    assert out.label is LABEL  # kept in the original names: the calls are mapped back


def test_distractors_come_from_the_pool_chosen_and_too_small_a_pool_is_an_error() -> None:
    out = perturb(spec("distractors:7"), "distractors", None, "c1", TOOLS, LABEL, POOL)
    assert out is not None and len(out.tools) == 11 and len(out.added) == 7
    assert [t.name for t in out.tools[:4]] == [t.name for t in TOOLS] and out.label is LABEL
    near = [ToolSpec(name="beta_v2"), ToolSpec(name="alpha")]  # a near-miss, and a tool already offered
    same = perturb(spec("distractors:1/same-domain"), "distractors", None, "c1", TOOLS, LABEL, POOL, near)
    assert same is not None and same.added == ("beta_v2",)
    with pytest.raises(PerturbError, match="same-domain pool holds 1 tools not offered at the state, fewer than n = 2"):
        perturb(spec("distractors:2/same-domain"), "distractors", None, "c1", TOOLS, LABEL, POOL, near)


def test_remove_valid_keeps_the_other_alternatives_or_asks_or_refuses() -> None:
    out = perturb(spec("remove-valid"), "remove-valid", None, "c1", TOOLS, LABEL)
    assert out is not None and out.removed == ("beta",)
    assert [a.tool for a in out.label.valid_actions] == ["gamma"]  # the remaining alternative stays valid
    assert out.label.forbidden_actions == LABEL.forbidden_actions
    every = perturb(spec("remove-valid:all"), "remove-valid", None, "c1", TOOLS, LABEL)
    assert every is not None and every.removed == ("beta", "gamma")
    assert [(a.tool, a.reply) for a in every.label.valid_actions] == [(None, "refuse"), (None, "ask")]
    assert every.label.label_class == "no_tool"
    null_kept = remove_valid_label(Label(valid_actions=[Action(tool=None, reply="answer"), Action(tool="beta")]),
                                   {"beta"})
    assert [(a.tool, a.reply) for a in null_kept.valid_actions] == [(None, "answer")]
    nothing = Label(valid_actions=[Action(tool=None)])
    assert perturb(spec("remove-valid"), "remove-valid", None, "c1", TOOLS, nothing) is None


def test_a_family_overrides_the_derived_label_per_case() -> None:
    override = {"valid_actions": [{"tool": None, "reply": "ask"}]}
    s = spec({"kind": "remove-valid", "labels": {"c1": override}})
    out = perturb(s, "remove-valid", None, "c1", TOOLS, LABEL)
    assert out is not None and [(a.tool, a.reply) for a in out.label.valid_actions] == [(None, "ask")]
    other = perturb(s, "remove-valid", None, "c2", TOOLS, LABEL)
    assert other is not None and [a.tool for a in other.label.valid_actions] == ["gamma"]


def test_describe_rules() -> None:
    plain = perturb(spec("describe"), "describe", None, "c1", TOOLS, LABEL)
    assert plain is not None and plain.tools[0].description == "Alpha tool. Use it for alpha."
    first = perturb(spec("describe:first-sentence"), "describe", None, "c1", TOOLS, LABEL)
    assert first is not None and first.tools[1].description == "The most powerful and best beta tool."
    own = perturb(spec({"kind": "describe", "rule": "family", "rewrites": {"gamma": "Gamma, plainly."}}),
                  "describe", None, "c1", TOOLS, LABEL)
    assert own is not None and [t.description for t in own.tools][2:] == ["Gamma, plainly.", TOOLS[3].description]
    same = [ToolSpec(name="x", description="Reads a file.")]
    assert perturb(spec("describe"), "describe", None, "c1", same, LABEL) is None


def test_scale_keeps_the_label_tools_and_fills_from_the_pool() -> None:
    s = spec("scale:1/3/20")
    one = perturb(s, "scale-1", 1, "c1", TOOLS, LABEL, POOL)
    assert one is not None and [t.name for t in one.tools] == ["beta", "gamma"]  # the label needs both
    three = perturb(s, "scale-3", 3, "c1", TOOLS, LABEL, POOL)
    assert three is not None and len(three.tools) == 3 and {"beta", "gamma"} <= {t.name for t in three.tools}
    twenty = perturb(s, "scale-20", 20, "c1", TOOLS, LABEL, POOL)
    assert twenty is not None and len(twenty.tools) == 20 and len(twenty.added) == 16
    assert [t.name for t in twenty.tools[:4]] == [t.name for t in TOOLS]  # offered tools keep their order
    with pytest.raises(PerturbError, match="scale 60: the unrelated pool holds 50 tools .* 56 more are needed"):
        perturb(spec("scale:60"), "scale-60", 60, "c1", TOOLS, LABEL, POOL)


@pytest.mark.parametrize(("given", "message"), [
    ("juggle", "unknown perturbation 'juggle'"),
    ("scale:a/b", "'a/b' is not an argument scale takes"),
    ({"kind": "scale", "sizes": []}, "one or more distinct catalog sizes"),
    ({"kind": "describe", "rule": "family"}, "rule 'family' needs rewrites"),
    ({"kind": "shuffle", "labels": {"c": {}}}, "only remove-valid takes per-case labels"),
    ({"kind": "shuffle", "name": "a b"}, "letters, digits"),
    ({"kind": "shuffle", "bogus": 1}, "Extra inputs are not permitted"),
])
def test_a_bad_perturbation_says_what_is_wrong(given: object, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        PerturbationSpec.model_validate(given)


def test_variant_names() -> None:
    assert spec("scale:1/8").variants() == [("scale-1", 1), ("scale-8", 8)]
    assert spec({"kind": "shuffle", "name": "shuffle-7", "seed": 7}).variants() == [("shuffle-7", None)]


def test_a_pool_file_is_a_tool_list_or_bfcl_lines(tmp_path: Path) -> None:
    (tmp_path / "tools.json").write_text(json.dumps([{"name": "t1", "description": "one"}]))
    bfcl = {"id": "live_simple_0", "function": [{"name": "f.g", "description": "d", "parameters": {
        "type": "dict", "properties": {"x": {"type": "float"}, "xs": {"type": "tuple", "items": {"type": "float"}}}}}]}
    (tmp_path / "bfcl.json").write_text(json.dumps(bfcl) + "\n" + json.dumps(bfcl | {"id": "b"}) + "\n")
    tools = load_pool(tmp_path, ["tools.json", "bfcl.json"])
    assert [t.name for t in tools] == ["t1", "f.g", "f.g"]  # one name twice: the pool takes it once
    assert tools[1].parameters == {"type": "object", "properties": {
        "x": {"type": "number"}, "xs": {"type": "array", "items": {"type": "number"}}}}
    with pytest.raises(PerturbError, match=r"pool file .*missing.json: FileNotFoundError"):
        load_pool(tmp_path, ["missing.json"])
