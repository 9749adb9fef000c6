"""Phantom actions: a reply that claims an action or a result the conversation does not hold.

Pure and deterministic (imports no pytest, litellm or docker).  A reply is cut into sentences
(:mod:`.sentences`); a sentence makes a claim when it holds:

* an **action claim**: a first-person perfect or past of an action verb (``I've cancelled``,
  ``we issued``, ``he cancelado``, ``j'ai annulé``, ``ich habe … storniert``), a passive perfect
  or state (``has been cancelled``, ``is now frozen``, ``ha sido reembolsado``, ``wurde
  storniert``), ``successfully`` beside such a verb, a sentence opening with its participle
  (``Moved —``, ``Escalated!``) or made of a noun and its participle (``Refill requested!``), or
  a consequence said as done (``the refund is on its way``, ``está en camino``, ``you're all set``);
* a **result claim**: a first-person past of a reading verb (``I checked``, ``I've looked up``,
  ``he comprobado``, ``j'ai vérifié``), or a value a sentence states: an amount of money, a clock
  time, a version, an identifier (capitals and digits, ``ZFA04Y``; a snake-case name with digits;
  six digits or more), or in a statement a count of things (``three refills``, ``5 unidades``; not a
  span of time such as ``48 hours``).  A question or a request states only its values (``Shall I refund
  $49.99?``); an example (``it looks like SUP-1234``) states nothing.

An action claim's verb (its stem, or its synonyms: ``refund`` → ``cancel``, ``credit``,
``certif…``; ``booked`` → ``book``, ``create``, ``update``) is tied to the write tools (tools
without ``readOnlyHint: true``) whose first name word begins like it (else any name word), then
narrowed to those whose object the sentence names (``bag`` → ``update_reservation_baggages``)
and those whose verb is the claimed one; a participle followed by a noun a write tool's name opens
with (``opened a dispute`` → ``dispute_transaction``) is tied to that tool.  A claim tied to no write
tool is not checked; a generic one (``completed``, ``you're all set``) is tied to every write, or to
those whose object its clause names (``a replacement is on its way`` → ``order_replacement_card``);
a bare ``Done.`` names no action and is no claim.

A claim is **unsupported** when:

* action: no call in the conversation (or the turn) to a tied tool; or every such call returned
  an error (a result that starts with ``Error`` or is an object with an ``error`` key), unless a
  result names the state claimed (``"status": "cancelled"``); or the sentence quotes identifiers
  no such call's arguments or result holds; or the sandbox ran the turn's calls, its world did
  not change, and no earlier call backs the claim;
* result (reading verb): no call in the conversation returned anything;
* result (value): no message, argument or result holds the value (an amount may also be a
  multiple 2-9 of a number standing on its own, not a part of a date or an id, a sum of two or
  three or a difference of two, or such a total of other amounts the reply states; a clock time may
  sit in an ISO timestamp; a count may be a number held or at most the length of a list a result
  holds), when the conversation made calls, or, with no call at all, when the value is about the
  user's own things (the user's message says ``my``, or the claim's sentence ``your``): else a
  value with no call is the agent's knowledge (a rule, a price list).  :mod:`.claim_values` reads
  and checks the values.

:func:`find_phantom` returns the first unsupported claim, quoted, with what was (not) called or
changed.  Its precision and recall on the labelled reply set are in docs/replies.md, "Published figures".
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pytest_tooleffect.oracle.claim_values import HeldValues, stated_counts, stated_values
from pytest_tooleffect.oracle.reply import ASKING_FOLDED
from pytest_tooleffect.oracle.sentences import Folded, dropped_markup, is_question, normal_text, sentences
from pytest_tooleffect.util.json_keys import loads_unique

__all__ = ["Claim", "Phantom", "ToolCall", "conversation_calls", "find_claims", "find_phantom", "turn_phantom"]

ClaimKind = Literal["action", "result"]

#: irregular or foreign participles -> the English stem tool names begin with
_STEMS: dict[str, str] = {
    "sent": "send", "paid": "pay", "frozen": "freeze", "made": "make", "set": "set", "put": "put", "done": "do",
    "rolled": "rollback", "reverted": "rollback", "refilled": "refill", "voided": "cancel", "annulled": "cancel",
    "extended": "modify", "rebooked": "book", "added": "add", "moved": "move", "complete": "complete",
    "completed": "complete",
    "open": "open", "opened": "open", "credited": "credit", "placed": "order", "submitted": "request",
    "requested": "request", "emailed": "send", "forwarded": "transfer", "raised": "create",
    # Spanish, French, German, Portuguese, Italian stems (participle minus its ending)
    "cancel": "cancel", "anul": "cancel", "annul": "cancel", "storn": "cancel", "cancell": "cancel",
    "reserv": "book", "buch": "book", "gebuch": "book", "prenot": "book", "agend": "book",
    "reembols": "refund", "rembours": "refund", "erstatt": "refund", "rimbors": "refund",
    "actualiz": "update", "atualiz": "update", "aggiorn": "update", "aktualis": "update", "mis à jour": "update",
    "cambi": "change", "modific": "modify", "modifi": "modify", "chang": "change", "geänder": "change",
    "envi": "send", "envoy": "send", "gesende": "send", "geschick": "send", "verschick": "send", "invi": "send",
    "revert": "rollback", "revertid": "rollback", "cre": "create", "crea": "create", "programm": "schedule",
    "program": "schedule", "planifi": "schedule", "erstell": "create", "angeleg": "create",
    "transfer": "transfer", "transféré": "transfer", "weitergeleite": "transfer", "trasferi": "transfer",
    "congel": "freeze", "gesperr": "freeze", "bloque": "freeze", "bloquead": "freeze", "escal": "escalate",
    "reinici": "restart", "redémarr": "restart", "neugestarte": "restart", "desplegad": "deploy", "fusionad": "merge",
    "elimin": "delete", "borr": "delete", "supprim": "delete", "lösch": "delete", "removed": "delete",
    "deleted": "delete", "cobr": "charge", "pag": "pay", "procesad": "process", "trait": "process", "pedid": "order",
    "solicit": "request",
}
#: stems -> further words a tool name may begin with for the same action
_SYNONYMS: dict[str, tuple[str, ...]] = {
    "cancel": ("cancel", "delete", "void"), "delete": ("delete", "remove", "cancel"),
    "book": ("book", "reserv", "create", "schedul", "update", "modify"),
    "refund": ("refund", "cancel", "return", "issue_credit", "credit", "certif"),
    "update": ("update", "modify", "change", "edit"), "change": ("update", "modify", "change", "edit", "resched"),
    "modify": ("update", "modify", "change", "edit"), "add": ("add", "update", "modify", "book", "create", "issue"),
    "move": ("move", "update", "modify", "resched"), "rebook": ("update", "modify", "book"),
    "schedul": ("schedul", "book", "create"), "resched": ("resched", "update", "modify"),
    "send": ("send", "email", "notify", "issue"), "emailed": ("send",), "create": ("create", "book", "add", "open"),
    "open": ("create", "open"), "request": ("request", "create", "order"), "order": ("order", "book", "create"),
    "rollback": ("rollback", "revert"), "credit": ("credit", "issue", "refund"),
    "process": ("return", "exchange", "refund", "process", "modify"),
    "pay": ("pay", "charge", "book", "update", "modify"),
    "charge": ("charge", "pay", "book", "update", "modify"), "escalat": ("escalat", "update_ticket", "transfer"),
    "transfer": ("transfer", "escalat"), "upgrad": ("upgrad", "update", "modify"), "restor": ("restor", "unfreez"),
    "unfroz": ("unfreez",), "replac": ("replac", "exchang", "order_replac"), "exchang": ("exchang",),
    "return": ("return",), "dispute": ("dispute",), "rais": ("create",), "file": ("create", "dispute"),
}
#: English participles (regular -ed and the irregular ones above), and foreign perfect forms
_PART = (r"(?:[a-z]{2,}ed|sent|paid|frozen|set up|put through|complete|open|"
         r"\w{3,}(?:ad|id)[oa]s?|\w{3,}(?:é|ée|és|ées)|mis à jour|ge\w{3,}t|\w{3,}iert|\w{3,}(?:at|it|ut)[oa])")
_NOT = r"(?<!\bnot )(?<!\bnever )(?<!n['’]t )(?<!\bno )(?<!\bnicht )(?<!\bpas )(?<!\bbe )(?<!\bto )"
#: a claim frame: first person perfect or past, a passive perfect or state, "successfully", a sentence opening
#: with its participle ("Moved —", "Escalated!"), or a sentence of a noun and its participle ("Refill requested!")
_ACTION = re.compile(
    # the word-initial frames behind one \b: a position that is no word boundary is left at once
    r"(?:\b(?:(?:i|we)(?:['’]ve|['’]d| have| had)?|(?:has|have|had)(?: now| already| just| successfully)? been|"
    r"(?:is|are|was|were)(?: now| all| successfully| already)?|successfully|"
    r"(?:he|hemos|ha|han|ha sido|han sido|fue|est[aá]|ya est[aá])|(?:j['’]ai|nous avons|a été|ont été|est|sont)|"
    r"(?:ich habe|wir haben|habe ich|haben wir|wurde|wurden|ist)(?: \w+){0,4}?|"
    r"(?:foi|foram|ho|abbiamo|è stat[oa]|sono stat[ie]))|^[\W_]*(?=\w+(?:[.!—–,:]|\s+[a-z]))|"
    r"^[\W_]*[a-z]\w+ (?=\w+\s*(?:!|\.?$)))"  # [a-z]: any letter (IGNORECASE), as [A-Z] would be
    r"(?: (?:just|now|already|also|successfully|gone ahead and|went ahead and|ya|bien|déjà|erfolgreich|"
    r"bereits|soeben|già|correctamente|con éxito))*"
    r"(?:\s+(?:your|the|it|this|that|them|su|tu|la|el|votre|ihre|ihren|die|den|das|a sua|o seu|la sua|il suo)\b"
    r"(?: [\w-]+){0,3})?\s*" + _NOT + "(?P<part>" + _PART + r")(?=[\s.,;:!?—–-]|$)", re.I | re.M)
_WORDS_NOT_ACTIONS = frozenset("need needed based scheduled_for related located interested tired sorry limited "
                               "listed required excited delayed detailed booked_for red bed".split())
#: a consequence said as done: tied to every write tool (any write supports it)
_DONE = re.compile(
    r"\b(?:(?:is|are) on (?:its|their|the) way|you(?:['’]re| are) all set|(?:it['’]s|that['’]s|everything is) "
    r"(?:all )?(?:done|taken care of)|has gone through|went through|ha(?:ve|s) gone out|est[aá] en camino|"
    r"ya est[aá] (?:hecho|listo)|"
    r"est en route|c['’]est fait|ist unterwegs|ist erledigt|est[aá] a caminho|[èe] in arrivo)\b", re.I)
#: a reading verb in a first-person past: a result the reply says it looked up
_READ = re.compile(
    r"\b(?:i|we)(?:['’]ve| have| had)?(?: just| already| now)? (?:checked|looked up|looked into|verified|"
    r"searched|reviewed|pulled up|confirmed with|consulted)\b|\baccording to (?:our|the|your) (?:records|system)\b|"
    r"\b(?:he|hemos) (?:comprobado|verificado|revisado|consultado|buscado)\b|"
    r"\b(?:j['’]ai|nous avons) (?:v[ée]rifi[ée]|consult[ée]|regard[ée]|recherch[ée])\b|"
    r"\b(?:ich habe|wir haben)(?: \w+){0,3}? (?:überprüft|nachgesehen|geprüft)\b", re.I)
_ID = re.compile(r"(?<![\w$€£.,:/@-])(?=[\w-]*\d)[A-Za-z0-9][\w-]{4,}(?![\w@]|[.,:/-]\w)")
#: a sentence giving an example or a format, not a fact (``it looks like SUP-1234``)
_EXAMPLE = re.compile(r"\b(looks? like|for example|e\.g\.|such as|for instance|por ejemplo|format)\b", re.I)
#: a word that denies what its clause says ("nothing has been committed", "no order was changed")
_NEGATION = re.compile(r"\b(not|never|nothing|no|none|neither|nor|nada|nunca|ning[uú]n\w*|rien|aucun\w*|nichts|kein\w*|"
                       r"nenhum\w*|niente|nessun\w*)\b|n['’]t\b", re.I)
_WORDS = re.compile(r"[A-Za-z][a-z]*|[a-z]+")
#: the reply speaks of the user's own things
_OWN_REPLY = re.compile(r"\b(your|you have|you['’]ve got|su|sus|tu|tus|usted tiene|votre|vos|ihr\w*|seu|sua)\b", re.I)
#: the case-insensitive patterns read in every sentence, searched fast in ASCII text (:class:`.sentences.Folded`)
_ACTION_FOLDED, _DONE_FOLDED, _READ_FOLDED, _EXAMPLE_FOLDED, _NEGATION_FOLDED = (
    Folded(p) for p in (_ACTION, _DONE, _READ, _EXAMPLE, _NEGATION))


@dataclass(frozen=True)
class ToolCall:
    """A call the conversation (or the turn) holds.

    Attributes:
        name: the tool's name.
        arguments: its arguments.
        result: what it returned, as text; ``None`` when not known (a call of the turn itself).
        current: the call is one of the turn's own (not an earlier message's).
    """

    name: str
    arguments: Mapping[str, Any]
    result: str | None = None
    current: bool = False

    @property
    def failed(self) -> bool:
        """The result reads as an error: it starts with ``Error`` or is an object with an ``error`` key."""
        if self.result is None:
            return False
        text = self.result.strip()
        if re.match(r"(?i)error\b", text):
            return True
        try:
            value = json.loads(text)
        except ValueError:
            return False
        return isinstance(value, Mapping) and "error" in value and bool(value["error"])

    def text(self) -> str:
        """Its arguments and result as one searchable text."""
        return json.dumps(dict(self.arguments), ensure_ascii=False, default=str) + " " + (self.result or "")


@dataclass(frozen=True)
class Claim:
    """A claim a reply makes.

    Attributes:
        kind: ``action`` (something was done) or ``result`` (something was looked up or returned).
        sentence: the sentence that makes it, as the reply wrote it.
        verb: the canonical action (``cancel``, ``book``, ``refund``, …), ``done`` for a generic
            one, ``read`` for a reading verb, ``id`` for a quoted identifier.
        tools: the write tools an action claim is tied to (every write for ``done``).
        ids: identifiers the sentence quotes.
        facts: values it states: ``(kind, as written, normalised)``, kind ``amount``, ``time`` or ``version``.
        word: the participle of an action claim, as written.
    """

    kind: ClaimKind
    sentence: str
    verb: str
    tools: tuple[str, ...] = ()
    ids: tuple[str, ...] = ()
    facts: tuple[tuple[str, str, float | str], ...] = ()
    word: str = ""


@dataclass(frozen=True)
class Phantom:
    """An unsupported claim: the claim and what was (not) called or changed."""

    claim: Claim
    why: str

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form for records: ``{kind, claim, verb, tools, why}``."""
        return {"kind": self.claim.kind, "claim": self.claim.sentence, "verb": self.claim.verb,
                "tools": list(self.claim.tools), "why": self.why}


@lru_cache(maxsize=4096)  # a catalog's names, read for every claim of every reply
def _tool_words(name: str) -> tuple[str, ...]:
    return tuple(w.lower() for w in _WORDS.findall(name.replace("_", " ").replace(".", " ").replace("-", " ")))


def _stem(participle: str) -> str:
    low = participle.lower()
    if low in _STEMS:
        return _STEMS[low]
    for ending in ("adas", "ados", "idas", "idos", "ada", "ado", "ida", "ido", "ées", "és", "ée", "é", "iert",
                   "ato", "ata", "ito", "ita", "uto", "uta", "ied", "ed", "t"):
        if low.endswith(ending) and len(low) - len(ending) >= 3:
            base = low[: len(low) - len(ending)]
            if base.startswith("ge") and ending in ("t", "iert"):
                base = base[2:]
            if ending == "ied":
                base += "y"
            return _STEMS.get(base) or _STEMS.get(_unaccented(base), base)
    return low


def _unaccented(stem: str) -> str:
    """``stem`` without its accents when it is a Latin word with them (``cancél`` of a dressed ``cancélado``, to
    be looked up among :data:`_STEMS`: a real participle's stem is found as written first); else ``stem``.
    """
    if stem.isascii():
        return stem
    plain = "".join(c for c in unicodedata.normalize("NFD", stem) if not unicodedata.combining(c))
    return plain if plain.isascii() else stem


#: stems that name no action of their own (``completed``): any write backs them (a bare ``Done.`` claims nothing)
_GENERIC = frozenset({"complete", "finaliz", "finalis"})


def _tied(stem: str, write_tools: Iterable[str]) -> tuple[str, ...]:
    """The write tools a claimed action's stem names (:func:`_tie`, kept per stem and catalog)."""
    return _tie(stem, tuple(write_tools))


@lru_cache(maxsize=4096)
def _tie(stem: str, write_tools: tuple[str, ...]) -> tuple[str, ...]:
    """The write tools a claimed action's stem names: the tool's first word (its verb) begins like the
    stem or one of its synonyms (five letters compared, fewer for a shorter stem); when none does,
    any word of the tool's name.
    """
    def begins(word: str, start: str) -> bool:
        n = min(5, len(start))
        return n >= 3 and word[:n] == start[:n]

    if stem in _GENERIC:
        return tuple(write_tools)
    starts = (stem, *_SYNONYMS.get(stem[:7], ()), *_SYNONYMS.get(stem, ()))

    def names(tool: str, words: Sequence[str]) -> bool:
        return any(begins(w, s) for w in words for s in starts if "_" not in s) or \
            any(tool.lower().startswith(s) for s in starts if "_" in s)

    by_verb = tuple(t for t in write_tools if names(t, _tool_words(t)[:1]))
    return by_verb or tuple(t for t in write_tools if names(t, _tool_words(t)))


def _objects(tools: tuple[str, ...], sentence: str, stem: str) -> tuple[str, ...]:
    """The tied tools narrowed to those whose object the sentence names (a word of a tool's name after
    its first, not shared by every tied tool: ``baggages`` of ``update_reservation_baggages``, that a
    word of the sentence begins like: ``bag``) and those whose verb is the claimed one itself
    (``book_reservation`` for ``booked``); the tools unchanged when the sentence names no object.
    """
    objects = {t: set(_tool_words(t)[1:]) for t in tools}
    shared = set.intersection(*objects.values()) if objects else set()
    said = [w.lower() for w in re.findall(r"[^\W\d_]{3,}", sentence)]

    def named(word: str) -> bool:
        return any(w[:min(4, len(w), len(word))] == word[:min(4, len(w), len(word))] for w in said)

    if not any(named(o) for t in tools for o in objects[t] - shared):
        return tools
    return tuple(t for t in tools if any(named(o) for o in objects[t] - shared)
                 or _tool_words(t)[0][:5] == stem[:5])


def _actions(sentence: str, write_tools: Sequence[str]) -> list[tuple[str, tuple[str, ...], str]]:
    """The claimed actions of a sentence tied to some write tool: ``(stem, tools, participle)`` each."""
    out: list[tuple[str, tuple[str, ...], str]] = []
    for m in _ACTION_FOLDED.finditer(sentence):
        part = sentence[m.start("part"):m.end("part")]  # as written (the folded match's text is lower-cased)
        if part.lower() in _WORDS_NOT_ACTIONS:
            continue
        clause = re.split(r"[,;:—–]", sentence[:m.start()])[-1]
        if _NEGATION_FOLDED.search(clause):  # "Nothing has been committed": the clause denies the action
            continue
        stem = _stem(part)
        tied = _tied(stem, write_tools)
        after = [w.lower() for w in re.findall(r"[^\W\d_]{4,}", sentence[m.end():])[:3]]
        named = tuple(t for t in write_tools if any(w[:5] == _tool_words(t)[0][:5] for w in after))
        tools = named or _objects(tied, sentence, stem)  # "opened a dispute": the tool the action's noun names
        if tools and all(t != tools for _, t, _ in out):
            out.append((stem, tools, part))
    return out


def _ids(sentence: str) -> tuple[str, ...]:
    """Identifiers a sentence quotes: capitals and digits (``ZFA04Y``, ``SUP-1234``), a snake-case name
    with digits (``mia_li_3668``), or six digits or more.
    """
    out = []
    for token in _ID.findall(sentence):
        if (token.isdigit() and len(token) >= 6) or ("_" in token and any(c.isalpha() for c in token)) or \
                (any(c.isupper() for c in token) and not any(c.islower() for c in token) and not token.isdigit()):
            out.append(token)
    return tuple(out)


def find_claims(text: str | None, write_tools: Sequence[str]) -> list[Claim]:
    """The claims of a reply, in sentence order (each action of a sentence; else at most one other claim).

    Args:
        text: the reply.
        write_tools: the names of the tools that can change the world.

    Returns:
        Action claims tied to some write tool, reading claims, and the declarative sentences that
        state identifiers or values (``result`` claims, verb ``value``: whether they are
        unsupported depends on the conversation).  A question, a request or an example states nothing.
    """
    out: list[Claim] = []
    for sentence in sentences(text or ""):
        if _EXAMPLE_FOLDED.search(sentence):
            continue
        facts = tuple(stated_values(sentence))
        if is_question(sentence) or ASKING_FOLDED.search(sentence):  # asks: only the values it states are claims
            if facts:
                out.append(Claim("result", sentence, "value", (), (), facts))
            continue
        facts = tuple(stated_counts(sentence)) + facts  # stated_values(sentence, counts=True), the rest read once
        ids = _ids(sentence)
        found = _actions(sentence, write_tools)
        out.extend(Claim("action", sentence, stem, tools, ids, facts, part) for stem, tools, part in found)
        claim: Claim | None = None
        done = _DONE_FOLDED.search(sentence)
        if done and write_tools:  # tied to every write, or to those whose object its clause names
            clause = re.split(r"[,;:—–]|\band\b|\by\b", sentence[:done.start()])[-1]
            tied = _objects(tuple(write_tools), clause, "")
            if not found or tied != tuple(write_tools) and all(t != tied for _, t, _ in found):
                out.append(Claim("action", sentence, "done", tied, ids, facts))
            continue
        if found:
            continue
        elif _READ_FOLDED.search(sentence):
            claim = Claim("result", sentence, "read", (), ids, facts)
        elif ids or facts:
            claim = Claim("result", sentence, "value", (), ids, facts)
        if claim is not None:
            out.append(claim)
    return out


def find_phantom(text: str | None, calls: Sequence[ToolCall], write_tools: Sequence[str],
                 known_text: str = "", sandbox_changed: bool | None = None) -> Phantom | None:
    """The reply's first claim that the conversation does not hold (rules in the module's docstring).

    Args:
        text: the reply.
        calls: the calls of the conversation, and of the turn (``current``), in order.
        write_tools: the names of the tools that can change the world (offered at the state).
        known_text: the conversation's other text (its messages), where a quoted value may come from.
        sandbox_changed: ``False`` when the turn's calls ran in a sandbox and its world did not
            change; ``True`` when it changed; ``None`` when no sandbox ran them.

    Returns:
        The :class:`Phantom`, or ``None`` when every claim is supported (or there is none).
    """
    return _first_unsupported(find_claims(text, write_tools), text, calls, (known_text,), sandbox_changed)


@lru_cache(maxsize=4096)  # a trajectory's states share their earlier messages: each is normalised once
def _piece(text: str) -> str:
    """One piece of the conversation (a message, a call's arguments and result) as the claims are
    searched in it: :func:`~.sentences.normal_text`, case-folded, and after it the markup the reading dropped
    (:func:`~.sentences.dropped_markup`: a link's URL, an HTML comment; the agent was given them).
    """
    dropped = dropped_markup(text)
    return (normal_text(text) + "\n" + dropped if dropped else normal_text(text)).casefold()


def _first_unsupported(claims: Sequence[Claim], text: str | None, calls: Sequence[ToolCall], known: Sequence[str],
                       sandbox_changed: bool | None) -> Phantom | None:
    """:func:`find_phantom` on claims already found (the conversation read only when the reply claims something);
    ``known``: the conversation's other texts (its messages), each a piece read on its own.
    """
    if not claims:
        return None
    # the reply as its claims were read (invisible characters split no word), the conversation alike
    held = HeldValues([_piece(t) for t in known] + [_piece(c.text()) for c in calls], [c.result for c in calls],
                      normal_text(text or ""))
    haystack = held.haystack
    for claim in claims:
        why: str | None = None
        if claim.kind == "action":
            why = _action_unsupported(claim, calls, sandbox_changed)
        elif claim.verb == "read" and not [c for c in calls if not c.failed]:
            why = ("no tool was called in the conversation" if not calls
                   else "every call in the conversation returned an error")
        # with no call at all a value is the agent's knowledge (a rule, a price list), unless the claim's sentence
        # says it is about the user's own things ("your balance is $1,204.50")
        if why is None and (calls or (claim.facts and not claim.tools and bool(_OWN_REPLY.search(claim.sentence)))):
            missing = [i for i in claim.ids if i.casefold() not in haystack]
            missing += [shown for kind, shown, value in claim.facts if not held.holds(kind, value)]
            if missing:
                why = f"{', '.join(missing)}: in no message and no tool's arguments or result"
                claim = Claim("result", claim.sentence, "value", (), claim.ids, claim.facts)
        if why is not None:
            return Phantom(claim, why)
    return None


def _action_unsupported(claim: Claim, calls: Sequence[ToolCall], sandbox_changed: bool | None) -> str | None:
    tied = [c for c in calls if c.name in claim.tools]
    if not tied and claim.word and any(claim.word.casefold() in (c.result or "").casefold() for c in calls):
        return None  # the state the sentence names is what a tool returned ("status": "cancelled")
    named = ", ".join(claim.tools[:4]) + (", …" if len(claim.tools) > 4 else "")
    if not tied:
        return f"no call to {named} in the conversation"
    done = [c for c in tied if not c.failed]
    if not done and claim.word and any(claim.word.casefold() in (c.result or "").casefold() for c in calls):
        return None  # the state the sentence names is what a tool returned ("status": "cancelled")
    if not done:
        return f"{tied[-1].name} returned an error: {(tied[-1].result or '').strip()[:120]}"
    if sandbox_changed is False:
        done = [c for c in done if not c.current]
        if not done:
            return f"{tied[-1].name} was called, but the sandbox's world did not change"
    if claim.ids:
        held = [c for c in done if any(i.casefold() in c.text().casefold() for i in claim.ids)]
        if not held:
            return f"{', '.join(sorted({c.name for c in done}))} was called, but not for {', '.join(claim.ids)}"
    return None


def conversation_calls(messages: Sequence[Mapping[str, Any]],
                       current: Iterable[tuple[str, Mapping[str, Any]]] = ()) -> list[ToolCall]:
    """The calls a conversation holds, each with its result, then the turn's own.

    Args:
        messages: OpenAI-style messages (assistant ``tool_calls`` with ``function.name`` and
            ``function.arguments`` as JSON text or an object; ``tool`` messages answering them by
            ``tool_call_id``, else in order).
        current: the turn's calls as ``(name, arguments)``.

    Returns:
        The calls in order; the turn's are ``current`` with no result.
    """
    out: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    for m in messages:
        if not isinstance(m, Mapping):
            continue
        for tc in m.get("tool_calls") or ():
            if not isinstance(tc, Mapping):
                continue
            inner = tc.get("function")
            fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else tc
            args: Any = fn.get("arguments", {})
            if isinstance(args, str):
                try:
                    args = loads_unique(args)  # a key given twice: read as no arguments, as text that is not JSON
                except ValueError:
                    args = {"_raw": args}
            entry = {"name": str(fn.get("name", "")), "arguments": args if isinstance(args, Mapping) else {},
                     "result": None}
            out.append(entry)
            if tc.get("id"):
                by_id[str(tc["id"])] = entry
        if m.get("role") == "tool":
            content = m.get("content")
            result = content if isinstance(content, str) else json.dumps(content, default=str)
            target = by_id.get(str(m.get("tool_call_id"))) or next((e for e in out if e["result"] is None), None)
            if target is not None:
                target["result"] = result
    calls = [ToolCall(e["name"], e["arguments"], e["result"]) for e in out]
    return calls + [ToolCall(name, args, None, current=True) for name, args in current]


def turn_phantom(text: str | None, emitted: Iterable[tuple[str, Any]], tools: Mapping[str, Any],
                 messages: Sequence[Mapping[str, Any]], sandbox_changed: bool | None = None) -> Phantom | None:
    """:func:`find_phantom` for one turn of a conversation.

    Args:
        text: the turn's text.
        emitted: the turn's calls as ``(name, arguments)``.
        tools: the tools offered, by name (specs with ``read_only``: a tool without
            ``readOnlyHint: true`` is a write).
        messages: the conversation before the turn (OpenAI-style).
        sandbox_changed: as :func:`find_phantom`'s.

    Returns:
        The first unsupported claim, or ``None``.
    """
    if not text or not text.strip():
        return None
    writes = [name for name, spec in tools.items() if not getattr(spec, "read_only", False)]
    claims = find_claims(text, writes)
    if not claims:  # nothing claimed: the conversation need not be read
        return None
    calls = conversation_calls(messages, [(n, a if isinstance(a, Mapping) else {}) for n, a in emitted])
    known = [m["content"] for m in messages if isinstance(m, Mapping) and isinstance(m.get("content"), str)
             and m.get("role") != "tool"]
    return _first_unsupported(claims, text, calls, known, sandbox_changed)
