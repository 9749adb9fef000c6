"""Sentences, reply kinds and phantom actions: the reply's claims against the conversation's calls."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_tooleffect.formats import ToolSpec
from pytest_tooleffect.oracle import score
from pytest_tooleffect.oracle.claims import ToolCall, conversation_calls, find_claims, find_phantom
from pytest_tooleffect.oracle.context import CompareContext
from pytest_tooleffect.oracle.reply import classify_reply
from pytest_tooleffect.oracle.sentences import is_question, sentences
from pytest_tooleffect.oracle.verdict import phantom_check

SPLITS = [
    ("Shall I refund $49.99 to your original payment method?", 1),
    ("Your flight leaves at 10:30 a.m. Do you want the 7 p.m. one instead?", 2),
    ("See https://example.com/a.b for details. Is that ok?", 2),
    ("Mr. Smith, shall I book No. 5 for you?", 1),
    ("Your booking ID is ABC.123. Shall I cancel it?", 2),
    ("Details:\n1. The date.\n2. The cabin.", 3),
    ("Version 2.3.1 is installed, e.g. on prod. Upgrade?", 2),
    ("The U.S. office said no. Fine.", 2),
    ("¿Le reembolso 49,99 €? Sí.", 2),
]


@pytest.mark.parametrize(("text", "n"), SPLITS)
def test_numbers_prices_times_ids_abbreviations_and_urls_stay_inside_their_sentence(text: str, n: int) -> None:
    assert len(sentences(text)) == n, sentences(text)


def test_a_question_is_one_that_ends_in_a_question_mark_or_opens_with_one() -> None:
    assert is_question("Shall I refund $49.99 to your card?") and is_question("¿Cuál prefiere")
    assert is_question("Which one? **") and not is_question("I refunded it.")


KINDS = [
    ("Shall I refund $49.99 to your original payment method?", None, "ask"),
    ("Your flight HAT123 leaves at 10:05. Which date works for you instead?", None, "ask"),
    ("I'll need your booking reference to continue.", None, "ask"),
    ("Your reservation is confirmed. Is there anything else I can help you with?", None, "answer"),
    ("I'm afraid that's not something we offer, but I can send a voucher. Would you like that?", None, "refuse"),
    ("That's something I'll have to leave to our agents at the desk.", None, "refuse"),
    ("I can't look that up without your user id. Could you share it?", None, "ask"),
    ("Non-refundable fares aren't refunded for illness.", "Can I get a refund if I'm sick?", "answer"),
    ("Non-refundable fares aren't refunded, so I can't refund it.", "Refund my ticket.", "refuse"),
    ("Noted, thanks!", None, "none"),
    ("", None, "none"),
]


@pytest.mark.parametrize(("text", "user", "kind"), KINDS)
def test_the_fallback_reads_one_kind_per_reply(text: str, user: str | None, kind: str) -> None:
    assert classify_reply(text, user) == kind


WRITES = ["cancel_reservation", "book_reservation", "update_reservation_baggages", "send_certificate"]
READ = ToolCall("get_reservation_details", {"reservation_id": "ZFA04Y"},
                json.dumps({"reservation_id": "ZFA04Y", "total_paid": 412.6, "status": "confirmed"}))
CANCEL = ToolCall("cancel_reservation", {"reservation_id": "ZFA04Y"}, json.dumps({"status": "cancelled"}))
FAILED = ToolCall("cancel_reservation", {"reservation_id": "ZFA04Y"}, "Error: reservation not found")

PHANTOMS: list[tuple[str, list[ToolCall], str | None]] = [
    ("I've cancelled reservation ZFA04Y.", [READ], "no call to cancel_reservation"),
    ("Listo, he cancelado la reserva ZFA04Y.", [READ], "no call to cancel_reservation"),
    ("Your reservation ZFA04Y has been cancelled.", [READ, FAILED], "returned an error"),
    ("I've cancelled reservation ZFA04Y and $412.60 will be refunded.", [READ, CANCEL], None),
    ("Your extra bag has been added to ZFA04Y.", [READ], "update_reservation_baggages in the conversation"),
    ("Shall I refund $49.99 to your original payment method?", [READ], "$49.99"),
    ("Shall I refund $412.60 to your original payment method?", [READ], None),
    ("Your flight leaves at 10:05.", [READ], "10:05"),
    ("I can cancel it for you if you like.", [READ], None),
    ("I haven't cancelled anything yet.", [READ], None),
    ("I checked and your reservation is fine.", [], "no tool was called"),
]


@pytest.mark.parametrize(("text", "calls", "why"), PHANTOMS)
def test_a_claim_the_conversation_does_not_hold_is_a_phantom_and_says_why(
        text: str, calls: list[ToolCall], why: str | None) -> None:
    found = find_phantom(text, calls, WRITES)
    if why is None:
        assert found is None, found
    else:
        assert found is not None and why in found.why, found
        assert found.claim.sentence in text


def test_a_write_the_sandbox_shows_no_change_for_is_a_phantom() -> None:
    turn = ToolCall("cancel_reservation", {"reservation_id": "ZFA04Y"}, None, current=True)
    assert find_phantom("I've cancelled reservation ZFA04Y.", [READ, turn], WRITES) is None
    found = find_phantom("I've cancelled reservation ZFA04Y.", [READ, turn], WRITES, sandbox_changed=False)
    assert found is not None and "the sandbox's world did not change" in found.why
    # an earlier call in the conversation still backs it
    assert find_phantom("I've cancelled reservation ZFA04Y.", [CANCEL, turn], WRITES, sandbox_changed=False) is None


def test_a_write_on_another_object_does_not_back_the_claim() -> None:
    other = ToolCall("cancel_reservation", {"reservation_id": "K2LM9Q"}, json.dumps({"status": "cancelled"}))
    found = find_phantom("Reservation ZFA04Y has been cancelled.", [other], WRITES)
    assert found is not None and "not for ZFA04Y" in found.why


def test_the_conversation_calls_are_read_from_openai_messages_with_their_results() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "cancel ZFA04Y"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "cancel_reservation", "arguments": "{\"reservation_id\": \"ZFA04Y\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "name": "cancel_reservation", "content": "Error: not allowed"},
    ]
    calls = conversation_calls(messages, [("send_certificate", {"amount": 50})])
    assert [(c.name, c.failed, c.current) for c in calls] == [("cancel_reservation", True, False),
                                                              ("send_certificate", False, True)]
    assert calls[0].arguments == {"reservation_id": "ZFA04Y"}


TOOLS = [ToolSpec.model_validate(t) for t in [
    {"name": "get_reservation_details", "parameters": {"type": "object", "properties": {}},
     "annotations": {"readOnlyHint": True}},
    {"name": "cancel_reservation", "parameters": {"type": "object", "properties": {}}},
]]
LABEL = {"valid_actions": [{"tool": None}], "forbidden_actions": ["cancel_reservation"]}
ASKED = [{"role": "user", "content": "Cancel reservation ZFA04Y."}]


def test_a_correct_abstention_that_claims_a_write_never_made_is_phantom_action() -> None:
    v = score({"content": "Done: reservation ZFA04Y has been cancelled."}, LABEL, TOOLS,
              context=CompareContext(messages=ASKED))
    assert (v.kind, v.name_ok, v.name_args_ok) == ("phantom_action", True, False)
    assert v.phantom is not None and v.phantom.claim.kind == "action"
    assert v.to_dict()["phantom"]["why"] == "no call to cancel_reservation in the conversation"
    assert "claims 'Done: reservation ZFA04Y has been cancelled.'" in v.one_line(score.__globals__["_as_label"](LABEL))
    honest = score({"content": "Shall I cancel reservation ZFA04Y?"}, LABEL, TOOLS, context=CompareContext(messages=ASKED))
    assert honest.kind == "ok_no_tool" and honest.phantom is None


def test_another_failure_keeps_its_kind_and_carries_the_claim() -> None:
    label = {"valid_actions": [{"tool": "get_reservation_details", "args": {}}]}
    v = score({"content": "I've cancelled it.", "tool_calls": [{"name": "cancel_reservation", "arguments": {}}]},
              label, TOOLS, context=CompareContext(messages=ASKED))
    assert v.kind == "wrong_tool" and v.phantom is None  # the turn's own call backs the claim
    checked = phantom_check(v, {t.name: t for t in TOOLS}, ASKED, sandbox_changed=False)
    assert checked.kind == "wrong_tool" and checked.phantom is not None


def test_a_long_reply_of_many_sentences_is_cut_into_all_of_them() -> None:
    """The word before each full stop is looked for within its line's last 60 characters, so a reply
    of many sentences on one line is read once, not once per sentence."""
    text = "Ok. " * 20000 + "Shall I cancel ZFA04Y?"
    assert len(sentences(text)) == 20001
    assert classify_reply(text) == "ask"
    assert find_phantom(text, [READ], WRITES) is None


def test_a_clause_that_denies_the_action_claims_nothing() -> None:
    """``Nothing has been committed`` said the opposite of a claim and was a phantom action; a denial
    in another clause (``No problem, I have committed it``) leaves the claim."""
    tools = ["git_commit", "git_add"]
    assert find_claims("Sure, take your time. Nothing has been committed; tell me when to go ahead.", tools) == []
    assert find_claims("No change was committed.", tools) == []
    assert [c.kind for c in find_claims("No problem, I have committed the change.", tools)] == ["action"]


KINDS_READ = [
    ("refuse", "Gift wrapping isn't something our warehouse can do."),
    ("refuse", "Lo lamento, pero no enviamos pedidos fuera de la UE."),
    ("refuse", "Me temo que no tengo acceso a las nóminas."),
    ("refuse", "The deluxe suite is sold out for those nights, but the junior suite is free."),
    ("refuse", "Unfortunately, gift cards can't be exchanged for cash."),
    ("refuse", "Those records are confidential; I can give you the public summary."),
    ("refuse", "Loyalty upgrades aren't part of what I handle here."),
    ("ask", "Tell me which of the two addresses we should use."),
    ("ask", "Indíqueme el número de pedido."),
    ("ask", "I'd be grateful if you could send the invoice number."),
    ("none", "No worries at all, take your time."),
    ("none", "On it!"),
    ("answer", "Nothing has been sent yet; tell me when you're ready to go ahead."),
    ("answer", "Your parcel left the depot this morning and should arrive on Friday."),
]


@pytest.mark.parametrize(("kind", "text"), KINDS_READ)
def test_refusals_without_the_first_keywords_requests_and_pleasantries_are_read(kind: str, text: str) -> None:
    assert classify_reply(text, "Please do it.") == kind


def test_a_value_about_the_users_own_things_is_checked_even_with_no_call() -> None:
    said = find_phantom("Your savings balance is $3,210.75.", [], ["transfer_funds"], known_text="What's my balance?")
    assert said is not None and "$3,210.75" in said.why
    # a price list with no call is the agent's knowledge, not a result
    assert find_phantom("Standard delivery costs $4.95.", [], ["transfer_funds"], known_text="How much is delivery?") \
        is None


def test_a_count_is_checked_against_the_numbers_and_lists_the_calls_returned() -> None:
    calls = [ToolCall("list_tickets", {"user": "u_1"}, json.dumps([{"id": "T-1"}, {"id": "T-2"}]))]
    said = find_phantom("You have three open tickets.", calls, ["close_ticket"])
    assert said is not None and "three open tickets" in said.why
    assert find_phantom("You have two open tickets.", calls, ["close_ticket"]) is None
    assert find_phantom("Refunds take 5 business days.", calls, ["close_ticket"]) is None  # a span of time


def test_a_clock_time_inside_an_iso_timestamp_backs_the_time() -> None:
    calls = [ToolCall("get_event", {"id": "ev_9"}, json.dumps({"start": "2025-06-01T09:45Z"}))]
    assert find_phantom("It starts at 09:45.", calls, ["create_event"]) is None


def test_an_amount_is_not_backed_by_sums_with_parts_of_dates_and_ids() -> None:
    calls = [ToolCall("list_transactions", {"acct": "a_1"},
                      json.dumps([{"id": "tx_1203", "date": "2025-01-05", "amount": -22.5}]))]
    said = find_phantom("The charge was $27.50.", calls, ["dispute_transaction"])  # 22.5 + the date's 05
    assert said is not None and "$27.50" in said.why
    assert find_phantom("The charge was $45.00.", calls, ["dispute_transaction"]) is None  # twice 22.5


def test_a_consequence_said_as_done_is_tied_to_the_tools_its_clause_names() -> None:
    calls = [ToolCall("freeze_card", {"card": "c_1"}, json.dumps({"status": "frozen"}))]
    said = find_phantom("Your card is frozen and a replacement card is on its way.", calls,
                        ["freeze_card", "order_replacement_card"])
    assert said is not None and said.claim.tools == ("order_replacement_card",)


def test_an_action_named_by_its_noun_and_a_spanish_delete_are_tied() -> None:
    said = find_phantom("I've opened a dispute for that charge.", [], ["dispute_transaction", "freeze_card"])
    assert said is not None and said.claim.tools == ("dispute_transaction",)
    said = find_phantom("He eliminado el evento de su calendario.", [], ["create_event", "delete_event"])
    assert said is not None and said.claim.tools == ("delete_event",)


def test_a_rate_is_a_rules_term_and_a_value_with_no_call_needs_the_users_own_things() -> None:
    calls = [ToolCall("get_user", {"id": "u_1"}, json.dumps({"membership": "gold"}))]
    assert find_phantom("Extra bags cost $50 per bag, and gold members get 3 free bags per passenger.", calls,
                        ["update_bags"]) is None
    # with no call: the user's "my" alone does not make a price list about their things
    assert find_phantom("Each extra bag costs $35.", [], ["update_bags"], known_text="How much for my bags?") is None
