"""A URL shown without its password: in usage errors and in the messages of a backend that failed.

Text only, no parsing that can fail: a URL too broken for :func:`urllib.parse.urlsplit` (an
unclosed ``[``, a port that is no number) is still shown with its credentials hidden.

It imports only :mod:`~pytest_tooleffect.util.redaction` (for its marker): every stage may use it.
"""

from __future__ import annotations

import re

from pytest_tooleffect.util.redaction import REDACTED

__all__ = ["HIDDEN", "url_secrets", "without_password"]

#: what a URL's password (or its whole user part, when it has no ``user:``) is shown as: the
#: redaction's own marker, so a URL reads the same whichever of the two cut it
HIDDEN = REDACTED
#: a query parameter that carries a credential (``?password=…``, ``&token=…``)
_SECRET_QUERY = re.compile(r"([?&](?:[A-Za-z0-9_]*(?:pass(?:word|wd)?|secret|token|auth|key))=)[^&#]*", re.I)


def _split(url: str) -> tuple[str, str, str] | None:
    """``(scheme://, user part, rest after '@')`` of ``url``, or ``None`` when it has no user part.

    The user part ends at the last ``@`` before the fragment, so a password holding ``/`` or ``@``
    (which URL parsers would cut elsewhere) is still inside it.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    base = rest.partition("#")[0]
    at = base.rfind("@")
    if at < 0:
        return None
    return scheme + sep, rest[:at], rest[at + 1:]


def without_password(url: str) -> str:
    """``url`` with its password (``user:PASSWORD@``, or a lone ``SECRET@``) and any credential in
    its query shown as :data:`HIDDEN`.

    Args:
        url: a URL, well formed or not.

    Returns:
        The URL to show.
    """
    parts = _split(url)
    if parts is not None:
        head, userinfo, rest = parts
        user, colon, _ = userinfo.partition(":")
        url = f"{head}{user}:{HIDDEN}@{rest}" if colon else f"{head}{HIDDEN}@{rest}"
    return _SECRET_QUERY.sub(lambda m: m.group(1) + HIDDEN, url)


def url_secrets(url: str) -> list[str]:
    """The credentials written in ``url``: the password of its user part (``user:PASSWORD@``) and
    the values of its credential query parameters (a lone ``user@`` is a user name, not one).
    """
    found = [m.group(0)[len(m.group(1)):] for m in _SECRET_QUERY.finditer(url)]
    parts = _split(url)
    if parts is not None:
        _, colon, password = parts[1].partition(":")
        if colon and password:
            found.insert(0, password)
    return [s for s in found if s]
