"""What a no-tool reply must do (DESIGN.md scoring rule 6).

A ``tool: null`` action may say what its reply must do: ``reply: ask`` (ask for a missing or
ambiguous detail instead of guessing), ``reply: refuse`` (decline: out of scope or against
policy), ``reply: answer`` (report or confirm), and free-text criteria ``must`` / ``must_not``.
Each is judged by the LLM judge when one is configured (the same judge as free-text fields,
given a rubric per check), else by a deterministic fallback, and the result is then marked
approximate:

* the reply is read as one kind (:func:`classify_reply`): ``refuse`` when some sentence declines
  (``can't``, ``unable``, ``not eligible``, ``against … policy``, ``I'm afraid that…``,
  ``non-refundable``, ``unfortunately``, ``sorry, but``, ``isn't something we offer``, ``sold out``,
  ``not available``, ``is confidential``, ``no puedo``, ``me temo que``, ``no enviamos``,
  ``je ne peux``, ``leider nicht``…, unless every such phrase goes on to
  name a missing detail: ``I can't look it up without your id``), else ``ask`` when some sentence
  is a question or a request (``please provide``, ``I'll need your…``, ``¿Podría indicarme…``,
  ``veuillez confirmer``, ``bitte nennen Sie``…) that is not a courtesy closing (``Anything
  else?``, ``let me know if you need more``), else ``answer``; ``none`` for no text or only
  pleasantries.  Sentences are cut by :mod:`.sentences` (prices, times, ids, abbreviations and
  URLs stay whole).  The fallback's measured precision and recall per kind are in
  docs/replies.md, "Published figures" (:data:`FALLBACK_PRECISION`; a kind under
  :data:`USEFUL_PRECISION` is ``low_precision``);
* ``must``: at least half of the criterion's content words occur in the reply;
* ``must_not``: fails only when every content word of the criterion occurs in the reply
  (content words: three letters or more, compared by their first five letters).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from pytest_tooleffect.oracle.context import CompareContext
from pytest_tooleffect.oracle.reply_figures import FIGURES
from pytest_tooleffect.oracle.sentences import Folded, is_question, sentences
from pytest_tooleffect.oracle.values import tokens

__all__ = ["ASKING", "ASKING_FOLDED", "FALLBACK_PRECISION", "REPLY_KINDS", "USEFUL_PRECISION", "ReplyCheck",
           "classify_reply", "judge_reply"]

#: What a no-tool reply may be required to do.
REPLY_KINDS = ("ask", "refuse", "answer")
#: The fallback's measured precision per kind (:data:`~pytest_tooleffect.oracle.reply_figures.FIGURES`, on the
#: labelled reply set's held-out rows; docs/replies.md, "Published figures"), held by ``tests/test_reply_figures.py``.
FALLBACK_PRECISION = {kind: FIGURES[kind][0] for kind in REPLY_KINDS}
#: Under this precision a kind's fallback verdict is ``low_precision``: the report counts it apart.
USEFUL_PRECISION = 0.8

RUBRICS = {
    "ask": "The reply asks the user for a missing or ambiguous detail (a clarifying question) instead of "
           "guessing it or acting on a guess.",
    "refuse": "The reply declines the request (it is out of scope or against policy) and does not pretend to "
              "do it.",
    "answer": "The reply reports a result or confirms something to the user; it is not only a question back.",
}

#: a request for a detail (``please provide``, ``I'll need your…``, ``¿Podría indicarme…``), in any sentence
ASKING = re.compile(
    r"\b(please\s+(provide|confirm|share|send|tell|give|let me know|specify|clarify|choose|select|pick|reply|"
    r"check|verify|enter|advise|indicate)|let me know (which|what|when|where|who|whether|how|your|the)|"
    r"(could|can|would) you (please )?(provide|confirm|share|send|tell|give|let me|specify|clarify|choose|check)|"
    r"\b(i|we)(['’]ll| will| would|['’]d)? (first |still |just |also |only )*need (your|the|her|his|their|a|an|"
    r"some|to (know|have|confirm|get|see))|(once|as soon as|when) (you|i) (provide|have|share|confirm|send|give|"
    r"receive)|\bif you (paste|send|share|give|provide|tell|forward|upload|let me know|confirm)\b|"
    r"\bwill let me (start|check|look|proceed|find|process)|"
    r"\btell me (which|what|when|where|whether|how|who|your)\b|\bif you could (please )?(paste|send|share|give|"
    r"provide|tell|confirm|forward|upload|let me know|check|choose|pick)\b|"
    r",\s*please\b|"
    r"in order to (proceed|continue|help|look|check|find)|to (proceed|continue|look (it|this) up|locate|find)\b[^.?!]*"
    r"\b(i need|please|i['’]ll need|i will need)|"
    # Spanish, French, German, Portuguese, Italian
    r"por favor,? (indique|ind[ií]came|proporcione|proporci[oó]name|confirme|conf[ií]rmame|d[ií]game|dime|"
    r"env[ií]e|comparta|especifique|facil[ií]tame)|necesito (su|tu|el|la|que)|podr[ií]a(s)? (indicarme|"
    r"proporcionarme|confirmarme|decirme|darme|enviarme)|\b(ind[ií]queme|ind[ií]came|d[ií]game|conf[ií]rme(me)?|"
    r"conf[ií]rmame|proporci[oó]neme|env[ií]eme|esc[ií]bame|p[aá]seme|elija|escoja)\b|"
    r"veuillez (me )?(fournir|confirmer|indiquer|pr[ée]ciser|communiquer|donner)|merci de (me )?(fournir|"
    r"confirmer|indiquer|pr[ée]ciser|communiquer)|pourriez-vous|pouvez-vous (me )?(donner|confirmer|indiquer|"
    r"fournir|pr[ée]ciser)|j['’]ai besoin (de votre|de vos|du|de la|de connaître)|"
    r"bitte (geben|nennen|best[äa]tigen|teilen|senden|schicken) sie|k[öo]nnten sie (mir )?(bitte )?"
    r"(ihre|die|den|das|best[äa]tigen|sagen|mitteilen|nennen)|ich (ben[öo]tige|brauche) (ihre|die|den|das|noch)|"
    r"por favor,? (informe|me informe|confirme|envie|forne[çc]a)|preciso (do|da|de|que)|"
    r"per favore,? (indichi|fornisca|confermi|mi dica)|potrebbe (indicarmi|fornirmi|confermarmi|dirmi)|"
    r"ho bisogno (del|della|di))", re.I)
#: a question or request that closes a reply politely without asking for anything
_COURTESY = re.compile(
    r"(?<!before )(?<!first, )(anything|something) (else|more|further)|"
    r"any (other|more|further) (questions?|help|assistance|requests?|"
    r"concerns?)|(is|was) (this|that) (helpful|clear)|does (this|that) (help|answer)|how else|"
    r"(is there|can i|may i|could i) (help|assist)( you)? with (anything|something)|"
    r"let me know if (you|there)|(tell me|let me know) when (you['’]re|you are) ready|(tell me|let me know) when "
    r"you(['’]d like| would like| want) to (go ahead|proceed|continue|start)|feel free to|don['’]t hesitate|"
    r"if you (need|have) (any|anything|more|further)|"
    r"algo m[aá]s|otra (cosa|consulta|pregunta)|en qu[eé] m[aá]s|autre chose|d['’]autres questions|"
    r"puis-je vous aider (avec|pour) autre|sonst noch|weitere fragen|noch etwas|mais alguma|algo mais|"
    r"altro (in cui|che)|posso aiutarla (con|in) altro", re.I)
#: a sentence with nothing to judge: a greeting, a thanks, an acknowledgement, a farewell
_PLEASANTRY = re.compile(
    r"^[\W_]*(hello|hi|hey|good (morning|afternoon|evening)|hola|buen[oa]s (d[ií]as|tardes|noches)|no problem|sure|"
    r"ok(ay)?|noted|got it|understood|perfect|great|of course|certainly|safe travels|(i['’]m|we['’]re|so) sorry"
    r"( to hear( that| it)?| (it|that|for|about)[\w' ]+)?|thanks?( you)?( so much| for [\w ]+)?|"
    r"you['’]re welcome|take (care|your time)|bye|goodbye|have a (nice|good|great|lovely) \w+|enjoy [\w ]+|"
    r"one moment[\w ,]*|just a moment[\w ,]*|(how|what) can i (help|do)( you)?( with [\w ]+)?( for you)?( today)?|"
    r"de acuerdo|entendido|perfecto|vale|claro|gracias|de nada|cu[ií]date|adi[oó]s|hasta (luego|pronto)|"
    r"un momento[\w ,]*|¿?en qu[eé] (le |te )?puedo ayudar[\w ]*|que (le|te) vaya bien|disfrute[\w ]*|cheers|"
    r"no worries( at all)?|sure thing|on it|yes|(i['’]m|we['’]re) (still )?(here|not going anywhere)|"
    r"sorry (for|about) the (wait|delay)|(that['’]s|it['’]s) (completely |totally |perfectly )?(understandable|fine)|"
    r"let me (take a look|have a look|look into (it|that|this)|check)( at (it|that|this))?( for you)?|"
    r"(pulling|bringing|looking) (it|them|that|those) up( now)?|still (looking|checking|searching)[\w ]*|"
    r"un placer|estupendo|genial|a usted|igualmente|cu[ií]dese|que tenga (un )?buen[\w ]*)"
    r"[\W_]*$", re.I)
_REFUSING = re.compile(
    r"(\bcan['’]?t\b|\bcannot\b|\bcan not\b|\bunable\b|\bnot able\b|\bwon['’]?t be able\b|\bnot possible\b|"
    r"\bisn['’]?t possible\b|\boutside (of )?(what|my|the|our)\b|\bfalls? outside\b|"
    r"\bbeyond (this|what|my|our|the scope)\b|"
    r"\bagainst (the |our |airline |company )?polic|\bnot (allowed|permitted|eligible|authori[sz]ed|in a position)\b|"
    r"\b(isn['’]?t|aren['’]?t) (allowed|permitted|eligible)\b|"
    r"\b(i|we) only (handle|organi[sz]e|arrange|help|assist|deal|support)|\b(i['’]m|i am) only able\b|"
    r"\bnot something (i|we) (can|do|are able)\b|\b(isn['’]?t|is not) something (i|we)\b|"
    r"\b(don['’]?t|do not) (handle|do|offer|provide|support|make exceptions|have (the ability|access))\b|"
    r"\b(must|have to|need to|will have to|['’]ll have to) decline\b|\bdecline (to|your|this|that)\b|"
    r"\b(i['’]ll|i will|i['’]d|we['’]ll) (have to )?pass\b|\bi['’]d rather not\b|\bnot an option\b|"
    r"\b(that['’]s|is|it['’]s) up to (your|the|a)\b|\bnot supported\b|\bno longer (possible|eligible|allowed)\b|"
    r"\bcan only be \w+ by\b|\bout of (my|our) (hands|scope|control)\b|\bnot (my|our) (place|area|call)\b|"
    r"\byou['’]ll (need|have) to (contact|ask|speak|call|reach|go through|check with)\b|\bno se puede\b|"
    r"\bnot something (i|we) (offer|provide|support|handle)\b|"
    r"\bnot something (i|we)(['’]ll| will| would)\b|\b(isn['’]?t|aren['’]?t|is not|are not) something [\w ]{1,20}?"
    r"\b(can|could|['’]m able|am able|are able|is able|offer|do|provide|handle|grant|arrange)\b|"
    r"\b(isn['’]?t|aren['’]?t|is not|are not) part of (what|my|our|the service)\b|"
    r"\bnot (a|an) [\w -]{1,20}? (i|we) (can|could|offer|provide|handle)\b|\bno way (around|to)\b|"
    r"\b(out of stock|sold out|fully booked|(no longer |not |isn['’]?t |aren['’]?t |is not |are not )available)\b|"
    r"\b(don['’]?t|doesn['’]?t|do not|does not) have (the )?(permission|rights?|access|authori[sz]ation)\b|"
    r"\b(isn['’]?t|is not) the way to\b|\b(unfortunately|sadly|lamentablemente|desafortunadamente|por desgracia|"
    r"malheureusement|purtroppo|infelizmente)\b|\b(i['’]m sorry|sorry|lo siento|lo lamento|d[ée]sol[ée]),? but\b|"
    r"\blo (siento|lamento),? pero\b|\b(i['’]d|i would|we['’]d) (suggest|recommend) (contacting|reaching out|calling|"
    r"asking|going to|checking with)\b|\b(i['’]m|i am) (going to|gonna) have to (say no|decline|pass)\b|"
    r"\b(have|has) to (go|be done|be handled) (through|by)\b|\b(i|we) can only\b|\bonly available (to|for|in)\b|"
    r"\b(don['’]?t|do not|no longer) (ship|sell|carry|issue|accept|share|disclose|give out|grant|waive|process)\b|"
    r"\bno (ofrecemos|hacemos|enviamos|vendemos|aceptamos|compartimos|damos|gestionamos|realizamos|atendemos)\b|"
    r"\bno se (permite|permiten|admite|admiten|puede|pueden)\b|"
    r"\b(is|are|es|son) (private|privad[oa]s?|confidential|confidencial(es)?)\b|"
    r"\bs[oó]lo (atendemos|gestionamos|ofrecemos|trabajamos|hacemos|manejamos)\b|\bme temo que\b|"
    r"\bno (tiene|tengo|tenemos) (permiso|acceso|autorizaci[oó]n)\b|"
    r"\bno (admite|permite|acepta|cubre|incluye)\b|\bno (est[aá]n?) disponibles?\b|"
    r"\bno (lo|la|los|las|le|les) (muestro|comparto|hago|doy|env[ií]o|proporciono|facilito)\b|"
    r"\b(i|we) won['’]t\b|\bi['’]m afraid\s*([.!—–,;]|$)|\b(something|one) only\b|"
    r"\bonly (a|an|the|your|our) [\w -]{1,40}? can\b|\bleave (it |that |this )?to\b|\bstick to\b|"
    r"\bnot the one to\b|\bnot in my hands\b|\b(a|the) (decision|call) for\b|\bisn['’]?t a \w+ (i|we)['’]d\b|"
    r"\bkeep [\w' ]{1,30} confidential\b|\bfuera de lo que\b|\bno est[aá] en mis manos\b|"
    r"\bno es algo que (yo )?\w+\b|\bno (le|te|lo|la|les) (puedo|podemos)\b|\b(lo|la) (debe|tiene que) "
    r"(decidir|hacer)\b|"
    r"\bnon-?refundable\b|\bno exceptions?\b|\bnot (within|part of) (my|our|what)\b|"
    r"\b(does|do|is|are) not (cover|allow|permit|covered|allowed|permitted|refundable|available to)\b|"
    r"\b(doesn['’]?t|don['’]?t) (allow|permit|cover)\b|\bi['’]m afraid (i|we|that|this|it)\b|\bregrettably\b|"
    r"\bno (puedo|podemos|es posible|me es posible)\b|\bno est[aá] permitido\b|\bfuera de (mi|nuestro)|"
    r"\bje ne (peux|suis pas en mesure)|\bnous ne (pouvons|sommes pas)|\bpas possible\b|"
    r"\bn['’]est pas (autoris|permis|possible)|"
    r"\b(kann|können|darf|dürfen) (ich|wir) (leider )?(nicht|keine)|\bleider nicht\b|\bnicht m[öo]glich\b|"
    r"\bn[ãa]o (posso|podemos|[ée] poss[ií]vel)\b|\bnon (posso|possiamo|[èe] possibile)\b)", re.I)
_FIRST_PERSON = re.compile(r"\b(i|we|i['’]m|we['’]re|i['’]ll|me|my|our|puedo|podemos|mi|mis|je|nous|ich|wir|"
                           r"atendemos|gestionamos|ofrecemos|trabajamos|hacemos|manejamos)\b", re.I)
_INTERROGATIVE = re.compile(r"\s*¿|\s*(can|could|may|is|are|do|does|will|would|what|which|when|where|how|why|who|"
                            r"puedo|puede|se puede|es posible|cu[aá]ndo|c[oó]mo|qu[eé])\b", re.I)
#: :data:`ASKING` searched fast in ASCII text (:class:`~pytest_tooleffect.oracle.sentences.Folded`)
ASKING_FOLDED = Folded(ASKING)
_COURTESY_FOLDED, _REFUSING_FOLDED = Folded(_COURTESY), Folded(_REFUSING)
#: a refusal phrase that only says a detail is missing (``I can't look it up without your id``)
_CONDITIONAL = re.compile(r"\b(without|until|unless|before|first need|till|sin (su|tu|el|la)|sans (votre|vos|le|la)|"
                          r"ohne (ihre|die|den|das)|senza)\b", re.I)


class ReplyCheck(NamedTuple):
    """The reply's result against its criteria.

    Attributes:
        ok: every check passed.
        reply: the reply kind the label asked for, or ``None``.
        kind_ok: the reply did what ``reply`` asked (``None`` when it asked nothing).
        failures: one line per failed check (``reply ask: …``, ``must: …``, ``must_not: …``).
        approximate: some check was judged by the deterministic fallback.
        low_precision: the reply kind was judged by the fallback, whose measured precision for
            that kind is under :data:`USEFUL_PRECISION` (a gate can refuse to rest on it).

    """

    ok: bool
    reply: str | None
    kind_ok: bool | None
    failures: tuple[str, ...]
    approximate: bool
    low_precision: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Plain-dict form for records."""
        return {"ok": self.ok, "reply": self.reply, "kind_ok": self.kind_ok, "failures": list(self.failures),
                "approximate": self.approximate, "low_precision": self.low_precision}


def _asks_in(sentence: str) -> bool:
    """One sentence asks the user for something: a question that is not a courtesy, or a request."""
    # the cheaper checks first: most sentences ask nothing
    if not (is_question(sentence) or ASKING_FOLDED.search(sentence)):
        return False
    return not _COURTESY_FOLDED.search(sentence)


def _refuses_in(sentence: str, asked: bool) -> bool:
    """One sentence declines: a refusal phrase, not one that only names a missing detail, nor (when
    the user asked a question: ``asked``) a rule stated without a first person (an answer).
    """
    if not any(not _CONDITIONAL.search(sentence[m.start():]) for m in _REFUSING_FOLDED.finditer(sentence)):
        return False  # no refusal phrase, or each only names a missing detail
    return not asked or bool(_FIRST_PERSON.search(sentence))


def _is_question_from(user: str) -> bool:
    return any(is_question(s) for s in sentences(user)) or bool(_INTERROGATIVE.match(user))


def classify_reply(text: str | None, user: str | None = None) -> str:
    """The one kind a reply reads as, by the deterministic fallback.

    ``none`` for no text, or only pleasantries (a greeting, thanks, ``noted``, ``one moment``, a
    farewell); else ``refuse`` when some sentence
    declines (a refusal phrase not followed by ``without``/``until``/``unless``…, which names a
    missing detail instead); else ``ask`` when some sentence is a question or a request that is
    not a courtesy closing (``Anything else?``, ``let me know if you need more``); else ``answer``.
    Sentences are cut by :func:`~pytest_tooleffect.oracle.sentences.sentences`.

    A refusal phrase in a reply to a question (``user`` given and a question), stated without a
    first person (``Non-refundable rates aren't returned for illness``), states a rule: an answer.

    Args:
        text: the reply's text.
        user: the user's last message, when known.

    Returns:
        ``ask``, ``refuse``, ``answer`` or ``none``.
    """
    parts = sentences(text or "")
    if all(_PLEASANTRY.match(c) or not re.search(r"\w", c) for s in parts for c in re.split(r"[,;—–]", s)):
        return "none"
    asked = bool(user) and _is_question_from(user or "")
    if any(_refuses_in(s, asked) for s in parts):
        return "refuse"
    if any(_asks_in(s) for s in parts):
        return "ask"
    return "answer"


def _content(text: str) -> set[str]:
    """Content words (three letters or more), each cut to its first five letters (a crude stem)."""
    return {t[:5] for t in tokens(text) if len(t) > 2}


def _last_user(messages: Sequence[Any]) -> str | None:
    """The text of the conversation's last user message, if any."""
    for m in reversed(messages):
        if isinstance(m, dict) and m.get("role") == "user":
            content = m.get("content")
            return content if isinstance(content, str) else None
    return None


def _fallback_must(criterion: str, text: str) -> bool:
    want = _content(criterion)
    return not want or len(want & _content(text)) * 2 >= len(want)


def _fallback_must_not(criterion: str, text: str) -> bool:
    banned = _content(criterion)
    return not banned or not banned <= _content(text)


def judge_reply(text: str | None, reply: str | None, must: Sequence[str], must_not: Sequence[str],
                ctx: CompareContext, reason: str | None = None) -> ReplyCheck:
    """Judge a no-tool reply's text against what the label says it must do.

    Args:
        text: the reply's text (``None`` or empty: no text).
        reply: ``ask``, ``refuse``, ``answer`` or ``None``.
        must: criteria the reply must meet (free text).
        must_not: criteria the reply must not meet (free text).
        ctx: the comparison's context; ``ctx.judge`` (``(rubric, expected, got) -> (ok, reason)``)
            judges each check when set.
        reason: the label's reason for the null action, shown to the judge as the reference.

    Returns:
        The :class:`ReplyCheck`.

    Raises:
        ValueError: ``reply`` is not one of :data:`REPLY_KINDS`.
        Exception: whatever the judge raises (a judge failure is an error, never a verdict).

    """
    if reply is not None and reply not in REPLY_KINDS:
        raise ValueError(f"reply {reply!r}: one of {', '.join(REPLY_KINDS)}")
    got = (text or "").strip()
    judge = ctx.judge
    failures: list[str] = []
    kind_ok: bool | None = None
    if reply is not None:
        if not got:
            kind_ok = False
        elif judge is not None:
            kind_ok, why = judge(RUBRICS[reply], reason or f"a reply that does this: {reply}", got)
            if not kind_ok:
                failures.append(f"reply {reply}: {why}")
        else:
            kind_ok = classify_reply(got, _last_user(ctx.messages)) == reply
        if not kind_ok and not failures:
            failures.append(f"reply {reply}: " + ("no text" if not got else f"the reply does not {reply} (fallback)"))
    for criterion in must:
        if judge is not None and got:
            ok, why = judge(f"The reply does this: {criterion}", criterion, got)
        else:
            ok, why = bool(got) and _fallback_must(criterion, got), "not found in the reply (fallback)"
        if not ok:
            failures.append(f"must: {criterion}: {why}")
    for criterion in must_not:
        if judge is not None and got:
            ok, why = judge(f"The reply does NOT do this: {criterion}", f"a reply that does not: {criterion}", got)
        else:
            ok, why = _fallback_must_not(criterion, got), "the reply does it (fallback)"
        if not ok:
            failures.append(f"must_not: {criterion}: {why}")
    checked = reply is not None or bool(must) or bool(must_not)
    low = judge is None and reply is not None and bool(got) and FALLBACK_PRECISION[reply] < USEFUL_PRECISION
    return ReplyCheck(not failures, reply, kind_ok, tuple(failures), checked and judge is None, low)
