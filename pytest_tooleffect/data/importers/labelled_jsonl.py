"""Import a labelled JSONL file in OpenAI message format as a case family.

Each line is one labelled state, as teams keep them next to their traces::

    {"id": "r1", "messages": [...OpenAI chat messages...], "tools": [...OpenAI tools...],
     "label": {"valid_actions": [{"tool": null}, {"tool": "get_weather", "args": {"city": "Oslo"}}],
               "forbidden_actions": ["delete_account"]},
     "recorded": {...the assistant message the agent sent there...}}

``id`` (default ``line<N>``), ``recorded`` (an assistant message; replayed offline) and
``placement`` (``{step, run_length, bucket}``) are optional.  Without ``placement`` the state's
step is the number of assistant turns before it and its bucket is ``unplaced`` (the file does
not say where the state sits in its run).  Tools are read as ``tooleffect sample`` reads a
trace's (:func:`~pytest_tooleffect.data.sampling.trace_tool`: the OpenAI wrapper unwrapped, BFCL's
schema dialect mapped): when every row offers the same tools they become the family's, else each
case keeps its own.  A system prompt shared by every row (its first message) becomes the
family's.  Every case is then checked as a run would check it; each problem names the file, the
line, the case id and the field, and the family is written all the same (the run lists the
invalid cases in its report).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_tooleffect.util.jsonl import json_lines

__all__ = ["IMPORT_LABELLED", "import_labelled_jsonl"]

#: the command as the family files it writes name it: running it again may replace them
IMPORT_LABELLED = "tooleffect import labelled-jsonl"

UNPLACED = "unplaced"


def _row_case(row: Mapping[str, Any], line: int) -> tuple[dict[str, Any], Any]:
    """A row → ``(case dict, its tools or None)``."""
    from pytest_tooleffect.collect.traces import recorded_from_message
    from pytest_tooleffect.data.sampling import trace_tool

    messages = list(row.get("messages") or [])
    step = sum(1 for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant")
    case: dict[str, Any] = {
        "id": str(row.get("id", f"line{line}")),
        "placement": row.get("placement") or {"step": step, "run_length": step + 1, "bucket": UNPLACED},
        "messages": messages,
        "label": row.get("label"),
        "source": {"kind": "import", "dataset": "labelled-jsonl", "position": line},
    }
    recorded = row.get("recorded")
    if isinstance(recorded, Mapping):
        case["recorded"] = recorded_from_message(dict(recorded)) if "role" in recorded else dict(recorded)
    for key in ("timezone", "state", "xfail"):
        if key in row:
            case[key] = row[key]
    tools = row.get("tools")
    return case, [trace_tool(t) for t in tools] if isinstance(tools, list) else None


def _repeated_tools(tools: Any) -> str | None:
    """The first tool name a row's tools list offers twice, or ``None``."""
    seen: set[str] = set()
    for t in tools or []:
        name = t.get("name") if isinstance(t, Mapping) else None
        if isinstance(name, str):
            if name in seen:
                return name
            seen.add(name)
    return None


def import_labelled_jsonl(path: Path, out: Path) -> tuple[dict[str, Any], list[str]]:
    """Write ``out/family.yaml`` and ``out/cases.jsonl`` from a labelled JSONL file; nothing when no
    row makes a valid case (the problems say why, and that nothing was written).

    Args:
        path: the JSONL file (one labelled state per line).
        out: the family folder (created; its name is the family's).

    Returns:
        ``(counts, problems)``: cases written, per class and how tools were kept (``out``: the
        folder written, ``None`` when nothing was); one line per problem (``file: line N: case ID: field: message``).

    Raises:
        OSError: the file cannot be read or the family written.
    """
    import yaml

    from pytest_tooleffect.collect.cases import load_case_file
    from pytest_tooleffect.collect.family import FamilyError, load_family

    rows: list[tuple[int, dict[str, Any]]] = []
    problems: list[str] = []
    for n, value, why in json_lines(path):
        if why is not None:
            problems.append(f"{path}: line {n}: {why}")
        elif not isinstance(value, dict) or not isinstance(value.get("messages"), list):
            problems.append(f"{path}: line {n}: messages: each line needs a list of OpenAI messages")
        else:
            rows.append((n, value))
    cases: list[tuple[dict[str, Any], Any]] = []
    tool_sets: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for n, row in rows:
        case, tools = _row_case(row, n)
        twice = _repeated_tools(tools)
        if twice:
            problems.append(f"{path}: line {n}: case {case['id']}: tools: the tool {twice!r} is offered twice "
                            "(a tool name is one tool); the row is left out")
            continue
        role = row["recorded"].get("role", "assistant") if isinstance(row.get("recorded"), Mapping) else "assistant"
        if role != "assistant":  # another turn (the user's, a tool's) replayed as the agent's decision
            problems.append(f"{path}: line {n}: case {case['id']}: recorded.role: {role!r}: the recorded decision "
                            "is the agent's own message (role assistant); the row is left out")
            continue
        cases.append((case, tools))
        lines[case["id"]] = n
        tool_sets.setdefault(json.dumps(tools, sort_keys=True), tools)
    shared_tools = next(iter(tool_sets.values())) if len(tool_sets) == 1 else None
    prompts = {json.dumps(c["messages"][0]) if c["messages"] and c["messages"][0].get("role") == "system" else None
               for c, _ in cases}
    prompt = None
    if len(prompts) == 1 and None not in prompts and cases:
        prompt = cases[0][0]["messages"][0].get("content")
        if isinstance(prompt, str):
            for c, _ in cases:
                c["messages"] = c["messages"][1:]
        else:
            prompt = None
    family: dict[str, Any] = {"name": out.name, "description": f"Labelled states imported from {path.name}."}
    if prompt:
        family["system_prompt"] = prompt
    family["tools"] = shared_tools or []
    # written and validated in a scratch folder first: when no row makes a valid case, nothing reaches
    # ``out`` (an earlier family there is kept as it was)
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tooleffect-import-") as scratch:
        staged = Path(scratch) / out.name
        staged.mkdir()
        (staged / "family.yaml").write_text(f"# Written by `{IMPORT_LABELLED}` from labelled rows.\n"
                                            + yaml.safe_dump(family, sort_keys=False, allow_unicode=True, width=110),
                                            encoding="utf-8")
        with open(staged / "cases.jsonl", "w", encoding="utf-8") as fh:
            for c, tools in cases:
                if shared_tools is None and tools is not None:
                    c["tools"] = tools
                fh.write(json.dumps(c, ensure_ascii=False, sort_keys=True) + "\n")
        try:
            loaded, found = load_case_file(staged / "cases.jsonl", load_family(staged)) if cases else ([], [])
        except FamilyError as exc:  # told of the input, never of the scratch folder (gone once this returns)
            problems.append(f"{path}: the family its rows make is not valid: "
                            f"{str(exc).replace(str(staged / 'family.yaml'), 'family.yaml')}")
            loaded, found = [], []
        for p in found:
            where = f"line {lines[p.case_id]}: " if p.case_id in lines else ""
            problems.append(f"{path}: {where}case {p.case_id}: {p.field}: {p.message}")
        if loaded:
            out.mkdir(parents=True, exist_ok=True)
            for name in ("family.yaml", "cases.jsonl"):
                shutil.copyfile(staged / name, out / name)
        else:
            problems.append(f"{path}: no row makes a valid case ({len(cases)} read as cases): nothing written to {out}")
    classes: dict[str, int] = {}
    for good in loaded:
        if good.label is not None:
            classes[good.label.label_class] = classes.get(good.label.label_class, 0) + 1
    counts = {"cases": len(cases), "valid": len(loaded), "classes": dict(sorted(classes.items())),
              "tools": "family" if shared_tools is not None else "per case", "out": str(out) if loaded else None}
    return counts, problems
