"""Keeping secrets out of what gatewayd shows: ``config show``, ``status``, error messages.

:func:`redact` copies plain data (dicts, lists, scalars) with the value of every key that looks
like a secret (``token``, ``secret``, ``password``, ``apiKey``, ``privateKey``, ``credentials``,
``auth`` ... matched on the key name, case and ``_``/``-`` ignored) replaced by
:data:`REDACTED`, and every value of every ``env`` map too (an environment variable is a secret
as often as not). :func:`is_secret_key` is the test, for code that must not echo a value. A
string holding a URL with a password (``redis://:pw@host``) has the password replaced by
``***`` (:func:`hide_url_password`), whatever its key.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar, cast

T = TypeVar("T")

REDACTED = "<redacted>"

_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^/?#@\s:]*:)[^/?#\s]*@")
"""``scheme://user:password@``: the password runs from the first ``:`` of the userinfo to the
last ``@`` before the path (an unescaped ``@`` in it stays hidden)."""

_SECRET = re.compile(
    r"(token|secret|passw(or)?d|passphrase|credential|auth(?!or)|cookie|signature"
    r"|(api|private|access|signing|encryption|client|master|webhook)_?key|^key$)"
)
_NOT_SECRET = frozenset({"hookkey", "sessionkey", "eventkey", "keys"})
"""Names that end like a secret but hold an identifier gatewayd itself shows."""


def is_secret_key(name: object) -> bool:
    """True when a key called ``name`` probably holds a secret."""
    if not isinstance(name, str):
        return False
    flat = name.lower().replace("-", "_")
    if flat.replace("_", "") in _NOT_SECRET:
        return False
    return bool(_SECRET.search(flat) or _SECRET.search(flat.replace("_", "")))


def hide_url_password(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``***``."""
    if "://" not in text or "@" not in text:
        return text
    return _URL_PASSWORD.sub(r"\1***@", text)


def _hide(value: Any) -> Any:
    """Every scalar under ``value`` redacted (``None`` stays: it says nothing)."""
    if isinstance(value, dict):
        return {k: _hide(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_hide(v) for v in value]
    return value if value is None else REDACTED


def redact(data: T) -> T:
    """A copy of ``data`` with secret-looking values and every ``env`` value redacted."""
    return cast(T, _redact(data))


def _redact(data: Any) -> Any:
    if isinstance(data, dict):
        out: dict[Any, Any] = {}
        for key, value in data.items():
            if (key == "env" and isinstance(value, dict)) or is_secret_key(key):
                out[key] = _hide(value)
            else:
                out[key] = _redact(value)
        return out
    if isinstance(data, list | tuple):
        return [_redact(v) for v in data]
    if isinstance(data, str):
        return hide_url_password(data)
    return data
