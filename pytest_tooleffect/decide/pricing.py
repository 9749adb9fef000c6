"""The money of one live model answer: litellm's own price when its price map knows the model,
else the user's ``--tooleffect-prices`` table, else unknown (``None``, never 0).

A part of the decision stage (:mod:`.model_turn` prices each answer here).  It never imports
litellm: the caller passes the imported module.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pytest_tooleffect.compat import litellm_response_cost
from pytest_tooleffect.formats import Price
from pytest_tooleffect.util.bounds import MAX_COST_USD

__all__ = ["price_answer"]

#: per model name: litellm's price map knows it (asked once per process: the map does not change
#: during a run, and an unmapped model made litellm build and raise an error at every decision)
_KNOWN_MODELS: dict[str, bool] = {}


def _priced_by_litellm(litellm: Any, model: str) -> bool:
    known = _KNOWN_MODELS.get(model)
    if known is None:
        try:
            litellm.get_model_info(model=model)
            known = True
        except Exception:  # litellm raises several types for an unmapped model
            known = False
        _KNOWN_MODELS[model] = known
    return known


def price_answer(litellm: Any, model: str, response: Any, prices: Mapping[str, Price],
                 usage: Mapping[str, int | None]) -> tuple[float | None, str | None]:
    """The answer's cost in US dollars and who priced it.

    Args:
        litellm: the imported litellm module.
        model: the policy's litellm model name.
        response: litellm's response to the request.
        prices: the user's table, by model name (with or without its provider prefix); USD per
            million input and output tokens.
        usage: ``input_tokens`` and ``output_tokens`` of the answer (``None``: not reported).

    Returns:
        ``(cost_usd, priced_by)``: ``priced_by`` is ``litellm`` or ``user``; ``(None, None)``
        when the provider reported no usage, or not a count the price needs (litellm's price needs
        both; the user's a count whose price per token is not 0), nobody prices the model, or the price comes to more
        than :data:`~pytest_tooleffect.util.bounds.MAX_COST_USD` (a usage no answer has: unknown, so no
        sum of costs overflows).
    """
    try:
        cost, by = _priced(litellm, model, response, prices, usage)
    except OverflowError:  # a token count too large for a float
        return None, None
    if cost is None or not math.isfinite(cost) or not 0 <= cost <= MAX_COST_USD:
        return None, None
    return cost, by


def _priced(litellm: Any, model: str, response: Any, prices: Mapping[str, Price],
            usage: Mapping[str, int | None]) -> tuple[float | None, str | None]:
    tin, tout = usage.get("input_tokens"), usage.get("output_tokens")
    if tin is None and tout is None:
        return None, None
    if _priced_by_litellm(litellm, model):
        if tin is None or tout is None:  # litellm would price the unknown count as 0: the cost is unknown
            return None, None
        # litellm priced the answer already: pricing it again cost a second pass over the response per decision
        priced = litellm_response_cost(response)
        if priced is not None:
            return priced, "litellm"
        try:
            return float(litellm.completion_cost(completion_response=response, model=model)), "litellm"
        except Exception:  # noqa: S110 - fall through to the user's table
            pass
    price = prices.get(model) or prices.get(model.split("/", 1)[-1])
    if price is not None:
        if (tin is None and price.input_per_mtok) or (tout is None and price.output_per_mtok):
            return None, None  # a count the price needs is unknown: so is the cost, never a part of it
        cost = ((tin or 0) * price.input_per_mtok + (tout or 0) * price.output_per_mtok) / 1e6
        return cost, "user"
    return None, None
