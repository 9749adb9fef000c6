"""Import the Berkeley Function Calling Leaderboard (BFCL v4) single-turn categories.

Source: ``ShishirPatil/gorilla`` ``berkeley-function-call-leaderboard/bfcl_eval/data/``
(Apache-2.0).  Files are JSON Lines despite their ``.json`` suffix: one entry per line,
``{"id", "question": [[messages]], "function": [specs]}``, and for the AST-scored categories a
``possible_answer/`` file with ``{"id", "ground_truth": [{fn: {param: [alternatives]}}]}``.

Mapping:

* each entry becomes one case with its own ``tools`` (BFCL's schema dialect mapped to JSON
  Schema: ``dict`` → ``object``, ``float`` → ``number``, ``tuple`` → ``array``, ``any`` → no
  type constraint; an ``enum`` written on an array constrains its items);
* ground truth with one call → one valid action; with several → one parallel group (BFCL matches
  parallel calls order-free with an exact count);
* each parameter's list of alternatives → ``{"$any_of": [...]}`` (one alternative → the value
  itself); ``""`` among them → ``{"$omitted": true}`` (the parameter may be left out);
  ``["", null]`` also allows an explicit ``null``; dict values carry their own alternatives,
  recursively;
* ``irrelevance`` and ``live_irrelevance`` entries → ``valid_actions: [{tool: null}]``.

The imported families have no recorded decisions: they are for live models, so they are written
outside ``cases/`` (default ``bfcl/``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_tooleffect.util.jsonl import json_lines, read_objects

__all__ = ["CATEGORIES", "bfcl_tool", "check_entry_ids", "convert_schema", "import_bfcl", "label_from_ground_truth",
           "omit_required_empty"]

#: Category → (data file, possible-answer file or None for "no call expected").
CATEGORIES: dict[str, tuple[str, str | None]] = {
    "simple": ("BFCL_v4_simple_python.json", "possible_answer/BFCL_v4_simple_python.json"),
    "multiple": ("BFCL_v4_multiple.json", "possible_answer/BFCL_v4_multiple.json"),
    "parallel": ("BFCL_v4_parallel.json", "possible_answer/BFCL_v4_parallel.json"),
    "parallel_multiple": ("BFCL_v4_parallel_multiple.json", "possible_answer/BFCL_v4_parallel_multiple.json"),
    "live_simple": ("BFCL_v4_live_simple.json", "possible_answer/BFCL_v4_live_simple.json"),
    "live_multiple": ("BFCL_v4_live_multiple.json", "possible_answer/BFCL_v4_live_multiple.json"),
    "live_parallel": ("BFCL_v4_live_parallel.json", "possible_answer/BFCL_v4_live_parallel.json"),
    "live_parallel_multiple": ("BFCL_v4_live_parallel_multiple.json",
                               "possible_answer/BFCL_v4_live_parallel_multiple.json"),
    "irrelevance": ("BFCL_v4_irrelevance.json", None),
    "live_irrelevance": ("BFCL_v4_live_irrelevance.json", None),
}

_TYPES = {"dict": "object", "float": "number", "tuple": "array", "integer": "integer", "string": "string",
          "boolean": "boolean", "array": "array", "number": "number", "object": "object"}


def convert_schema(schema: Any) -> Any:
    """BFCL's parameter dialect → JSON Schema, recursively (``any`` drops the type)."""
    if isinstance(schema, list):
        return [convert_schema(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type":
            if value == "any":
                continue
            out["type"] = _TYPES.get(value, value) if isinstance(value, str) else value
        elif key == "properties" and isinstance(value, Mapping):
            out["properties"] = {k: convert_schema(v) for k, v in value.items()}
        elif key == "items":
            out["items"] = convert_schema(value)
        else:
            out[key] = value
    if out.get("type") == "array" and "enum" in out:  # BFCL puts an array's item enum on the array
        items = dict(out.get("items") or {})
        items.setdefault("enum", out.pop("enum"))
        out["items"] = items
    return out


def bfcl_tool(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A BFCL function document as a tool (its schema converted by :func:`convert_schema`)."""
    params = convert_schema(spec.get("parameters") or {"type": "object", "properties": {}})
    params.setdefault("type", "object")
    params.setdefault("properties", {})
    return {"name": spec["name"], "description": spec.get("description", ""), "parameters": params}


def _value(alternatives: Any) -> Any:
    """BFCL alternatives for one value → a label value (``$any_of`` when there are several)."""
    if not isinstance(alternatives, list):
        return _nested(alternatives)
    alts: list[Any] = []
    for a in alternatives:
        if a == "":
            alts.append({"$omitted": True})
        else:
            alts.append(_nested(a))
    if len(alts) == 1 and not (isinstance(alts[0], dict) and alts[0].get("$omitted")):
        return alts[0]
    return {"$any_of": alts}


def _nested(value: Any) -> Any:
    if isinstance(value, Mapping):  # a dict value: each key holds its own alternatives
        return {k: _value(v) for k, v in value.items()}
    if isinstance(value, list):  # dicts inside a list carry their own alternatives too
        return [_nested(v) if isinstance(v, Mapping) else v for v in value]
    return value


def label_from_ground_truth(ground_truth: list[Mapping[str, Any]]) -> dict[str, Any]:
    """BFCL ``ground_truth`` → a label (one action, or one parallel group)."""
    actions = []
    for call in ground_truth:
        ((name, params),) = call.items()
        args = {}
        for p, alts in params.items():
            args[p] = _value(alts)
        actions.append({"tool": name, "args": args})
    if len(actions) == 1:
        return {"valid_actions": actions, "labelled_by": ["bfcl"]}
    return {"valid_actions": [{"parallel": actions, "order_matters": False}], "labelled_by": ["bfcl"]}


def omit_required_empty(label: dict[str, Any], tools: list[dict[str, Any]]) -> None:
    """BFCL lists ``""`` for some required parameters; a required argument cannot be omitted, so
    those alternatives are dropped (the call must carry the argument).
    """
    specs = {t["name"]: t for t in tools}
    groups = [a["parallel"] if "parallel" in a else [a] for a in label["valid_actions"]]
    for group in groups:
        for action in group:
            required = set((specs.get(action["tool"]) or {}).get("parameters", {}).get("required") or [])
            for key, value in list(action["args"].items()):
                if key in required and isinstance(value, dict) and "$any_of" in value:
                    kept = [a for a in value["$any_of"] if not (isinstance(a, dict) and a.get("$omitted"))]
                    action["args"][key] = kept[0] if len(kept) == 1 else {"$any_of": kept}


FAMILY = """\
# BFCL v4 {category}: imported by `tooleffect import bfcl` from the Berkeley Function Calling
# Leaderboard data (ShishirPatil/gorilla, Apache-2.0). Needs a live model: run with
#   pytest {out} --tooleffect-model=PROVIDER/MODEL
name: bfcl-{category}
description: BFCL v4 {category} entries; per-case tools; labels from possible_answer.
oracle: rules.yaml
licence: Apache-2.0 (BFCL data, ShishirPatil/gorilla)
"""

RULES = """\
# BFCL families: strings compare after NFKC, trimming and case-folding (BFCL also deletes
# punctuation and spaces; this oracle keeps them: see the README, "How we differ from BFCL").
defaults:
  string: {normalise: [nfkc, strip, casefold]}
"""


def check_entry_ids(data: Path, answers: bool = False) -> None:
    """Refuse a BFCL data file whose entries' ids could not be case ids: text that is not one (``../x``,
    a space, a ``/``) or an id given twice.  Lines that are not JSON objects, or lack a text ``id``,
    are left to the importer (it names them).

    Args:
        data: the data file, or its ``possible_answer`` file.
        answers: ``data`` is a ``possible_answer`` file: an id answered twice, even alike, is refused
            too (which answer is the ground truth?).

    Raises:
        ValueError: one line naming the file, the line and the id, ending ``nothing was imported``.
        OSError: the file cannot be read.
    """
    from pytest_tooleffect.formats import CASE_ID_SHAPE, is_case_id

    seen: dict[str, int] = {}
    for line, entry, why in json_lines(data):
        eid = entry.get("id") if why is None and isinstance(entry, dict) else None
        if not isinstance(eid, str):
            continue
        where = f"{data}: line {line}: entry id {eid!r}"
        if not is_case_id(eid):
            raise ValueError(f"{where} is not a case id ({CASE_ID_SHAPE}); nothing was imported")
        if eid in seen:
            which = "which answer is the ground truth?" if answers else "which entry is the case?"
            raise ValueError(f"{where} is given twice (lines {seen[eid]} and {line}): {which}; nothing was imported")
        seen[eid] = line


def import_bfcl(source: Path, out: Path, categories: list[str] | None = None) -> dict[str, Any]:
    """Write one family per category into ``out/<category>/``, or nothing.

    An entry whose ground truth violates its own function schema (an integer parameter answered
    ``"dontcare"``, a string answered ``false``) is not a case: it goes to
    ``out/<category>/rejected.json`` with the validation problems.  An entry the import cannot
    take at all (an id that is not a case id, such as one holding ``../``; an id given twice; no
    ground truth) refuses the whole import: every family is built in a folder of its own beside
    ``out`` first and moved into place only when all of them are whole, so a refused import
    writes nothing and leaves an earlier import as it was.

    Returns:
        Cases written (and rejected) per category.

    Raises:
        ValueError: an unknown category; an entry whose id is not a case id or was given before, an
            entry without an answer, an entry that is not a case (each one line, naming the file,
            the line and the id).
    """
    cats = categories or list(CATEGORIES)
    unknown = [c for c in cats if c not in CATEGORIES]
    if unknown:
        raise ValueError(f"unknown BFCL category {unknown[0]!r} (known: {', '.join(CATEGORIES)})")
    for category in cats:  # every id checked before anything is written
        data_file, answer_file = CATEGORIES[category]
        check_entry_ids(source / data_file)
        if answer_file is not None:
            check_entry_ids(source / answer_file, answers=True)
    anchor = next(p for p in (out, *out.parents) if p.exists() or p == Path(p.anchor))  # an existing folder
    staging = Path(tempfile.mkdtemp(prefix=".tooleffect-import-bfcl-", dir=anchor if anchor.is_dir() else None))
    try:
        counts = {category: _stage(source, staging / category, out / category, category) for category in cats}
        out.mkdir(parents=True, exist_ok=True)
        for category in cats:
            dest = out / category
            if dest.exists():  # an earlier import: replaced whole, never merged into
                dest.rename(staging / f"{category}.replaced")
            shutil.move(str(staging / category), str(dest))
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return counts


def _stage(source: Path, fam_dir: Path, final: Path, category: str) -> dict[str, int] | int:
    """Build one category's family in ``fam_dir`` (``final`` is where it will live: its family file says so).

    Raises:
        ValueError: as :func:`import_bfcl`.
    """
    from pydantic import ValidationError

    from pytest_tooleffect.collect.cases import load_family, validate_case
    from pytest_tooleffect.formats import CASE_ID_SHAPE, Case, is_case_id

    data_file, answer_file = CATEGORIES[category]
    answers: dict[Any, Any] = ({a.get("id"): a.get("ground_truth") for _, a in read_objects(source / answer_file)}
                               if answer_file else {})
    fam_dir.mkdir(parents=True)
    (fam_dir / "family.yaml").write_text(FAMILY.format(category=category, out=final), encoding="utf-8")
    (fam_dir / "rules.yaml").write_text(RULES, encoding="utf-8")
    family = load_family(fam_dir)
    n = 0
    rejected = []
    seen: dict[str, int] = {}
    data = source / data_file
    with open(fam_dir / "cases.jsonl", "w", encoding="utf-8") as fh:
        for line, entry in read_objects(data):
            eid = entry.get("id")
            where = f"{data}: line {line}: entry id {eid!r}"
            if not is_case_id(eid):
                raise ValueError(f"{where} is not a case id ({CASE_ID_SHAPE}); nothing was imported")
            assert isinstance(eid, str)
            if eid in seen:
                raise ValueError(f"{where} is given twice (lines {seen[eid]} and {line}): which entry is the "
                                 "case?; nothing was imported")
            seen[eid] = line
            try:
                tools = [bfcl_tool(f) for f in entry["function"]]
                if answer_file is None:
                    label: dict[str, Any] = {"valid_actions": [{"tool": None, "reason": "BFCL irrelevance: no "
                                                                                      "offered function applies"}],
                                             "labelled_by": ["bfcl"]}
                else:
                    if eid not in answers:
                        raise ValueError(f"{where}: no ground truth for it in {source / answer_file}; nothing was "
                                         "imported")
                    label = label_from_ground_truth(answers[eid])
                    omit_required_empty(label, tools)
                case = {
                    "id": eid,
                    "placement": {"step": 0, "run_length": 1, "bucket": "last"},
                    "messages": entry["question"][0],
                    "tools": tools,
                    "label": label,
                    "source": {"kind": "import", "dataset": f"bfcl/{data_file}", "trace_id": eid},
                }
                problems = validate_case(Case.model_validate(case), family)
            except ValidationError as exc:
                e = exc.errors()[0]
                field = ".".join(str(p) for p in e["loc"]) or "<case>"
                raise ValueError(f"{where}: not a case: {field}: {e['msg']}; nothing was imported") from None
            except (KeyError, IndexError, TypeError, AttributeError) as exc:
                raise ValueError(f"{where}: not a BFCL entry ({type(exc).__name__}: {exc}); nothing was "
                                 "imported") from None
            if problems:
                rejected.append({"id": eid, "problems": [f"{f}: {m}" for f, m in problems]})
                continue
            fh.write(json.dumps(case, ensure_ascii=False, sort_keys=True) + "\n")
            n += 1
    (fam_dir / "rejected.json").write_text(json.dumps(rejected, ensure_ascii=False, indent=1) + "\n",
                                            encoding="utf-8")
    return {"cases": n, "rejected": len(rejected)} if rejected else n
