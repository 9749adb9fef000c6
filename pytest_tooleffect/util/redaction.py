"""The secrets a run knows, and their redaction from everything it writes or prints.

A run knows a secret when it could send one: the value of every environment variable a policy
names with ``api_key_env``, and the value of every variable whose name says it holds a
credential (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ``GEMINI_API_KEY``, ``HF_TOKEN``,
``AWS_SECRET_ACCESS_KEY``, …: :data:`SECRET_NAME`), the variables litellm reads a provider's key
from; and the value of every policy setting whose name says it holds one
(:func:`register_secret_settings`).  :func:`redact` replaces each known value in a text with :data:`REDACTED`; the error
messages of providers and agents, every record, the report's files, pytest's reports (so JUnit
and pytest-json-report) and the model cache pass through it.

:func:`looks_like_key` tells a key written into a file (a policy's fields) from the name of a
variable that holds one; a policy file holding a key is refused at load.

This module imports nothing of the plugin: every stage may use it.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["ENV_NAME", "MIN_SECRET_LEN", "REDACTED", "SECRET_NAME", "json_may_hold_secret", "known", "looks_like_key",
           "new_scope", "redact",
           "redact_obj", "register", "register_environment", "register_secret_settings", "register_url_credentials",
           "restore_scope", "secret_name"]

#: one word of a parameter name that says it holds a secret: ``auth…`` (``authorization``, not ``author``), or a word
#: ending in ``key``, ``token``, ``secret``, ``password``/``passwd``, ``passphrase``, ``credential(s)``,
#: ``cookie`` or ``bearer``, or holding ``secret`` or ``passw`` (``max_tokens`` and ``keyword`` are not)
_SECRET_WORD = re.compile(r"^auth(?!or(?!i[sz]))|secret|passw"
                          r"|(?:key|token|passphrase|credentials?|cookie|bearer)$")
#: the words of a name: split at anything not a letter or digit and where a lower-case letter or
#: digit meets an upper-case one (``authHeader``, ``X-Api-Key``)
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
#: What a secret's value is replaced with.
REDACTED = "<redacted>"
#: Values shorter than this are not treated as secrets (``"1"`` or ``"true"`` in a variable named
#: ``*_TOKEN`` would otherwise be cut out of every number and word).
MIN_SECRET_LEN = 8
#: Environment variable names that hold a credential (matched case-insensitively at the end of the name).
SECRET_NAME = re.compile(r"(?:^|_)(?:API_?KEY|ACCESS_KEY|SECRET(?:_ACCESS)?(?:_KEY)?|TOKEN|PASSWORD|PASSWD|"
                         r"AUTH_TOKEN|CREDENTIALS?)$", re.IGNORECASE)
#: An environment variable's name (what ``api_key_env`` must hold).
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: Shapes of keys as providers issue them (OpenAI/Anthropic/OpenRouter ``sk-``, Google ``AIza``,
#: Hugging Face ``hf_``, GitHub ``ghp_``…, Slack ``xox?-``, AWS access key ids, bearer tokens,
#: JWTs), and credentials in a URL (``https://user:secret@host``, ``?key=…``).
_KEY_SHAPES = re.compile(
    r"\bsk-[A-Za-z0-9_\-]{12,}|\bAIza[0-9A-Za-z_\-]{20,}|\bhf_[A-Za-z0-9]{20,}|\bgh[pousr]_[A-Za-z0-9]{20,}"
    r"|\bxox[abprs]-[A-Za-z0-9\-]{10,}|\bAKIA[0-9A-Z]{16}\b|\bBearer\s+\S{8,}|\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"
    r"|://[^/\s:@]+:[^/\s@]+@|[?&](?:api[_-]?key|key|token|access_token)=[^&\s]{8,}",
    re.IGNORECASE)

#: credentials in a URL: ``scheme://user:password@`` or ``scheme://token@`` (user information)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^/\s@?#:]*)(?::(?P<password>[^/\s@?#]*))?@")

_lock = threading.Lock()
_known: set[str] = set()
_pattern: re.Pattern[str] | None = None
_json_pattern: re.Pattern[str] | None = None


def register(value: str | None) -> None:
    """Know ``value`` as a secret from now on (ignored when shorter than :data:`MIN_SECRET_LEN`)."""
    global _pattern, _json_pattern
    if not value or len(value) < MIN_SECRET_LEN:
        return
    with _lock:
        if value not in _known:
            _known.add(value)
            _pattern = _json_pattern = None


def register_url_credentials(text: str) -> None:
    """Know the password (or the lone user, a token) of every URL with credentials in ``text``
    (``redis://:PASSWORD@host``, ``https://user:PASSWORD@proxy``), so it is cut wherever it shows
    on its own too.
    """
    if "://" not in text or "@" not in text:
        return
    for match in _URL_CREDENTIALS.finditer(text):
        register(match.group("password") if match.group("password") is not None else match.group("user"))


def register_environment(environ: Mapping[str, str] | None = None, names: tuple[str, ...] = ()) -> None:
    """Know the value of every credential variable (:data:`SECRET_NAME`) and of each of ``names``,
    and the credentials of every URL a variable holds (a proxy's ``user:password@``).
    """
    env = os.environ if environ is None else environ
    for name, value in env.items():
        if name in names or SECRET_NAME.search(name):
            register(value)
        register_url_credentials(value)


def register_secret_settings(settings: Any) -> None:
    """Know the value of every setting whose name says it holds a secret (:func:`secret_name`:
    ``password``, ``db_password``, ``client_secret``, ``auth_header``, …), at any depth of a JSON-like
    value (a policy's ``settings``): every string and whole number under such a name.  An agent
    reads its settings (``state.policy``): one that repeats them shows the values cut out.
    """
    def leaves(value: Any) -> Iterator[str]:
        if isinstance(value, str):
            yield value
        elif isinstance(value, int) and not isinstance(value, bool):
            yield str(value)
        elif isinstance(value, Mapping):
            for v in value.values():
                yield from leaves(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                yield from leaves(v)

    if isinstance(settings, Mapping):
        for key, value in settings.items():
            if secret_name(str(key)):
                for leaf in leaves(value):
                    register(leaf)
            else:
                register_secret_settings(value)
    elif isinstance(settings, (list, tuple)):
        for value in settings:
            register_secret_settings(value)


def known() -> frozenset[str]:
    """The secrets known so far."""
    with _lock:
        return frozenset(_known)


def new_scope() -> frozenset[str]:
    """Start a run's own secrets: forget every secret known so far and return them, for
    :func:`restore_scope` at the run's end.  A pytest run calls it at configure, so the secrets of
    one run (pytester runs a run inside another's process) are never the next one's.
    """
    global _pattern, _json_pattern
    with _lock:
        before = frozenset(_known)
        _known.clear()
        _pattern = _json_pattern = None
    return before


def restore_scope(before: frozenset[str]) -> None:
    """End a run's secrets: the known secrets are ``before`` again (what :func:`new_scope` returned)."""
    global _pattern, _json_pattern
    with _lock:
        _known.clear()
        _known.update(before)
        _pattern = _json_pattern = None


def secret_name(name: str) -> bool:
    """Whether a parameter or setting ``name`` says it holds a secret (``api_key``, ``X-Api-Key``,
    ``auth_header``, ``authorization``, ``client_secret``, ``accessToken``, ``db_password``, …): left
    out of the report whatever its value.  A name ending in ``env`` names a variable, not a secret
    (``api_key_env``); ``max_tokens``, ``keyword`` and ``author`` are no secrets.
    """
    words = [w.lower() for w in _WORDS.findall(name)]
    if not words or words[-1] == "env":
        return False
    return any(_SECRET_WORD.search(w) for w in words) or _SECRET_WORD.search("".join(words)) is not None


def _compiled() -> re.Pattern[str] | None:
    global _pattern
    with _lock:
        if _pattern is None and _known:  # longest first: a key that contains another is cut whole
            _pattern = re.compile("|".join(re.escape(v) for v in sorted(_known, key=len, reverse=True)))
        return _pattern


def _without_url_credentials(match: re.Match[str]) -> str:
    user, password = match.group("user"), match.group("password")
    if password is not None:
        return f"{match.group('scheme')}{user}:{REDACTED}@"
    return f"{match.group('scheme')}{REDACTED}@" if user else match.group()


def _cut(text: str, pattern: re.Pattern[str] | None) -> str:
    if not text:
        return text
    if pattern is not None:
        text = pattern.sub(REDACTED, text)
    if "://" in text and "@" in text:
        text = _URL_CREDENTIALS.sub(_without_url_credentials, text)
    return text


def redact(text: str) -> str:
    """``text`` with every known secret replaced by :data:`REDACTED`, and the credentials of every
    URL in it too (``redis://:<redacted>@host``, ``https://user:<redacted>@proxy``,
    ``https://<redacted>@host`` for a lone user, a token), known or not.
    """
    return _cut(text, _compiled())


def json_may_hold_secret(text: str) -> bool:
    """Whether :func:`redact_obj` could change the JSON value ``text`` encodes (``json.dumps(...,
    ensure_ascii=False)``): a known secret is in it (as JSON writes it), or a URL may carry
    credentials.  A test over the text, for many values where a walk over each would cost seconds;
    never ``False`` of a value :func:`redact_obj` changes.
    """
    global _json_pattern
    if "://" in text and "@" in text:
        return True
    with _lock:
        if _json_pattern is None and _known:  # each secret as JSON text holds it (a quote escaped)
            _json_pattern = re.compile("|".join(re.escape(json.dumps(v, ensure_ascii=False)[1:-1]) for v in _known))
        pattern = _json_pattern if _known else None
    return pattern is not None and pattern.search(text) is not None


def redact_obj(obj: Any) -> Any:
    """A copy of a JSON-like value (dicts, lists, strings) with :func:`redact` applied to its
    strings and keys; other values are returned as they are.
    """
    pattern = _compiled()

    def walk(value: Any) -> Any:
        if isinstance(value, str):
            return _cut(value, pattern)
        if isinstance(value, Mapping):
            return {_cut(k, pattern) if isinstance(k, str) else k: walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        return value

    return walk(obj)


def looks_like_key(text: str) -> bool:
    """Whether ``text`` holds something shaped like a credential (a provider's key, a bearer token,
    credentials in a URL), as opposed to the name of a variable that holds one.
    """
    return bool(_KEY_SHAPES.search(text))
