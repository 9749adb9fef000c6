"""The exceptions that turn a stage's result into a pytest outcome.

A failing decision is a test failure (``DecisionFailed``, raised in the call phase); a provider,
agent, sandbox or oracle failure is an error outcome, never a verdict (raised in setup, or in
the call phase with an error record for the oracle).  Every stage imports these; they import
no stage (only :mod:`~pytest_tooleffect.util.redaction` and :mod:`~pytest_tooleffect.util.unicode`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from pytest_tooleffect.util.redaction import redact
from pytest_tooleffect.util.unicode import without_surrogates

__all__ = ["NOTHING_TO_REPLAY", "NOT_A_GAP", "RATE_LIMITER_ERROR", "REPEATS_SETTLED", "SETTLED", "SETTLE_BUDGET",
           "DecisionFailed", "Failure", "NotScored", "PolicyShadowWarning"]

#: The error type of a decision the run's rate limiter kept from being made (its Redis or its state
#: file failed): the limiter's fault, never the provider's (a provider's 429 is ``RateLimitError``).
RATE_LIMITER_ERROR = "RateLimiterError"
#: The skip reason of a replayed item whose case has no ``recorded`` decision (the report counts
#: skipped items by reason, and says how to choose a policy when replay was the run's only one).
NOTHING_TO_REPLAY = "no recorded action to replay"
#: The skip reason of an item whose block's sequential gates were all settled before its model turn
#: was sent (``ci/sequential_gate.py``): not failed, not passed, and not a gap in the run (the report
#: stays ``complete`` for it).
SETTLED = "settled"
#: The skip reason of an item left unsent because its block's sequential budget (decisions or USD) was
#: spent before the gate settled: the gate is then NOT SETTLED, and the run is incomplete.
SETTLE_BUDGET = "sequential budget spent, not settled"
#: The skip reason of a trial left unrun because its case's adaptive repeats had settled (stable,
#: flaky or out of trials: ``ci/adaptive_run.py``): not failed, not passed, and not a gap in the run.
REPEATS_SETTLED = "repeats settled"
#: the skip reasons that leave no gap in the run (the report stays ``complete`` for them)
NOT_A_GAP = frozenset({SETTLED, REPEATS_SETTLED})


class PolicyShadowWarning(UserWarning):
    """``--tooleffect-agent NAME=module:function`` names a policy ``[tool.tooleffect.policies.NAME]``
    also defines: the command line's agent runs under that name and the pyproject policy's settings
    are not used.  Silence it with ``-W "ignore::pytest_tooleffect.outcomes.PolicyShadowWarning"``
    (or the ini's ``filterwarnings``) when the variant is meant to replace the policy.
    """


@dataclass(frozen=True)
class Failure:
    """What an error record says about a failure that is not the agent's decision.

    Attributes:
        kind: the error's type (``Timeout``, ``RateLimit``, ``SandboxError``, ``OracleError``, …).
        message: one line, at most a few hundred characters (known secrets redacted).
        traceback: the formatted traceback, for an agent's exception; else ``None``.
        stderr: the tail of a failed MCP server's standard error (bounded); else ``None``.
    """

    kind: str
    message: str
    traceback: str | None = None
    stderr: str | None = None

    def __post_init__(self) -> None:  # whoever made it, a known secret never reaches a record or a report,
        # nor a lone surrogate (an agent's or a provider's text that no UTF-8 writer accepts): U+FFFD there
        object.__setattr__(self, "kind", without_surrogates(self.kind))
        object.__setattr__(self, "message", redact(without_surrogates(self.message)))
        if self.traceback is not None:
            object.__setattr__(self, "traceback", redact(without_surrogates(self.traceback)))
        if self.stderr is not None:
            object.__setattr__(self, "stderr", redact(without_surrogates(self.stderr)))


class DecisionFailed(pytest.fail.Exception):  # type: ignore[name-defined,misc]
    """The agent's decision is not acceptable (the one-line reason is the message)."""


class NotScored(pytest.fail.Exception):  # type: ignore[name-defined,misc]
    """A failure raised in setup that is not the agent's decision: pytest reports an error.

    Args:
        record_id: the item's record id, or ``None`` to leave it out of the message.
        what: ``provider``, ``rate limiter``, ``sandbox`` or ``agent``: whose failure it is.
        error: the failure, written into the item's error record.
    """

    def __init__(self, what: str, error: Failure, record_id: str | None = None) -> None:
        where = f"{record_id}: " if record_id else ""
        detail = error.message if what == "sandbox" else f"{error.kind}: {error.message}"
        super().__init__(f"{where}{what} error (not scored): {detail}", pytrace=False)
        self.what = what
        self.error = error
