"""The ids collection gives: an item's name and its record's id (the baseline keys by the same), and
the names a node takes when what it is named after holds control characters (:func:`node_names`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pytest_tooleffect.util.display import shown

__all__ = ["VARIANT_SEPARATOR", "item_name", "node_names", "record_id", "variant_policy"]

#: between a policy's name and a perturbation variant's in a variant's policy name (``replay+shuffle``)
VARIANT_SEPARATOR = "+"


def record_id(family: str, case_id: str, policy: str, trial: int = 1, repeats: int = 1) -> str:
    """The id of one item's record, the same string the item and the baseline use.

    Args:
        family: the family's name.
        case_id: the case's id.
        policy: the policy's name.
        trial: the trial, 1…``repeats``.
        repeats: trials per case in the run (``--tooleffect-repeats``).

    Returns:
        ``family/case-id[policy]``, or ``family/case-id[policy:trial]`` when ``repeats > 1``.
    """
    return f"{family}/{item_name(case_id, policy, trial, repeats)}"


def item_name(case_id: str, policy: str, trial: int = 1, repeats: int = 1) -> str:
    """The test item's name, the record id without its family (:func:`record_id`'s tail).

    Args:
        case_id: the case's id.
        policy: the policy's name.
        trial: the trial, 1…``repeats``.
        repeats: trials per case in the run (``--tooleffect-repeats``).

    Returns:
        ``case-id[policy]``, or ``case-id[policy:trial]`` when ``repeats > 1``.

    Raises:
        ValueError: ``trial`` is not in 1…``repeats``.
    """
    if not 1 <= trial <= max(repeats, 1):
        raise ValueError(f"trial {trial} of {repeats}: a trial is 1…repeats")
    return f"{case_id}[{policy}]" if repeats == 1 else f"{case_id}[{policy}:{trial}]"


def variant_policy(policy: str, variant: str) -> str:
    """The policy name a perturbed-catalog variant's items and records carry (``docs/robustness.md``).

    Args:
        policy: the original policy's name.
        variant: the variant's name (``shuffle``, ``scale-32``).

    Returns:
        ``policy+variant``: the item is ``case-id[policy+variant]``, its record
        ``family/case-id[policy+variant]`` (a ``-k`` expression can name it).
    """
    return f"{policy}{VARIANT_SEPARATOR}{variant}"


def node_names(values: Iterable[str], *, taken: Callable[[str], bool] = lambda name: False) -> dict[str, str]:
    r"""The name each value gives a node (an item's name, a case file's node id), as pytest prints it.

    pytest prints node names and ids raw (``ERROR at setup of …``, the short summary, ``FAILED
    path::name``): an invalid case's id or a case file's name holding an escape sequence (an OSC
    window title, a screen clear), NUL or a bidirectional override would reach the terminal as it
    is.  A value :func:`~pytest_tooleffect.util.display.shown` leaves as it is names its node
    itself (the node ids of ordinary cases and files never change); any other value is named by its
    shown form (``a\x1b[2J``), and when that form is the name of another node (another value,
    given first, or ``taken``) it gets `` #2``, `` #3``…: ids stay unique, and the same in every
    process given the same values in the same order (xdist's workers collect alike).

    Args:
        values: the values, in collection order (duplicates name one node).
        taken: whether a name is already another node's (one this call does not see).

    Returns:
        By value, its node name.
    """
    values = list(dict.fromkeys(values))
    names = {v: v for v in values if shown(v) == v}
    used = set(names.values())
    for v in values:
        if v in names:
            continue
        base = name = shown(v)
        n = 1
        while name in used or taken(name):
            n += 1
            name = f"{base} #{n}"
        names[v] = name
        used.add(name)
    return names
