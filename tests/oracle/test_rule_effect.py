"""No rule is silently ignored: a rule the rule language accepts takes effect, or is refused at load.

The property is drawn over the rule language (Hypothesis): a field of every schema type, a
comparator (or none), normalisers, an array order, ``numeric_strings``, a predicate, and where
the rule sits (the field itself, the items of an array of such fields, below a field compared
``any``).  A drawn rule is either refused (by the parser, or by the check against the tools'
schemas, naming the key and why) or every part of it is seen in the verdict: each part has a
signature, pairs of a label value and an emitted value that the part must accept or reject, and
the comparator and the compiled path must agree with it.  Every comparator x field type pair is
also checked exhaustively, without drawing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_tooleffect.collect.family import FamilyError, load_family
from pytest_tooleffect.oracle import CompareContext, RuleError, RuleSet, compare_args, compile_call
from pytest_tooleffect.oracle.rulecheck import rule_problems
from pytest_tooleffect.oracle.rules import COMPARES

CTX = CompareContext(timezone="Europe/Madrid")
TOOL = "t"

FIELDS: dict[str, dict[str, Any]] = {
    "string": {"type": "string"},
    "date-time": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    "enum": {"type": "string", "enum": ["Ab", "ab", "a-b", "b", "2025-03-19", "2025-03-19T10:00:00+01:00",
                                        "2025-03-19T10:00:00", "the meeting is booked for monday",
                                        "the meeting is booked"]},
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "boolean": {"type": "boolean"},
    "nullable-string": {"type": ["string", "null"]},
    "strings": {"type": "array", "items": {"type": "string"}},
    "integers": {"type": "array", "items": {"type": "integer"}},
    "objects": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
    "object": {"type": "object", "properties": {"k": {"type": "string"}}},
    "untyped": {},
}
#: One value of each type, the same on both sides: the comparators accept it (or fail on the type).
SAMPLE: dict[str, Any] = {
    "string": "2025-03-19T10:00:00+01:00", "date-time": "2025-03-19T10:00:00+01:00", "date": "2025-03-19",
    "enum": "Ab", "integer": 12, "number": 12.5, "boolean": True, "nullable-string": "2025-03-19",
    "strings": ["a", "b"], "integers": [1, 2], "objects": [{"k": "a"}], "object": {"k": "a"}, "untyped": "ab",
}
INSTANTS = [("2025-03-19T10:00:00+01:00", "2025-03-19T09:00:00Z", True),
            ("2025-03-19T10:00:00+01:00", "2025-03-19T10:00:00Z", False),
            ("2025-03-19T10:00:00", "2025-03-19T09:00:00Z", True)]  # naive: the user's zone
DATES = [("2025-03-19", "2025-03-19T23:00:00", True), ("2025-03-19", "2025-03-20", False),
         ("2025-03-19T10:00:00+01:00", "2025-03-19T22:00:00+01:00", True)]
# what each comparator means: (label value, emitted value, accepted); only pairs whose label
# value fits the field's schema are used (the label is validated against it)
COMPARE_SIGNATURE: dict[str | None, list[tuple[Any, Any, bool]]] = {
    "exact": [("Ab", "Ab", True), ("Ab", "ab", False), (12, 12.0, True), (12, 13, False), (True, 1, False),
              (["a", "b"], ["a", "b"], True), ([1, 2], [1, 2], True), (["Ab"], ["ab"], False), ([1, 2], [1, 3], False), ({"k": "a"}, {"k": "a"}, True),
              ({"k": "Ab"}, {"k": "ab"}, False), ([{"k": "a"}], [{"k": "a"}], True),
              ("2025-03-19T10:00:00+01:00", "2025-03-19T09:00:00Z", False)],
    "string": [("ab", "ab", True), ("2025-03-19T10:00:00+01:00", "2025-03-19T09:00:00Z", False), ("ab", 12, False)],
    "number": [(12, 12.0, True), (12, 13, False), (12.5, 12.5, True), (12, True, False)],
    "boolean": [(True, True, True), (True, False, False), (True, 1, False)],
    "date": DATES,
    "datetime": INSTANTS,
    "instant": INSTANTS,  # on one field it can only mean the date-time's instant: refused, never raw text
    "paired": [(["a", "b"], ["b", "a"], True), (["a", "b"], ["a", "c"], False)],
    "free_text": [("the meeting is booked for monday", "the meeting is booked for monday now", True),
                  ("the meeting is booked", "weather in lisbon", False)],
}
ORDER_PAIRS = [(["a", "b"], ["b", "a"]), ([1, 2], [2, 1]), ([{"k": "a"}, {"k": "b"}], [{"k": "b"}, {"k": "a"}])]
NORMALISE_PAIRS = {"casefold": ("Ab", "ab"), "strip": ("ab", " ab "), "strip_punctuation": ("a-b", "ab")}
#: predicates that reject every sample value (after the comparison has passed)
REJECTING = [{"pattern": "^zzz$"}, {"range": {"min": 1e9}}, {"superset": ["zzz"]},
             {"within": {"start": "2099-01-01T00:00:00+00:00", "end": "2099-01-02T00:00:00+00:00"}},
             {"in_messages": True}]
#: per predicate: an argument and the emitted values (of several types) it accepts with it; a
#: predicate that loads on a field must accept one of them that fits the field's schema
ACCEPTING: dict[str, tuple[Any, list[Any]]] = {
    "pattern": (".*", ["ab", "Ab", "2025-03-19T10:00:00+01:00"]),
    "range": ({"min": -1e9}, [12, 12.5]),
    "superset": ([], [["a", "b"], [1, 2], [{"k": "a"}]]),
    "within": ({"start": "2000-01-01T00:00:00+00:00"}, ["2025-03-19T10:00:00+01:00", "2025-03-19"]),
    # the value's text in the conversation: any type's, so one value of every field type
    "in_messages": (True, ["ab", *SAMPLE.values()]),
}
PRED_CTX = CompareContext(timezone="Europe/Madrid", messages=(
    {"role": "user", "content": " ".join(str(v) for v in ACCEPTING["in_messages"][1])},))


def _fits(value: Any, schema: dict[str, Any]) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def _tool(position: str, field: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The tool's parameters and the rule key for a rule at ``position`` on a field of type ``field``."""
    if position == "items":
        return {"type": "object", "properties": {"f": {"type": "array", "items": field}}}, f"{TOOL}.f[]"
    if position == "below-any":
        return {"type": "object", "properties": {"o": {"type": "object", "properties": {"f": field}}}}, f"{TOOL}.o.f"
    return {"type": "object", "properties": {"f": field}, "additionalProperties": False}, f"{TOOL}.f"


def _wrap(position: str, v: Any) -> dict[str, Any]:
    return {"f": [v]} if position == "items" else {"o": {"f": v}} if position == "below-any" else {"f": v}


def _load(rule: dict[str, Any], position: str, field: dict[str, Any]) -> RuleSet | str:
    """The rule set, or the refusal (asserted to name the key)."""
    params, key = _tool(position, field)
    fields = {key: rule}
    if position == "below-any":
        fields[f"{TOOL}.o"] = {"compare": "any"}
    try:
        rules = RuleSet.from_mapping({"version": 1, "fields": fields}, "rules.yaml")
    except RuleError as exc:
        assert f"rules.yaml: fields.{key}" in str(exc)
        return str(exc)
    problems = rule_problems(rules, {TOOL: params})
    if problems:
        assert {k for k, _ in problems} == {key}, problems
        assert all(reason for _, reason in problems)
        return "; ".join(reason for _, reason in problems)
    return rules


def _ok(rules: RuleSet, position: str, field: dict[str, Any], e: Any, g: Any, ctx: CompareContext = CTX) -> bool:
    params, _ = _tool(position, field)
    expected, got = _wrap(position, e), _wrap(position, g)
    slow = all(r.ok for r in compare_args(TOOL, params, expected, got, rules, ctx))
    plan = compile_call(TOOL, params, expected, rules)
    plan.compile()
    fast = all(r.ok for r in plan.run(got, ctx))
    assert slow == fast, (e, g)
    return slow


def _signature(rule: dict[str, Any], ftype: str) -> list[tuple[str, Any, Any, bool]]:
    """(part, label value, emitted value, accepted) for every part of ``rule`` on a ``ftype`` field."""
    field = FIELDS[ftype]
    compare, order, norm = rule.get("compare"), rule.get("order"), rule.get("normalise")
    out: list[tuple[str, Any, Any, bool]] = []
    for e, g, ok in COMPARE_SIGNATURE.get(compare, []):
        if compare == "number" and rule.get("numeric_strings"):
            continue
        if _fits(e, field):
            out.append((f"compare: {compare}", e, g, ok))
    if compare in ("any", "none") and not rule.get("predicates"):
        out += [(f"compare: {compare}", SAMPLE[ftype], wrong, True) for wrong in ("zz", 123, None)]
    for step in norm or ():
        e, g = NORMALISE_PAIRS[step]
        for e2, g2 in ((e, g), ([e], [g])):
            if _fits(e2, field):
                out.append((f"normalise: {step}", e2, g2, True))
    if order is not None:  # any: a multiset; ordered: item by item
        out += [(f"order: {order}", e, g, order == "any") for e, g in ORDER_PAIRS if _fits(e, field)]
    if rule.get("numeric_strings"):
        out += [("numeric_strings", e, g, True) for e, g in ((12, "12"), (12.5, "12.5")) if _fits(e, field)]
    if rule.get("predicates"):
        out.append(("predicates", SAMPLE[ftype], SAMPLE[ftype], False))
    return out


RULES = st.fixed_dictionaries({}, optional={
    "compare": st.sampled_from(sorted(COMPARES)),
    "normalise": st.lists(st.sampled_from(sorted(NORMALISE_PAIRS)), min_size=1, max_size=2, unique=True),
    "order": st.sampled_from(["any", "ordered"]),
    "numeric_strings": st.just(True),
    "predicates": st.sampled_from(REJECTING).map(lambda p: [p]),
})


def _holds(rule: dict[str, Any], ftype: str, position: str) -> None:
    field = FIELDS[ftype]
    loaded = _load(rule, position, field)
    if isinstance(loaded, str):
        return  # refused at load, naming the key and the reason
    if "predicates" in rule:  # a rejecting predicate hides what the other parts accept: check them without it
        # a predicate that loads on this field can accept some value of the field's type
        name = next(iter(rule["predicates"][0]))
        arg, values = ACCEPTING[name]
        alone = _load({"compare": "none", "predicates": [{name: arg}]}, position, field)
        assert not isinstance(alone, str), f"{name} on {ftype}: loads beside {rule}, refused alone: {alone}"
        fitting = [v for v in values if _fits(v, field)]
        assert any(_ok(alone, position, field, v, v, PRED_CTX) for v in fitting), (
            f"{name} on {ftype} ({position}) loads but accepts none of {fitting}: it would fail every call")
        rest = {k: v for k, v in rule.items() if k != "predicates"}
        if rest and rest.get("compare") not in ("any", "none"):
            assert not isinstance(_load(rest, position, field), str), f"{rule}: refused without its predicates only"
            _holds(rest, ftype, position)
        assert _ok(loaded, position, field, SAMPLE[ftype], SAMPLE[ftype]) is False, f"{rule} on {ftype}: predicates"
        return
    signature = _signature(rule, ftype)
    parts = {p for p, *_ in signature}
    for name in ("compare", "normalise", "order", "numeric_strings", "predicates"):
        if name in rule and not (name == "compare" and (rule[name] in ("any", "none") and "predicates" in rule
                                                        or rule[name] == "number" and rule.get("numeric_strings"))):
            # every part the rule states is seen in the verdict on some pair (compare: number under
            # numeric_strings is seen as numeric_strings: _signature leaves its own pairs out)
            assert any(p.startswith(name) for p in parts), f"{rule} on {ftype} ({position}): {name} is never seen"
    for part, e, g, ok in signature:
        assert _ok(loaded, position, field, e, g) is ok, f"{rule} on {ftype} ({position}): {part} on {e!r} / {g!r}"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rule=RULES, ftype=st.sampled_from(sorted(FIELDS)), position=st.sampled_from(["field", "items", "below-any"]))
def test_a_rule_takes_effect_or_is_refused_at_load(rule: dict[str, Any], ftype: str, position: str) -> None:
    _holds(rule, ftype, position)


@pytest.mark.parametrize("ftype", sorted(FIELDS))
@pytest.mark.parametrize("compare", [None, *sorted(COMPARES)])
def test_every_comparator_on_every_field_type(compare: str | None, ftype: str) -> None:
    rule = {} if compare is None else {"compare": compare}
    _holds(rule, ftype, "field")
    _holds(rule, ftype, "items")


ACCEPTED = [  # (rule, field type): each must load and take effect
    ({"compare": "date"}, "date-time"), ({"compare": "datetime"}, "string"), ({"compare": "string"}, "date-time"),
    ({"normalise": ["casefold"]}, "string"), ({"normalise": ["casefold"]}, "strings"),
    ({"compare": "string", "normalise": ["casefold"]}, "enum"), ({"order": "any"}, "objects"),
    ({"numeric_strings": True}, "integer"), ({"compare": "exact", "order": "any"}, "integers"),
    ({"compare": "any", "predicates": [{"pattern": "^zzz$"}]}, "string"), ({"compare": "free_text"}, "untyped"),
    ({"predicates": [{"range": {"min": 1e9}}]}, "integer"), ({"predicates": [{"superset": ["zzz"]}]}, "strings"),
    ({"predicates": [{"pattern": "^zzz$"}]}, "nullable-string"), ({"predicates": [{"range": {"min": 1e9}}]}, "untyped"),
    ({"predicates": [{"in_messages": True}]}, "integer"),
]
REFUSED = [  # (rule, field type, what the refusal says)
    ({"compare": "instant"}, "date-time", "compare: instant judges two fields together"),
    ({"compare": "paired"}, "strings", "compare: paired judges two fields together"),
    ({"compare": "string"}, "strings", "compare: string cannot judge an array field"),
    ({"compare": "number"}, "string", "compare: number cannot judge a string field"),
    ({"compare": "date"}, "object", "compare: date cannot judge an object field"),
    ({"normalise": ["casefold"]}, "date-time", "a date-time field is compared as an instant"),
    ({"normalise": ["casefold"]}, "enum", "an enum field is compared by membership"),
    ({"normalise": ["casefold"]}, "integers", "which are integers, not strings"),
    ({"normalise": ["casefold"]}, "boolean", "normalise is read on strings"),
    ({"compare": "date", "normalise": ["casefold"]}, "string", "normalise is not read by compare: date"),
    ({"order": "any"}, "string", "order is read on arrays"),
    ({"numeric_strings": True}, "string", "numeric_strings is read on number fields"),
    ({"predicates": [{"range": {"min": 1}}]}, "string", "predicate range reads an integer or a number; this is a "
                                                        "string field: it would fail every call"),
    ({"predicates": [{"superset": ["a"]}]}, "string", "predicate superset reads an array; this is a string field"),
    ({"predicates": [{"superset": ["a"]}]}, "object", "predicate superset reads an array; this is an object field"),
    ({"predicates": [{"pattern": "^a"}]}, "integer", "predicate pattern reads a string; this is an integer field"),
    ({"predicates": [{"pattern": "^a"}]}, "strings", "predicate pattern reads a string; this is an array field"),
    ({"predicates": [{"within": {"start": "2025-01-01T00:00:00Z"}}]}, "number",
     "predicate within reads a string; this is a number field"),
    ({"predicates": [{"range": {"min": 1}}]}, "boolean", "predicate range reads an integer or a number"),
]


@pytest.mark.parametrize(("rule", "ftype"), ACCEPTED)
def test_rules_that_take_effect_load(rule: dict[str, Any], ftype: str) -> None:
    assert isinstance(_load(rule, "field", FIELDS[ftype]), RuleSet)
    assert _signature(rule, ftype)
    _holds(rule, ftype, "field")


@pytest.mark.parametrize(("rule", "ftype", "reason"), REFUSED)
def test_rules_that_would_be_ignored_are_refused_with_the_reason(rule: dict[str, Any], ftype: str,
                                                                 reason: str) -> None:
    refused = _load(rule, "field", FIELDS[ftype])
    assert isinstance(refused, str) and reason in refused


def test_positions_the_comparator_never_reads_are_refused() -> None:
    params = {"type": "object", "additionalProperties": False, "properties": {
        "start": {"type": "string", "format": "date-time"}, "timezone": {"type": "string"},
        "o": {"type": "object", "properties": {"k": {"type": "string"}}},
        "xs": {"type": "array", "items": {"type": "string"}}, "n": {"type": "integer"}}}
    cases = {
        "t.titel": "the schema declares no field 'titel' at the top",
        "t.n.k": "n is an integer field: it has no field 'k'",
        "t.o.k": "o is compared any: the rules below it are never read",
        "t.start": "start is judged with timezone by the group rule start+timezone",
        "t.xs[]": "predicates judge a field, not the items of an array",
        "t.o[]": "o is an object field: '[]' names the items of an array",
        "t.xs[].k": "'[]' may only end a key",
    }
    fields: dict[str, Any] = {"t.start+timezone": {"compare": "instant"}, "t.o": {"compare": "any"},
                              "t.titel": {"normalise": ["casefold"]}, "t.n.k": {"compare": "exact"},
                              "t.o.k": {"compare": "exact"}, "t.start": {"compare": "string"},
                              "t.xs[]": {"predicates": [{"pattern": "^a"}]}, "t.o[]": {"compare": "exact"},
                              "t.xs[].k": {"compare": "exact"}}
    problems = dict(rule_problems(RuleSet.from_mapping({"fields": fields}), {"t": params}))
    for key, reason in cases.items():
        assert reason in problems.get(key, ""), (key, problems.get(key))
    assert "t.start+timezone" not in problems and "t.o" not in problems
    bad_group = rule_problems(RuleSet.from_mapping({"fields": {"t.n+xs": {"compare": "instant"},
                                                               "t.xs+nope": {"compare": "paired"}}}), {"t": params})
    assert bad_group == [("t.n+xs", "compare: instant reads a date-time string and a zone string; these are "
                                    "integer and array"),
                         ("t.xs+nope", "the schema declares no field 'nope' (declared: n, o, start, timezone, xs)")]
    with pytest.raises(RuleError, match=r"fields.t.start\+timezone: a group rule reads only compare; predicates"):
        RuleSet.from_mapping({"fields": {"t.start+timezone": {"compare": "instant", "predicates": [{"pattern": "a"}]}}})


def test_a_wildcard_rule_is_checked_on_every_tool_that_has_the_field() -> None:
    tools = {"a": {"type": "object", "properties": {"user_id": {"type": "string"}}},
             "b": {"type": "object", "properties": {"user_id": {"type": "integer"}}}}
    rules = RuleSet.from_mapping({"fields": {"*.user_id": {"normalise": ["casefold"]}, "*.nope": {"compare": "any"}}})
    assert rule_problems(rules, tools) == [
        ("*.nope", "no tool has a field 'nope' (tools: a, b)"),
        ("*.user_id", "in b: normalise is read on strings; this is an integer field"),
    ]


def test_a_family_whose_rule_would_be_ignored_does_not_load(tmp_path: Path) -> None:
    fam = tmp_path / "cases" / "f"
    fam.mkdir(parents=True)
    (tmp_path / "rules.yaml").write_text("version: 1\nfields:\n  make_event.start: {compare: instant}\n")
    (fam / "family.yaml").write_text(json.dumps({
        "name": "f", "oracle": "../../rules.yaml",
        "tools": [{"name": "make_event", "description": "d", "parameters": {
            "type": "object", "properties": {"start": {"type": "string", "format": "date-time"}}}}]}))
    with pytest.raises(FamilyError) as info:
        load_family(fam)
    message = str(info.value)
    assert str(fam / "family.yaml") in message and str(fam / "../../rules.yaml") in message
    assert "fields.make_event.start: compare: instant judges two fields together" in message
    assert "for one date-time field use compare: datetime" in message


def test_a_case_whose_own_tools_would_ignore_a_rule_is_invalid(tmp_path: Path) -> None:
    from pytest_tooleffect.collect.cases import load_case_file

    fam = tmp_path / "f"
    fam.mkdir()
    (fam / "rules.yaml").write_text("version: 1\nfields:\n  make_event.start: {compare: instant}\n")
    (fam / "family.yaml").write_text("name: f\noracle: rules.yaml\n")  # tools per case
    tool = {"name": "make_event", "description": "d",
            "parameters": {"type": "object", "properties": {"start": {"type": "string"}}}}
    case = {"id": "c1", "source": "authored", "placement": {"step": 0, "run_length": 1, "bucket": "last"},
            "messages": [{"role": "user", "content": "hi"}], "tools": [tool],
            "label": {"valid_actions": [{"tool": None}], "labelled_by": ["a"]}}
    (fam / "cases.jsonl").write_text(json.dumps(case) + "\n")
    cases, problems = load_case_file(fam / "cases.jsonl", load_family(fam))
    assert not cases and len(problems) == 1
    assert problems[0].case_id == "c1" and problems[0].field == "tools"
    assert "fields.make_event.start: compare: instant judges two fields together" in problems[0].message
