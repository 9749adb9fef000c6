"""A compiled label call judges exactly as the comparator does.

``ArgsPlan`` looks acceptable values up by canonical form and counts failing fields without
writing reasons; the comparator (``compare_args``) is the reference.  Property-based: Hypothesis
draws schemas, rules, label values (``$any_of`` with ``$omitted``, null, close numbers, case
and width variants of strings, arrays) and emitted arguments, and every result must be the
comparator's, field for field.  Parallel turns: the failing-field count of the chosen
assignment is the minimum over every pairing (checked exhaustively).
"""

from __future__ import annotations

import itertools
import math
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_tooleffect.formats import Label, ToolSpec
from pytest_tooleffect.oracle import CompareContext, RuleSet, compare_args, compile_call, compile_label, score

# TOOLEFFECT_HYPOTHESIS_EXAMPLES=20000 runs a longer, random search (CI: 600, derandomised)
_EXAMPLES = os.environ.get("TOOLEFFECT_HYPOTHESIS_EXAMPLES")
SETTINGS = settings(max_examples=int(_EXAMPLES or 600), deadline=None, database=None, derandomize=not _EXAMPLES,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# small pools, so that label values and emitted values often meet: equal, equal after
# normalisation, within tolerance, or of the wrong type
STRINGS = ["a", "A", " a ", "ａ", "b", "", "Straße", "STRASSE", "1"]
NUMBERS = [0, 1, 1.0, 1.0000000001, 2, 2.5, 10**30, float("inf")]
SCALARS = st.one_of(st.none(), st.booleans(), st.sampled_from(NUMBERS), st.sampled_from(STRINGS))
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=3), st.dictionaries(st.sampled_from(["u", "v"]), SCALARS,
                                                                            max_size=2))


def _variants(value: Any) -> list[Any]:
    """Values the comparator may or may not accept for ``value``: case, width, spacing, tolerance."""
    if isinstance(value, str):
        return [value, value.upper(), f" {value} ", value.replace("a", "ａ"), value + "x"]
    if isinstance(value, bool) or value is None:
        return [value, not value, 0, 1]
    if isinstance(value, (int, float)):
        out = [value, float(value) if value == value and abs(value) < 1e300 else value, str(value)]
        if isinstance(value, float) and value == value and abs(value) < 1e300:
            out.append(value * (1 + 1e-12))
        return out
    if isinstance(value, list):
        return [value, value[::-1], value[:-1], [_variants(x)[1] for x in value]]
    return [value]

SCALAR_SCHEMAS = st.one_of(
    st.just({"type": "string"}),
    st.builds(lambda e: {"type": "string", "enum": e}, st.lists(st.sampled_from(STRINGS), min_size=1, max_size=4,
                                                                  unique=True)),
    st.builds(lambda e: {"enum": e}, st.lists(st.sampled_from([True, False, 0, 1, 1.0, 2, "1"]), min_size=1,
                                               max_size=4, unique_by=lambda v: (type(v), v))),
    st.just({"type": "number"}),
    st.just({"type": "integer"}),
    st.just({"type": "boolean"}),
    st.just({"type": ["string", "null"]}),
    st.just({"type": "string", "format": "date"}),
    st.just({}),
)


def _with_default(schema: dict[str, Any], default: Any) -> dict[str, Any]:
    return schema if default is _NONE else {**schema, "default": default}


_NONE = object()
FIELD_SCHEMAS = st.one_of(
    st.builds(_with_default, SCALAR_SCHEMAS, st.one_of(st.just(_NONE), SCALARS)),
    st.builds(lambda items: {"type": "array", "items": items}, SCALAR_SCHEMAS),
    st.builds(lambda props: {"type": "object", "properties": props},
              st.dictionaries(st.sampled_from(["u", "v"]), SCALAR_SCHEMAS, max_size=2)),
)
KEYS = ["p", "q", "r"]


@st.composite
def tool_schemas(draw: st.DrawFn) -> dict[str, Any]:
    props = draw(st.dictionaries(st.sampled_from(KEYS), FIELD_SCHEMAS, min_size=1, max_size=3))
    schema: dict[str, Any] = {"type": "object", "properties": props,
                              "required": draw(st.lists(st.sampled_from(sorted(props)), unique=True))}
    if draw(st.booleans()):
        schema["additionalProperties"] = True
    return schema


def _alternatives(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    alts = st.lists(st.one_of(values, st.just({"$omitted": True})), min_size=1, max_size=4)
    return st.one_of(values, st.builds(lambda a: {"$any_of": a}, alts))


@st.composite
def label_args(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    keys = draw(st.lists(st.sampled_from([*schema["properties"], "zz"]), unique=True))
    return {k: draw(_alternatives(VALUES)) for k in keys}


@st.composite
def emitted_args(draw: st.DrawFn, schema: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    """Mostly values taken from the label's alternatives (so matches happen), some fresh ones."""
    out = {}
    for key in draw(st.lists(st.sampled_from([*schema["properties"], "zz"]), unique=True)):
        e = expected.get(key)
        pool = e["$any_of"] if isinstance(e, dict) and "$any_of" in e else [e]
        taken = [v for v in pool if not (isinstance(v, dict) and "$omitted" in v)]
        if taken and draw(st.integers(0, 3)):
            out[key] = draw(st.sampled_from(_variants(draw(st.sampled_from(taken)))))
        else:
            out[key] = draw(VALUES)
    return out


RULES = st.sampled_from([
    RuleSet(),
    RuleSet.from_mapping({"defaults": {"string": {"normalise": ["nfkc", "strip", "casefold"]}}}),
    RuleSet.from_mapping({"fields": {"t.p": {"normalise": ["casefold"]}, "t.q": {"order": "any"},
                                     "t.r": {"compare": "exact"}}}),
    RuleSet.from_mapping({"fields": {"t.p[]": {"normalise": ["strip"]}, "*.q": {"normalise": ["nfkc"]}}}),
    RuleSet.from_mapping({"defaults": {"string": {"normalise": ["casefold"]}},
                          "fields": {"t.p": {"compare": "exact"}, "t.q": {"compare": "exact", "order": "any"}}}),
])


def _reference(schema: dict[str, Any], expected: dict[str, Any], got: dict[str, Any], rules: RuleSet) -> list[Any]:
    out = []
    for r in compare_args("t", schema, expected, got, rules):
        d = r.to_dict()
        d["path"] = f"t.{d['path']}"
        out.append(d)
    return out


@SETTINGS
@given(data=st.data(), rules=RULES)
def test_a_compiled_call_gives_the_comparators_results(data: st.DataObject, rules: RuleSet) -> None:
    schema = data.draw(tool_schemas())
    expected = data.draw(label_args(schema))
    plan = compile_call("t", schema, expected, rules).compile()
    for _ in range(3):
        got = data.draw(emitted_args(schema, expected))
        want = _reference(schema, expected, got, rules)
        assert [r.to_dict() for r in plan.run(got)] == want, (schema, expected, got)
        assert plan.failures(got) == sum(not r["ok"] for r in want), (schema, expected, got)


def test_the_first_use_goes_to_the_comparator_and_the_second_compiles() -> None:
    schema = {"type": "object", "properties": {"p": {"type": "string"}}}
    rules = RuleSet()
    plan = compile_call("t", schema, {"p": "a"}, rules)
    assert plan.run({"p": "a"})[0].ok and plan.keys is None
    assert plan.run({"p": "b"})[0].reason == "different string (compared raw: no rule)"
    assert plan.keys is not None and plan.keys[0].accept is not None


def test_an_omitted_alternative_takes_the_default_before_a_later_equal_value() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "default": 5}}}
    expected = {"n": {"$any_of": [{"$omitted": True}, 5]}}
    plan = compile_call("t", schema, expected, RuleSet()).compile()
    (r,) = plan.run({"n": 5})
    assert (r.ok, r.rule, r.expected, r.got) == (True, "label:$any_of", {"$omitted": True}, None)
    assert [x.to_dict() for x in plan.run({"n": 5})] == _reference(schema, expected, {"n": 5}, RuleSet())


def test_numbers_within_tolerance_are_left_to_the_comparator() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "number"}}}
    plan = compile_call("t", schema, {"x": 0.3}, RuleSet()).compile()
    (r,) = plan.run({"x": 0.1 + 0.2})  # not equal, within 1e-9 relative
    assert r.ok and r.rule == "schema:number"
    assert plan.failures({"x": 0.1 + 0.2}) == 0 and plan.failures({"x": 0.31}) == 1


def _call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "arguments": args}


@SETTINGS
@given(data=st.data())
def test_a_parallel_turn_is_matched_with_the_fewest_failing_fields(data: st.DataObject) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"},
                                               "c": {"type": "array", "items": {"type": "string"}}},
              "required": ["a"]}
    tools = [{"name": "f", "parameters": schema}]
    args = st.fixed_dictionaries({}, optional={"a": st.sampled_from(["x", "y", "z"]), "b": st.sampled_from([1, 2]),
                                               "c": st.lists(st.sampled_from(["x", "y"]), max_size=2)})
    n = data.draw(st.integers(2, 4))
    ordered = data.draw(st.booleans())
    required = [data.draw(args) for _ in range(n)]
    emitted = [data.draw(st.one_of(st.sampled_from(required), args)) for _ in range(n)]
    label = Label.model_validate({"valid_actions": [{"parallel": [{"tool": "f", "args": r} for r in required],
                                                     "order_matters": ordered}]})
    specs = [ToolSpec.model_validate(t) for t in tools]
    turn = {"tool_calls": [_call("f", **e) for e in emitted]}
    verdict = score(turn, label, specs)  # the first use: the comparator
    pairings = [tuple(range(n))] if ordered else itertools.permutations(range(n))
    fewest = min(sum(sum(not r.ok for r in compare_args("f", schema, required[j], emitted[i])) for i, j in
                     enumerate(perm)) for perm in pairings)
    assert verdict.kind == ("ok" if fewest == 0 else "right_tool_wrong_args")
    assert len(verdict.failing_fields) == fewest
    # compiled as the plugin compiles a loaded case: the same verdict
    compile_label(label, specs)
    assert score(turn, label, specs).to_dict() == verdict.to_dict()


def test_a_label_compiled_at_load_scores_like_a_fresh_one() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
              "required": ["city"]}
    specs = [ToolSpec.model_validate({"name": "w", "parameters": schema})]
    doc = {"valid_actions": [{"tool": "w", "args": {"city": {"$any_of": ["Paris", "Lyon"]}, "days": 3}}]}
    rules = RuleSet.from_mapping({"defaults": {"string": {"normalise": ["casefold"]}}})
    label = Label.model_validate(doc)
    compile_label(label, specs, rules)
    turns = [{"tool_calls": [_call("w", city="paris", days=3)]}, {"tool_calls": [_call("w", days=3)]},
             {"tool_calls": [_call("w", city=4, days="3")]}, {"tool_calls": [_call("w", city="Lyon", extra=1)]}]
    for turn in turns:
        assert score(turn, label, specs, rules).to_dict() == score(turn, Label.model_validate(doc), specs,
                                                                   rules).to_dict()
    # the compiled form is built: every call is looked up from the first decision on
    (alt,) = label.__pydantic_private__["_oracle"].alternatives
    assert alt.plans[0][0][2].keys is not None


def test_an_earlier_alternative_within_tolerance_keeps_its_place() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "number"}}}
    expected = {"x": {"$any_of": [1.0000000001, 1]}}  # 1 is within 1e-9 of the first alternative
    plan = compile_call("t", schema, expected, RuleSet()).compile()
    (r,) = plan.run({"x": 1})
    assert (r.ok, r.expected) == (True, 1.0000000001)
    assert [x.to_dict() for x in plan.run({"x": 1})] == _reference(schema, expected, {"x": 1}, RuleSet())


def test_a_fraction_for_an_integer_fails_even_when_the_label_holds_it() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    plan = compile_call("t", schema, {"n": 2.5}, RuleSet()).compile()
    (r,) = plan.run({"n": 2.5})
    assert (r.ok, r.reason) == (False, "not an integer")
    assert plan.failures({"n": 2.5}) == 1


def test_the_first_equal_alternative_is_the_one_reported() -> None:
    schema = {"type": "object", "properties": {"s": {"type": "string"}}}
    rules = RuleSet.from_mapping({"defaults": {"string": {"normalise": ["casefold"]}}})
    expected = {"s": {"$any_of": ["Oslo", "OSLO"]}}
    plan = compile_call("t", schema, expected, rules).compile()
    assert plan.run({"s": "OSLO"})[0].expected == "Oslo"
    assert [x.to_dict() for x in plan.run({"s": "OSLO"})] == _reference(schema, expected, {"s": "OSLO"}, rules)


def test_the_default_counts_as_omitted_when_failing_fields_are_counted() -> None:
    schema = {"type": "object", "properties": {"u": {"type": "string", "default": "celsius"}}}
    expected = {"u": {"$any_of": [{"$omitted": True}, "kelvin"]}}
    plan = compile_call("t", schema, expected, RuleSet()).compile()
    assert plan.failures({"u": "celsius"}) == 0 == sum(not r.ok for r in plan.run({"u": "celsius"}))
    assert plan.failures({"u": "fahrenheit"}) == 1


def test_an_array_fails_once_per_differing_item_or_once_when_its_length_differs() -> None:
    schema = {"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "string"}}}}
    plan = compile_call("t", schema, {"xs": {"$any_of": [["a", "b", "c"], ["c"]]}}, RuleSet()).compile()
    for got, n in ((["a", "x", "y"], 2), (["a", "b"], 1), ("abc", 1), (["a", "b", "c"], 0), (["c"], 0)):
        assert plan.failures({"xs": got}) == n == sum(not r.ok for r in plan.run({"xs": got})), got


def test_items_that_are_not_plain_json_values_are_counted_by_the_comparator() -> None:
    # a str subclass (a StrEnum member, say) equals its text for the comparator; the count of
    # failing fields that costs an ordered parallel group must say the same as the results
    class Tag(str):
        pass

    schema = {"type": "object", "properties": {"r": {"type": "array", "items": {"type": "string"}}}}
    tools = [{"name": "t", "parameters": schema}]
    label = {"valid_actions": [{"order_matters": True, "parallel": [
        {"tool": "t", "args": {"r": {"$any_of": [["x"], ["b", "b"]]}}}, {"tool": "t", "args": {"r": ["c"]}}]}]}
    turn = {"tool_calls": [{"name": "t", "arguments": {"r": [Tag("b"), Tag("b")]}},
                           {"name": "t", "arguments": {"r": ["c"]}}]}
    from pytest_tooleffect.formats import Label

    scored = Label.model_validate(label)
    assert [score(turn, scored, tools).kind for _ in range(3)] == ["ok", "ok", "ok"]
    plan = compile_call("t", schema, {"r": {"$any_of": [["x"], ["b", "b"]]}}, RuleSet()).compile()
    assert plan.failures({"r": [Tag("b"), Tag("b")]}) == 0


def test_an_enum_that_is_not_a_list_is_left_to_the_comparator() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "enum": 5}}}
    plan = compile_call("t", schema, {"a": None}, RuleSet()).compile()
    assert plan.keys is not None and plan.keys[0].accept is None
    assert [r.to_dict() for r in plan.run({"a": None})] == _reference(schema, {"a": None}, {"a": None}, RuleSet())


def _mail_case() -> tuple[Label, list[ToolSpec], RuleSet, dict[str, Any]]:
    rules = RuleSet.from_mapping({"fields": {"mail.body": {"compare": "free_text"}}})
    spec = ToolSpec(name="mail", parameters={"type": "object", "properties": {
        "to": {"type": "string"}, "body": {"type": "string"}}})
    label = Label.model_validate({"valid_actions": [{"parallel": [
        {"tool": "mail", "args": {"to": t, "body": f"hi {t}"}} for t in "abc"]}]})
    turn = {"tool_calls": [_call("mail", to=t, body=f"hello {t}") for t in "cab"]}
    return label, [spec], rules, turn


def test_a_compiled_parallel_turn_asks_the_judge_no_more_than_a_fresh_one() -> None:
    label, specs, rules, turn = _mail_case()
    asked: list[tuple[Any, Any]] = []

    def judge(rubric: str | None, expected: Any, got: Any) -> tuple[bool, str]:
        asked.append((expected, got))
        return expected.split()[-1] == got.split()[-1], "another person"

    ctx = CompareContext(judge=judge)
    fresh = score(turn, label.model_copy(deep=True), specs, rules, ctx)
    fresh_asks = len(asked)
    compile_label(label, specs, rules)
    asked.clear()
    compiled = score(turn, label, specs, rules, ctx)
    assert compiled.to_dict() == fresh.to_dict() and compiled.kind == "ok"
    assert len(asked) == fresh_asks  # each pair judged once, as without compiling


def test_a_judge_that_changes_its_mind_cannot_make_a_turn_ok_with_failing_fields() -> None:
    label, specs, rules, turn = _mail_case()
    seen: dict[tuple[Any, Any], int] = {}

    def judge(rubric: str | None, expected: Any, got: Any) -> tuple[bool, str]:
        seen[(expected, got)] = seen.get((expected, got), 0) + 1
        return seen[(expected, got)] == 1, "asked again"  # passes a text once only

    compile_label(label, specs, rules)
    for _ in range(3):
        v = score(turn, label, specs, rules, CompareContext(judge=judge))
        assert (v.kind == "ok") == (not v.failing_fields)


def test_specs_that_compare_equal_but_differ_are_not_taken_for_the_kept_ones() -> None:
    a = ToolSpec(name="f", parameters={"type": "object", "properties": {"n": {"type": "integer", "default": 0}}})
    b = ToolSpec(name="f", parameters={"type": "object", "properties": {"n": {"type": "integer", "default": False}}})
    assert a == b  # pydantic equality: 0 == False
    doc = {"valid_actions": [{"tool": "f", "args": {"n": 0}}]}
    turn = {"tool_calls": [_call("f")]}
    label = Label.model_validate(doc)
    assert score(turn, label, [a]).kind == "ok"
    assert score(turn, label, [b]).kind == score(turn, Label.model_validate(doc), [b]).kind == "right_tool_wrong_args"


def test_a_negative_zero_is_reported_as_emitted() -> None:
    schema = {"type": "object", "properties": {"x": {"type": "number"}}}
    plan = compile_call("t", schema, {"x": 0.0}, RuleSet()).compile()
    (r,) = plan.run({"x": -0.0})
    assert r.ok and math.copysign(1.0, r.got) == -1.0


def test_compile_label_leaves_a_call_it_cannot_compile_to_scoring() -> None:
    f = ToolSpec(name="f", parameters={"type": "object", "properties": {"a": {"type": "string"}}})
    g = ToolSpec(name="g", parameters={"type": "object", "properties": {
        "xs": {"type": "array", "items": {"type": "object", "required": 5}}}})  # an item schema that cannot be read
    doc = {"valid_actions": [{"tool": "f", "args": {"a": "x"}}, {"tool": "g", "args": {"xs": []}}]}
    label = Label.model_validate(doc)
    compile_label(label, [f, g])
    turn = {"tool_calls": [_call("f", a="x")]}
    assert score(turn, label, [f, g]).kind == score(turn, Label.model_validate(doc), [f, g]).kind == "ok"
    for lab in (label, Label.model_validate(doc)):  # a turn that reaches the call meets the error, compiled or not
        with pytest.raises(TypeError):
            score({"tool_calls": [_call("g", xs=[])]}, lab, [f, g])


def test_compile_label_needs_a_label_model() -> None:
    with pytest.raises(TypeError, match="needs a Label model"):
        compile_label({"valid_actions": [{"tool": None}]}, [])  # type: ignore[arg-type]
