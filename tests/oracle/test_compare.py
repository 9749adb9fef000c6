"""Argument comparison, table-driven: one row per rule of DESIGN.md scoring rule 4."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_tooleffect.oracle import CompareContext, RuleError, RuleSet, compare_args

S = {"type": "string"}
N = {"type": "number"}
I = {"type": "integer"}  # noqa: E741
B = {"type": "boolean"}


def schema(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


# (id, schema, rules.fields, expected, got, ctx kwargs, ok)
ROWS: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any], dict[str, Any], bool]] = [
    ("raw string equal", schema(t=S), {}, {"t": "Q3 review"}, {"t": "Q3 review"}, {}, True),
    ("raw string differs in case", schema(t=S), {}, {"t": "Q3 review"}, {"t": "Q3 Review"}, {}, False),
    ("casefold rule", schema(t=S), {"f.t": {"normalise": ["nfkc", "casefold"]}},
     {"t": "Q3 review"}, {"t": "Q3 Review"}, {}, True),
    ("nfkc: full-width digits", schema(t=S), {"f.t": {"normalise": ["nfkc"]}}, {"t": "Q3"}, {"t": "Q３"}, {}, True),
    ("whitespace rule", schema(t=S), {"f.t": {"normalise": ["strip", "collapse_whitespace"]}},
     {"t": "a b"}, {"t": "  a   b "}, {}, True),
    ("int equals float by value", schema(x=N), {}, {"x": 12.0}, {"x": 12}, {}, True),
    ("different number", schema(x=N), {}, {"x": 10}, {"x": 999}, {}, False),
    ("bool is not a number", schema(x=N), {}, {"x": 1}, {"x": True}, {}, False),
    ("numeric string rejected by default", schema(x=N), {}, {"x": 12}, {"x": "12"}, {}, False),
    ("numeric string allowed by rule", schema(x=N), {"f.x": {"numeric_strings": True}}, {"x": 12}, {"x": "12"}, {}, True),
    ("integer given as 3.5", schema(x=I), {}, {"x": 3}, {"x": 3.5}, {}, False),
    ("boolean strict", schema(b=B), {}, {"b": True}, {"b": "true"}, {}, False),
    ("enum exact", schema(c={"type": "string", "enum": ["economy", "business"]}), {}, {"c": "economy"},
     {"c": "Economy"}, {}, False),
    ("enum equal", schema(c={"type": "string", "enum": ["economy", "business"]}), {}, {"c": "economy"},
     {"c": "economy"}, {}, True),
    ("boolean enum: 1 is not true", schema(b={"enum": [True, False]}), {}, {"b": True}, {"b": 1}, {}, False),
    ("number enum: true is not 1", schema(n={"enum": [1, 2]}), {}, {"n": 1}, {"n": True}, {}, False),
    ("number enum: 1.0 is 1", schema(n={"type": "number", "enum": [1, 2]}), {}, {"n": 1}, {"n": 1.0}, {}, True),
    ("nested enum member: true is not 1", schema(n={"enum": [[1], [2]]}), {}, {"n": [1]}, {"n": [True]}, {}, False),
    ("a default of true is not 1", schema(f={"type": "boolean", "default": True}), {},
     {"f": {"$any_of": [{"$omitted": True}]}}, {"f": 1}, {}, False),
    ("unruled value: true is not 1", schema(x={}), {}, {"x": 1}, {"x": True}, {}, False),
    ("date formats", schema(d={"type": "string", "format": "date"}), {}, {"d": "2024-05-01"},
     {"d": "2024-05-01T00:00:00"}, {}, True),
    ("date rule", schema(d=S), {"f.d": {"compare": "date"}}, {"d": "2024-05-01"}, {"d": "2024-05-02"}, {}, False),
    ("date-time same instant across offsets", schema(t={"type": "string", "format": "date-time"}), {},
     {"t": "2025-03-19T14:00:00+01:00"}, {"t": "2025-03-19T13:00:00Z"}, {}, True),
    ("naive time read in the user's zone", schema(t={"type": "string", "format": "date-time"}), {},
     {"t": "2025-03-19T14:00:00"}, {"t": "2025-03-19T13:00:00Z"}, {"timezone": "Europe/Madrid"}, True),
    ("UTC written for local time is an hour off", schema(t={"type": "string", "format": "date-time"}), {},
     {"t": "2025-03-19T14:00:00"}, {"t": "2025-03-19T14:00:00Z"}, {"timezone": "Europe/Madrid"}, False),
    ("naive vs zoned without a zone", schema(t={"type": "string", "format": "date-time"}), {},
     {"t": "2025-03-19T14:00:00"}, {"t": "2025-03-19T14:00:00Z"}, {}, False),
    ("instant composite", schema(at=S, tz=S), {"f.at+tz": {"compare": "instant"}},
     {"at": "2023-11-01T22:00:00", "tz": "Europe/Paris"}, {"at": "2023-11-01T21:00:00", "tz": "Europe/London"}, {},
     True),
    ("instant composite, wrong", schema(at=S, tz=S), {"f.at+tz": {"compare": "instant"}},
     {"at": "2023-11-01T22:00:00", "tz": "Europe/Paris"}, {"at": "2023-11-01T22:00:00", "tz": "Europe/London"}, {},
     False),
    ("ordered list", schema(xs={"type": "array", "items": S}), {}, {"xs": ["a", "b"]}, {"xs": ["b", "a"]}, {}, False),
    ("list as a set", schema(xs={"type": "array", "items": S}), {"f.xs": {"order": "any"}}, {"xs": ["a", "b"]},
     {"xs": ["b", "a"]}, {}, True),
    ("multiset keeps counts", schema(xs={"type": "array", "items": S}), {"f.xs": {"order": "any"}},
     {"xs": ["a", "a", "b"]}, {"xs": ["a", "b", "b"]}, {}, False),
    ("paired lists reordered together", schema(a={"type": "array", "items": S}, b={"type": "array", "items": S}),
     {"f.a+b": {"compare": "paired"}}, {"a": ["1", "2"], "b": ["x", "y"]}, {"a": ["2", "1"], "b": ["y", "x"]}, {},
     True),
    ("paired lists broken pairing", schema(a={"type": "array", "items": S}, b={"type": "array", "items": S}),
     {"f.a+b": {"compare": "paired"}}, {"a": ["1", "2"], "b": ["x", "y"]}, {"a": ["2", "1"], "b": ["x", "y"]}, {},
     False),
    ("nested object, rule by path", schema(p={"type": "object", "properties": {"name": S}}),
     {"f.p.name": {"normalise": ["casefold"]}}, {"p": {"name": "Ana"}}, {"p": {"name": "ANA"}}, {}, True),
    ("array of objects, rule into items", schema(ps={"type": "array", "items": {"type": "object",
                                                                                "properties": {"name": S}}}),
     {"f.ps.name": {"normalise": ["casefold"]}}, {"ps": [{"name": "Ana"}]}, {"ps": [{"name": "ANA"}]}, {}, True),
    ("invented nested key fails", schema(p={"type": "object", "properties": {"name": S}}), {},
     {"p": {"name": "Ana"}}, {"p": {"name": "Ana", "x": 1}}, {}, False),
    ("default filled on both sides", schema(n={"type": "integer", "default": 10}), {}, {}, {"n": 10}, {}, True),
    ("optional set to a non-default", schema(n={"type": "integer", "default": 10}), {}, {}, {"n": 5}, {}, False),
    ("optional the label leaves out, no default", schema(q=S), {}, {}, {"q": "x"}, {}, False),
    ("alternatives", schema(u={"type": "string"}), {}, {"u": {"$any_of": ["celsius", "C"]}}, {"u": "C"}, {}, True),
    ("alternatives: may be omitted", schema(u={"type": "string"}), {}, {"u": {"$any_of": ["celsius", {"$omitted": True}]}},
     {}, {}, True),
    ("alternatives: none match", schema(u={"type": "string"}), {}, {"u": {"$any_of": ["celsius"]}}, {"u": "K"}, {},
     False),
    ("any value", schema(note=S), {"f.note": {"compare": "any"}}, {}, {"note": "whatever"}, {}, True),
    ("within window", schema(t=S), {"f.t": {"compare": "none", "predicates": [
        {"within": {"start": "2025-03-19T09:00", "end": "2025-03-19T18:00"}}]}}, {},
     {"t": "2025-03-19T14:00:00+01:00"}, {"timezone": "Europe/Madrid"}, True),
    ("outside window", schema(t=S), {"f.t": {"compare": "none", "predicates": [
        {"within": {"start": "2025-03-19T09:00", "end": "2025-03-19T18:00"}}]}}, {},
     {"t": "2025-03-19T19:00:00+01:00"}, {"timezone": "Europe/Madrid"}, False),
    ("superset of attendees", schema(a={"type": "array", "items": S}), {"f.a": {"predicates": [
        {"superset": ["ana@x.org", "bo@x.org"]}]}}, {}, {"a": ["Bo@x.org", "ana@x.org", "cy@x.org"]}, {}, True),
    ("superset missing one", schema(a={"type": "array", "items": S}), {"f.a": {"predicates": [
        {"superset": ["ana@x.org", "bo@x.org"]}]}}, {}, {"a": ["ana@x.org"]}, {}, False),
    ("superset over objects and lists", schema(a={"type": "array"}), {"f.a": {"predicates": [
        {"superset": [{"k": 1}, [2]]}]}}, {}, {"a": [[2], {"k": 1}, "x"]}, {}, True),
    ("superset with an unhashable member missing", schema(a={"type": "array"}), {"f.a": {"predicates": [
        {"superset": ["ana"]}]}}, {}, {"a": [["ana"], {"x": 1}]}, {}, False),
    ("superset: true is not 1", schema(a={"type": "array"}), {"f.a": {"predicates": [{"superset": [True]}]}}, {},
     {"a": [1]}, {}, False),
    ("superset: 1.0 is 1, text loosely", schema(a={"type": "array"}), {"f.a": {"predicates": [
        {"superset": [1, {"k": "Ana"}]}]}}, {}, {"a": [1.0, {"k": " ana"}]}, {}, True),
    ("equals the state: true is not 1", schema(x={}), {"f.x": {"predicates": [{"equals_state": "on"}]}}, {},
     {"x": 1}, {"state": {"on": True}}, False),
    ("equals a value in the state", schema(tid=S), {"f.tid": {"predicates": [{"equals_state": "thread_id"}]}}, {},
     {"tid": "th-8831"}, {"state": {"thread_id": "th-8831"}}, True),
    ("differs from the value in the state", schema(tid=S), {"f.tid": {"predicates": [{"equals_state": "thread_id"}]}},
     {}, {"tid": "th-1"}, {"state": {"thread_id": "th-8831"}}, False),
    ("in messages", schema(uid=S), {"f.uid": {"predicates": [{"in_messages": True}]}}, {}, {"uid": "mia_li_3668"},
     {"messages": [{"role": "user", "content": "I am mia_li_3668"}]}, True),
    ("not in messages", schema(uid=S), {"f.uid": {"predicates": [{"in_messages": True}]}}, {}, {"uid": "bob_1"},
     {"messages": [{"role": "user", "content": "I am mia_li_3668"}]}, False),
    ("pattern", schema(code=S), {"f.code": {"predicates": [{"pattern": "[A-Z]{3}"}]}}, {}, {"code": "JFK"}, {}, True),
    ("range", schema(n=N), {"f.n": {"predicates": [{"range": {"min": 1, "max": 5}}]}}, {}, {"n": 9}, {}, False),
    ("value and predicate both", schema(n=N), {"f.n": {"predicates": [{"range": {"min": 1, "max": 5}}]}},
     {"n": 3}, {"n": 4}, {}, False),
]


@pytest.mark.parametrize(("sch", "fields", "expected", "got", "ctx", "ok"), [r[1:] for r in ROWS],
                         ids=[r[0] for r in ROWS])
def test_compare(sch: dict[str, Any], fields: dict[str, Any], expected: dict[str, Any], got: dict[str, Any],
                 ctx: dict[str, Any], ok: bool) -> None:
    rules = RuleSet.from_mapping({"fields": fields})
    results = compare_args("f", sch, expected, got, rules, CompareContext(**ctx))
    assert all(r.ok for r in results) is ok, [r.to_dict() for r in results]


def test_callable_predicate() -> None:
    def even(value: Any, ctx: CompareContext, mod: int = 2) -> tuple[bool, str]:
        return value % mod == 0, f"{value} is odd"

    rules = RuleSet.from_mapping({"fields": {"f.n": {"predicates": [{"callable": {"name": "even", "mod": 2}}]}}})
    ctx = CompareContext(predicates={"even": even})
    assert all(r.ok for r in compare_args("f", schema(n=I), {}, {"n": 4}, rules, ctx))
    bad = compare_args("f", schema(n=I), {}, {"n": 3}, rules, ctx)
    assert [r.reason for r in bad] == ["3 is odd"]
    with pytest.raises(LookupError, match="no predicate registered under 'even'"):
        compare_args("f", schema(n=I), {}, {"n": 4}, rules, CompareContext())  # configuration, not the agent


def test_instant_group_without_a_zone_field_uses_the_users_zone() -> None:
    rules = RuleSet.from_mapping({"fields": {"f.start+timezone": {"compare": "instant"}}})
    sch = schema(start={"type": "string"})
    ctx = CompareContext(timezone="Europe/Madrid")
    same = compare_args("f", sch, {"start": "2025-03-19T14:00:00"}, {"start": "2025-03-19T13:00:00Z"}, rules, ctx)
    assert all(r.ok for r in same)
    off = compare_args("f", sch, {"start": "2025-03-19T14:00:00"}, {"start": "2025-03-19T14:00:00Z"}, rules, ctx)
    assert not all(r.ok for r in off)


def test_free_text_fallback_is_approximate() -> None:
    rules = RuleSet.from_mapping({"fields": {"f.body": {"compare": "free_text", "threshold": 0.5}}})
    res = compare_args("f", schema(body=S), {"body": "Booked the Q3 review for Tuesday"},
                       {"body": "I booked the Q3 review on Tuesday"}, rules)
    assert res[0].ok and res[0].approximate
    res = compare_args("f", schema(body=S), {"body": "Booked the Q3 review for Tuesday"}, {"body": "No."}, rules)
    assert not res[0].ok and res[0].approximate


def test_unruled_fields_are_marked_raw() -> None:
    res = compare_args("f", schema(t=S, n=N), {"t": "a", "n": 1}, {"t": "a", "n": 1})
    rules = {r.path: r.rule for r in res}
    assert rules == {"t": "raw", "n": "schema:number"}
    ruled = compare_args("f", schema(t=S), {"t": "a"}, {"t": "a"},
                         RuleSet.from_mapping({"defaults": {"string": {"normalise": ["strip"]}}}))
    assert ruled[0].rule == "default:string"


def test_forbidden_subset_mode_judges_only_label_keys() -> None:
    res = compare_args("f", schema(a=S, b=S), {"a": "x"}, {"a": "x", "b": "y"}, subset=True)
    assert [r.path for r in res] == ["a"] and res[0].ok


@pytest.mark.parametrize(("doc", "message"), [
    ({"fields": {"f.x": {"compare": "fuzzy"}}}, "compare 'fuzzy'"),
    ({"fields": {"f.x": {"normalise": ["soundex"]}}}, "unknown normalisers"),
    ({"fields": {"f.x": {"predicates": [{"near": 1}]}}}, "each predicate"),
    ({"fields": {"f.x": {"colour": "red"}}}, "unknown rule keys"),
    ({"fields": {"f.a+b": {"compare": "string"}}}, "fields judged together"),
    ({"fields": {"x": {"compare": "any"}}}, "a rule key is 'tool.field'"),
    ({"rules": {}}, "unknown top-level keys"),
    ({"version": 99, "fields": {}}, r"version: 99 is not a version of the rule language this release reads \(1;"),
    ({"version": "1"}, "version: '1' is not a version"),
    ({"version": True}, "version: True is not a version"),
    ({"version": None, "fields": {"f.x": {"compare": "any"}}}, "version: None is not a version"),
    ({"fields": {"f.x": {"compare": "exact", "normalise": ["casefold"]}}}, "exact .* takes no normalise"),
    ({"fields": {"f.x": {"compare": "exact", "threshold": 0.5}}}, "threshold and rubric are read by compare: free_text"),
    ({"fields": {"f.x": {"rubric": "polite"}}}, "threshold and rubric are read by compare: free_text"),
    ({"fields": {"f.x": {"compare": "exact", "numeric_strings": True}}}, "numeric_strings is read by number fields"),
    ({"defaults": {"number": {"compare": "exact"}}}, r"defaults.number: a family default is string: \{normalise"),
    ({"defaults": {"string": {"compare": "exact"}}}, "defaults.string: a family default is string"),
])
def test_rule_errors_name_the_key(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(RuleError, match=message) as exc:
        RuleSet.from_mapping(doc, "oracle/demo.yaml")
    assert "oracle/demo.yaml" in str(exc.value)


def test_a_rules_file_of_version_1_or_none_given_loads() -> None:
    for doc in ({"version": 1, "fields": {"f.x": {"compare": "any"}}}, {"fields": {"f.x": {"compare": "any"}}}):
        assert RuleSet.from_mapping(doc, "oracle/demo.yaml").lookup("f", "x") is not None


def test_array_rule_normalise_applies_to_items() -> None:
    rules = RuleSet.from_mapping({"fields": {"f.xs": {"order": "any", "normalise": ["casefold"]}}})
    sch = schema(xs={"type": "array", "items": S})
    assert all(r.ok for r in compare_args("f", sch, {"xs": ["A@x.org", "b@x.org"]}, {"xs": ["B@X.org", "a@x.org"]},
                                          rules))
    item_key = RuleSet.from_mapping({"fields": {"f.xs": {"order": "any"}, "f.xs[]": {"normalise": ["casefold"]}}})
    assert all(r.ok for r in compare_args("f", sch, {"xs": ["A@x.org"]}, {"xs": ["a@X.org"]}, item_key))


def test_instants_in_a_dst_fold_and_gap() -> None:
    sch = schema(t={"type": "string", "format": "date-time"})
    ctx = CompareContext(timezone="Europe/Madrid")
    # 02:30 on 26 Oct 2025 happens twice in Madrid; fold=0 is 00:30Z
    assert all(r.ok for r in compare_args("f", sch, {"t": "2025-10-26T00:30:00Z"}, {"t": "2025-10-26T02:30:00"},
                                          ctx=ctx))
    assert all(r.ok for r in compare_args("f", sch, {"t": "2025-03-30T01:30:00Z"}, {"t": "2025-03-30T02:30:00"},
                                          ctx=ctx))


@pytest.mark.parametrize("text", ["2025-03-19T10:00 EST", "Monday 10am", "10:00", "March 5", "04/03/2025"])
def test_only_iso_date_times(text: str) -> None:
    sch = schema(t={"type": "string", "format": "date-time"})
    (res,) = compare_args("f", sch, {"t": "2025-03-19T10:00:00"}, {"t": text}, ctx=CompareContext(timezone="UTC"))
    assert not res.ok and "ISO 8601" in res.reason


def test_composite_absent_on_both_sides_is_not_judged() -> None:
    rules = RuleSet.from_mapping({"fields": {"f.at+tz": {"compare": "instant"}}})
    assert compare_args("f", schema(at=S, tz=S, x=S), {"x": "a"}, {"x": "a"}, rules)[0].path == "x"


def test_large_unordered_lists_are_matched_without_recursion() -> None:
    sch = schema(xs={"type": "array", "items": S}, os={"type": "array", "items": {
        "type": "object", "properties": {"k": S}}}, a={"type": "array", "items": S}, b={"type": "array", "items": S})
    rules = RuleSet.from_mapping({"fields": {"f.xs": {"order": "any"}, "f.os": {"order": "any"},
                                             "f.a+b": {"compare": "paired"}}})
    n = 2000
    e = {"xs": [f"v{i % 7}" for i in range(n)], "os": [{"k": "same"}] * 300,
         "a": ["x"] * n, "b": [str(i % 3) for i in range(n)]}
    g = {"xs": list(reversed(e["xs"])), "os": [{"k": "same"}] * 300, "a": ["x"] * n, "b": list(reversed(e["b"]))}
    assert all(r.ok for r in compare_args("f", sch, e, g, rules))
    g["xs"][0] = "other"
    assert not all(r.ok for r in compare_args("f", sch, e, g, rules))


def test_huge_integers_do_not_crash() -> None:
    (res,) = compare_args("f", schema(x=N), {"x": 0.5}, {"x": 10 ** 400})
    assert not res.ok


EXACT = RuleSet.from_mapping({
    "defaults": {"string": {"normalise": ["nfkc", "strip", "casefold"]}},
    "fields": {"f.x": {"compare": "exact"}, "f.xs": {"compare": "exact"}, "f.ys": {"compare": "exact", "order": "any"},
               "f.n": {"compare": "exact"}},
})
EXACT_SCHEMA = schema(x=S, xs={"type": "array", "items": S}, ys={"type": "array", "items": S}, n=N)


@pytest.mark.parametrize(("expected", "got", "ok"), [
    ({"x": "ABC"}, {"x": "ABC"}, True),
    ({"x": "ABC"}, {"x": "abc"}, False),  # the family's string default does not apply
    ({"x": "ABC"}, {"x": " ABC"}, False),
    ({"xs": ["ABC", "d"]}, {"xs": ["ABC", "d"]}, True),
    ({"xs": ["ABC", "d"]}, {"xs": ["abc", "d"]}, False),  # nor to the items of an ordered array
    ({"xs": ["ABC", "d"]}, {"xs": ["d", "ABC"]}, False),
    ({"ys": ["ABC", "d"]}, {"ys": ["d", "ABC"]}, True),
    ({"ys": ["ABC", "d"]}, {"ys": ["d", "abc"]}, False),  # nor to the items of a set
    ({"n": 2}, {"n": 2.0}, True),  # JSON equality: numbers by value
    ({"n": 1}, {"n": True}, False),
    ({"n": 1}, {"n": 1.0000000001}, False),  # no tolerance
])
def test_exact_compares_the_value_as_written(expected: dict[str, Any], got: dict[str, Any], ok: bool) -> None:
    results = compare_args("f", EXACT_SCHEMA, expected, got, EXACT)
    assert all(r.ok for r in results) is ok, [r.to_dict() for r in results]
    assert all(r.rule.startswith("rule:f.") for r in results if not r.ok)


def _deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("sch", [{}, {"enum": [1, 2]}, {"type": "array"}])
def test_a_deeply_nested_value_fails_the_field_without_crashing(sch: dict[str, Any]) -> None:
    results = compare_args("f", schema(x=sch), {"x": 1}, {"x": _deep(900)})
    assert [r.ok for r in results] == [False]


def test_deeply_nested_values_in_predicates_do_not_crash() -> None:
    rules = RuleSet.from_mapping({"fields": {"f.a": {"predicates": [{"superset": [1]}]},
                                             "f.s": {"predicates": [{"equals_state": "v"}]}}})
    results = compare_args("f", schema(a={"type": "array"}, s={}), {}, {"a": [_deep(900)], "s": _deep(900)}, rules,
                           CompareContext(state={"v": 1}))
    assert [r.ok for r in results] == [False, False]


OBJ = schema(x={"type": "object", "properties": {"n": S, "k": S, "m": {"type": "integer", "default": 3}}})
OBJ_RULES = RuleSet.from_mapping({"defaults": {"string": {"normalise": ["casefold"]}},
                                  "fields": {"f.x": {"compare": "exact"}}})


@pytest.mark.parametrize(("expected", "got", "ok"), [
    ({"x": {"n": {"$any_of": ["A", "B"]}}}, {"x": {"n": "B"}}, True),  # the label's alternatives inside
    ({"x": {"n": "A", "k": {"$any_of": [{"$omitted": True}, "K"]}}}, {"x": {"n": "A"}}, True),
    ({"x": {"n": "A"}}, {"x": {"n": "A", "m": 3}}, True),  # nested defaults filled in
    ({"x": {"n": "A"}}, {"x": {"n": "A", "z": 1}}, False),  # undeclared nested keys fail
    ({"x": {"n": "A"}}, {"x": {"n": "a"}}, True),  # an object's fields keep their own rules
])
def test_exact_on_an_object_judges_its_fields(expected: dict[str, Any], got: dict[str, Any], ok: bool) -> None:
    results = compare_args("f", OBJ, expected, got, OBJ_RULES)
    assert all(r.ok for r in results) is ok, [r.to_dict() for r in results]


@pytest.mark.parametrize("order", ["ordered", "any"])
def test_an_item_rule_wins_over_an_exact_array_in_either_order(order: str) -> None:
    rules = RuleSet.from_mapping({"fields": {"f.x": {"compare": "exact", "order": order},
                                             "f.x[]": {"normalise": ["casefold"]}}})
    results = compare_args("f", schema(x={"type": "array", "items": S}), {"x": ["A", "b"]}, {"x": ["a", "b"]}, rules)
    assert all(r.ok for r in results), [r.to_dict() for r in results]


def test_a_fields_rule_applies_to_its_column_in_a_paired_group() -> None:
    pair = schema(a={"type": "array", "items": S}, b={"type": "array", "items": S})
    expected, got = {"a": ["y", "x"], "b": ["2", "1"]}, {"a": ["X", "y"], "b": ["1", "2"]}
    exact = RuleSet.from_mapping({"defaults": {"string": {"normalise": ["casefold"]}},
                                  "fields": {"f.a": {"compare": "exact"}, "f.a+b": {"compare": "paired"}}})
    assert not all(r.ok for r in compare_args("f", pair, expected, got, exact))
    folded = RuleSet.from_mapping({"fields": {"f.a": {"normalise": ["casefold"]}, "f.a+b": {"compare": "paired"}}})
    assert all(r.ok for r in compare_args("f", pair, expected, got, folded))


def test_compare_string_items_take_the_string_default_in_any_order() -> None:
    arr = schema(x={"type": "array", "items": S})
    for order in ("ordered", "any"):
        rules = RuleSet.from_mapping({"defaults": {"string": {"normalise": ["casefold"]}},
                                      "fields": {"f.x[]": {"compare": "string"}, "f.x": {"order": order}}})
        got = ["p", "q"] if order == "ordered" else ["q", "p"]
        assert all(r.ok for r in compare_args("f", arr, {"x": ["P", "Q"]}, {"x": got}, rules)), order


def test_a_str_subclass_is_compared_by_its_text() -> None:
    class Tagged(str):
        def __str__(self) -> str:
            return "<tagged>"

    assert all(r.ok for r in compare_args("f", schema(c={"enum": ["a"]}), {"c": "a"}, {"c": Tagged("a")}))


def test_state_objects_compare_by_key_text() -> None:
    rules = RuleSet.from_mapping({"fields": {"f.o": {"predicates": [{"equals_state": "o"}]}}})
    results = compare_args("f", schema(o={}), {}, {"o": {"1": "a"}}, rules, CompareContext(state={"o": {1: "a"}}))
    assert all(r.ok for r in results)


@pytest.mark.parametrize("bad_default", [
    {"type": "string", "enum": ["fast", "slow"], "default": "normal"},     # an enum without its default
    {"type": "integer", "default": "none"},                                # a default of another type
    {"type": "string", "format": "date-time", "default": "now"},           # a date-time default that is no date-time
    {"type": "array", "items": {"type": "string"}, "default": None},       # null for an array
])
def test_a_default_that_breaks_its_own_schema_does_not_fail_an_identical_call(bad_default: dict[str, Any]) -> None:
    from pytest_tooleffect.formats import Label, ToolSpec
    from pytest_tooleffect.oracle import compile_label, score

    schema = {"type": "object", "properties": {"q": {"type": "string"}, "mode": bad_default}, "required": ["q"]}
    assert all(r.ok for r in compare_args("t", schema, {"q": "x"}, {"q": "x"})), \
        compare_args("t", schema, {"q": "x"}, {"q": "x"})
    tools = [ToolSpec.model_validate({"name": "t", "parameters": schema})]
    label = Label.model_validate({"valid_actions": [{"tool": "t", "args": {"q": "x"}}]})
    turn = {"tool_calls": [{"name": "t", "arguments": {"q": "x"}}]}
    assert score(turn, label, tools).kind == "ok"
    compile_label(label, tools)  # the compiled path decides the same
    assert score(turn, label, tools).kind == "ok"
    # an emitted value is still judged against the label's omission (the default stands for it)
    sent = {"tool_calls": [{"name": "t", "arguments": {"q": "x", "mode": "other"}}]}
    assert score(sent, label, tools).kind == "right_tool_wrong_args"


def test_a_predicate_still_judges_the_default_when_neither_side_sends_it() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "default": 30}}}
    rules = RuleSet.from_mapping({"fields": {"t.n": {"predicates": [{"range": {"min": 40}}]}}})
    assert [r.ok for r in compare_args("t", schema, {}, {}, rules)] == [False]
