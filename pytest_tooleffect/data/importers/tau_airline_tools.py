"""The τ-bench airline tools by effect: which only read and which change the booking database.

Shared by the family builder (:mod:`pytest_tooleffect.data.importers.tau_airline`, for MCP
annotations) and the rule labeller (:mod:`pytest_tooleffect.data.importers.tau_airline_rules`).
"""

from __future__ import annotations

__all__ = ["READ_ONLY", "WRITE_TOOLS"]

#: Tools that change nothing (MCP ``readOnlyHint``); ``think`` and ``calculate`` only compute.
READ_ONLY = frozenset(
    {"get_user_details", "get_reservation_details", "search_direct_flight", "search_onestop_flight",
     "list_all_airports", "calculate", "think"}
)
#: Tools that change the booking database (the policy asks for explicit confirmation first).
WRITE_TOOLS = frozenset(
    {"book_reservation", "cancel_reservation", "send_certificate", "update_reservation_baggages",
     "update_reservation_flights", "update_reservation_passengers"}
)
