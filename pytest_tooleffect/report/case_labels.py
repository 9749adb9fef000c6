"""Records read back checked against the cases they were made from (``--cases`` on ``report``, ``html``
and ``baseline save``).

A record's ``class`` follows its case's label; its ``label_hash`` is that label's digest
(:func:`~pytest_tooleffect.collect.cases.case_label_hash`).  Where the digest is the case's, the class
must be the label's: a record that says otherwise was edited, and is refused.  Where the digest differs,
the label changed since the run (or the record was edited): that is said, and the record's class is
taken as written.  A perturbed variant's record (``perturbation``) carries its variant's label and is
not compared; nor is a record whose family or case is not under the folder.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

__all__ = ["CaseLabels", "RecordLabel", "case_labels", "label_mismatches"]


class RecordLabel(NamedTuple):
    """What a record says of its case's label."""

    id: str
    family: str
    case_id: str
    label_class: str
    label_hash: str
    perturbed: bool


#: ``(family, case id)`` → ``(label hash, class)`` of each labelled case found
CaseLabels = dict[tuple[str, str], tuple[str, str]]


def case_labels(root: Path, wanted: set[tuple[str, str]]) -> CaseLabels:
    """The label digest and class of the cases ``wanted`` under the folder ``root``.

    Families and case files that cannot be read are left out (the commands say so elsewhere).

    Args:
        root: the folder of the families (``--cases``).
        wanted: the ``(family, case id)`` pairs the records name.

    Returns:
        ``(family, case id)`` → ``(label hash, class)`` for each labelled case found.
    """
    from pytest_tooleffect.collect.cases import FamilyError, case_label_hash, is_case_file, load_case_file, load_family
    from pytest_tooleffect.collect.family import family_dirs

    families = {f for f, _ in wanted}
    out: CaseLabels = {}
    for directory in family_dirs([root]) if root.is_dir() else []:
        try:
            fam = load_family(directory)
        except (FamilyError, OSError, ValueError):
            continue
        if fam.name not in families:
            continue
        seen: set[str] = set()
        for path in sorted(directory.iterdir()):
            if not path.is_file() or not is_case_file(path, fam.referenced_files):
                continue
            try:
                cases, _ = load_case_file(path, fam, seen)
            except (OSError, ValueError):
                continue
            for case in cases:
                if case.label is not None and (fam.name, case.id) in wanted:
                    out[(fam.name, case.id)] = (case_label_hash(case, fam), case.label.label_class)
    return out


def label_mismatches(records: Iterable[RecordLabel], labels: CaseLabels, root: Path,
                     what: str = "record") -> tuple[list[str], list[str]]:
    """The records whose class contradicts their case's label, and those whose label changed.

    Args:
        records: what each record says of its label.
        labels: :func:`case_labels` of the folder.
        root: the folder (named in the lines).
        what: what the lines call an entry (``record``, ``the baseline's decision``).

    Returns:
        ``(refused, changed)``: one line per record whose class is not its label's under the same digest;
        the ids of the records whose digest is not their case's.
    """
    refused: list[str] = []
    changed: list[str] = []
    for r in records:
        found = labels.get((r.family, r.case_id))
        if found is None or r.perturbed:
            continue
        digest, cls = found
        if r.label_hash != digest:
            changed.append(r.id)
        elif r.label_class != cls:
            refused.append(f"{what} {r.id}: class {r.label_class}, but case {r.case_id} of {r.family} under {root} "
                           f"has that label (hash {digest}) and its class is {cls}: the {what.split()[-1]} was edited")
    return refused, changed
