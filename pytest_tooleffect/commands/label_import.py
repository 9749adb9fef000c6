"""``tooleffect label import``: a labelling file's labels copied into a case file.

Every label is checked as a run checks it before it is written: against the label format
(:class:`~pytest_tooleffect.formats.Label`) and, when the case file sits in a family folder, against
the family's tools (:func:`~pytest_tooleffect.collect.validation.validate_case`: a tool the family
does not offer, arguments its schema refuses, an action both valid and forbidden).  A label whose id
matches no case of the file is named, not dropped unsaid.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_tooleffect.util.display import shown

if TYPE_CHECKING:
    from pytest_tooleffect.collect.family import LoadedFamily

__all__ = ["import_labels"]

_KEEP = ("valid_actions", "forbidden_actions", "labelled_by", "notes")


def import_labels(args: argparse.Namespace) -> int:
    """Copy the labels of ``--labels`` into the case file ``args.files[0]`` (in place, or ``--out``).

    Args:
        args: the parsed ``tooleffect label import`` command line.

    Returns:
        The exit status: 0 when every label was written; 1 when a label is invalid or matches no case
        (each named on stderr, ``FILE: case ID: FIELD: message`` / ``N labels match no state: ID, …``; a
        label holding a key a label does not know, ``FILE: line N: case ID: FIELD: unknown key (did you
        mean 'forbidden_actions'?)``, is invalid and its case keeps the label it had;
        when no label is written, nothing is); 2 for a missing option or labelling file, or a
        ``.yaml`` output (import writes JSON Lines).

    Raises:
        ValueError: a case line that is not a case, or a labelling file that cannot be read (names
            the file and the line).
        OSError: a file that cannot be read or written.
        pytest_tooleffect.util.output_files.OutputPathError: ``--out`` would replace a file tooleffect
            did not write (without ``--force``).
    """
    from pytest_tooleffect.commands import check_command_outputs
    from pytest_tooleffect.commands.case_lines import YAML_SUFFIXES, not_files, read_case_lines
    from pytest_tooleffect.data.labelling import read_labels
    from pytest_tooleffect.util.output_files import write_text
    from pytest_tooleffect.util.own_outputs import CASE_FILE

    if not args.labels:
        print("tooleffect label import: --labels is required (the labelling file to read)", file=sys.stderr)
        return 2
    unreadable = not_files([args.labels])
    if unreadable:
        print(f"tooleffect label import: --labels {unreadable[0]}", file=sys.stderr)
        return 2
    target = Path(args.files[0])
    dest = Path(args.out or target)
    # the case file is written in place unless --out names another file; never over the labels it reads
    check_command_outputs([("--out" if args.out else "the case file", dest)],
                          [("the labelling file (--labels)", Path(args.labels))], families=False, own=[target],
                          kinds={"--out": CASE_FILE, "the case file": CASE_FILE})
    if dest.suffix.lower() in YAML_SUFFIXES:
        print(f"tooleffect label import: {'--out' if args.out else 'the case file'} {dest}: label import writes a "
              "JSON Lines case file (one case a line), which a .yaml name would make unreadable; give --out a "
              "path ending in .jsonl", file=sys.stderr)
        return 2
    invalid: dict[str, list[str]] = {}  # labels holding a key a label does not know: invalid, never dropped unsaid
    labels = read_labels(Path(args.labels), invalid)
    for lines in invalid.values():
        for line in lines:
            print(shown(line), file=sys.stderr)
    cases = read_case_lines(target)
    if args.out and not args.force:
        _check_import_out(dest, target, cases)
    family = _family_of(target)
    done, skipped, bad = 0, 0, 0
    out_lines = []
    for c in cases:
        lab = labels.get(str(c["id"]))
        if str(c["id"]) in invalid:  # named above; the case keeps the label it had
            bad += 1
        elif lab is not None and lab.get("valid_actions"):
            label = {k: v for k, v in lab.items() if k in _KEEP}
            problem = label_problem(c, label, family)
            if problem is not None:
                print(shown(f"{args.labels}: case {c['id']}: {problem}"), file=sys.stderr)
                bad += 1
            else:
                c["label"] = label
                done += 1
        else:
            skipped += 1
        out_lines.append(json.dumps(c, ensure_ascii=False, sort_keys=True))
    ids = {str(c["id"]) for c in cases}
    orphans = [i for i, lab in labels.items() if i not in ids and lab.get("valid_actions")]
    if orphans:
        print(shown(f"{args.labels}: {len(orphans)} label{'s' if len(orphans) > 1 else ''} "
                    f"match{'' if len(orphans) > 1 else 'es'} no state of {target}: {', '.join(orphans[:20])}"
                    + (f" (and {len(orphans) - 20} more)" if len(orphans) > 20 else "")), file=sys.stderr)
    tally = f"{done} labelled, {skipped} without a label, {bad} invalid" + (f", {len(orphans)} matching no state"
                                                                         if orphans else "")
    if (bad or orphans) and not done:  # no label to write: the case file would gain nothing
        print(f"tooleffect label import: {tally}: nothing written to {dest}", file=sys.stderr)
        return 1
    write_text(dest, "\n".join(out_lines) + "\n")
    print(f"tooleffect label import: {tally}")
    return 0 if not (bad or orphans) else 1


def _family_of(target: Path) -> LoadedFamily | None:
    """The family of the folder the case file is in (``None``: no family file there, or one that does
    not load, said on stderr: the labels are then checked against the label format only).
    """
    from pytest_tooleffect.collect.family import FamilyError, is_family_dir, load_family

    if not is_family_dir(target.parent):
        return None
    try:
        return load_family(target.parent)
    except FamilyError as exc:
        print(shown(f"tooleffect label import: {exc}; the labels are checked against the label format only, not "
                    "the family's tools"), file=sys.stderr)
        return None


def label_problem(case: Mapping[str, Any], label: Mapping[str, Any], family: LoadedFamily | None) -> str | None:
    """What makes ``label`` unusable on ``case``, as a run would refuse it; ``None`` when it is usable.

    Args:
        case: the case as its file holds it (a JSON object).
        label: the label to give it (``valid_actions``, ``forbidden_actions``, ``labelled_by``, ``notes``).
        family: the case file's family (its tools and rules), or ``None`` to check the format only.

    Returns:
        ``FIELD: message`` (``label.valid_actions[0].tool: unknown tool 'nosuch' (offered: …)``), or ``None``.
    """
    from pydantic import ValidationError

    from pytest_tooleffect.collect.family import error_location
    from pytest_tooleffect.collect.validation import validate_case
    from pytest_tooleffect.formats import Case, Label
    from pytest_tooleffect.util.known_keys import extra_key_message

    try:
        Label.model_validate(label)
    except ValidationError as exc:
        first = exc.errors()[0]
        return f"label.{error_location(first['loc'])}: {extra_key_message(Label, first)}"
    if family is None:
        return None
    try:
        labelled = Case.model_validate({**case, "label": label})
    except ValidationError:  # the case's own fields: a run names them; the label is not their cause
        return None
    problems = [(f, m) for f, m in validate_case(labelled, family) if f.startswith("label")]
    return None if not problems else f"{problems[0][0]}: {problems[0][1]}"


def _check_import_out(dest: Path, target: Path, cases: Sequence[dict[str, Any]]) -> None:
    """Refuse ``label import --out dest`` (without ``--force``) when ``dest`` is an existing file
    tooleffect did not write: neither one of its outputs (:func:`~pytest_tooleffect.util.own_outputs.is_own_output`)
    nor an earlier ``label import`` of ``target`` (a JSONL case file holding the same case ids).

    Raises:
        pytest_tooleffect.util.output_files.OutputPathError: one line naming ``--out``, the path and
            what writing there would do.
    """
    import os

    from pytest_tooleffect.commands.case_lines import read_case_lines
    from pytest_tooleffect.util.output_files import OutputPathError
    from pytest_tooleffect.util.own_outputs import is_own_output

    if not dest.is_file() or os.path.realpath(dest) == os.path.realpath(target) or is_own_output(dest):
        return
    try:
        earlier = {str(c["id"]) for c in read_case_lines(dest, ("id", "messages"))}
    except (OSError, ValueError, UnicodeDecodeError):
        earlier = set()
    if earlier and earlier == {str(c["id"]) for c in cases}:
        return
    raise OutputPathError(f"--out {dest}: exists and is not a file tooleffect writes (a record log, report, baseline, "
                          f"page, job summary, labels, or an earlier label import of {target}); writing --out there "
                          "would replace it; pass --force to replace it, or give --out a path of its own")
