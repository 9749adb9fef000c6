"""The ids collection gives: an item's name and its record's id (the baseline keys by the same)."""

from __future__ import annotations

__all__ = ["VARIANT_SEPARATOR", "item_name", "record_id", "variant_policy"]

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
