"""What a hook's name may be, and how a name or any text from disk is shown: one place for both.

Every name a hook is known by is checked here: its HOOK.md ``name`` (or its directory's name
when it has none) and ``hookKey`` (:func:`name_problem`), a single-file hook's path and the names
``gatewayd hooks new`` and ``hooks install`` take (:func:`slug_problem`, stricter).

**One normalisation.** A name is Unicode in NFC (:func:`normalize_name`): ``café`` written with
one code point for the ``é`` or with ``e`` and a combining accent is one name, and so one hook
(two directories that spell it both ways are a name conflict, as two of one spelling are). A
``hooks.entries`` key names the hook in the same form.

**Refused.** A name holding a character that does something to the text instead of showing
itself makes its hook ``invalid``, the reason naming the character (``U+202E RIGHT-TO-LEFT
OVERRIDE``): control characters (a newline forges a row of ``hooks list``, an ANSI escape
reaches the operator's terminal), format characters (a right-to-left override reorders what is
read, a zero-width space hides inside a look-alike), surrogates, private-use and unassigned code
points, line and paragraph separators; so is an empty name, or one longer than :data:`MAX_NAME`.

**Shown.** :func:`shown` escapes the same characters (``\\n``, ``\\x1b``, ``\\u202e``) in any
text about to be printed or logged that may come from disk: the name of a hook refused for it,
a path, a reason.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

NORMAL_FORM: Final = "NFC"
MAX_NAME: Final = 128
"""Characters in a hook's name or ``hookKey``."""
SLUG: Final = re.compile(r"[a-z0-9][a-z0-9_-]*")
"""A name ``hooks new`` and ``hooks install`` create, and each part of a single-file hook's
path: lowercase letters, digits, ``-`` and ``_``, starting with a letter or digit (a directory
name on every platform, a valid ``/command``)."""
MAX_SLUG: Final = 64

UNSHOWN: Final = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
"""Unicode categories whose characters act on the text around them instead of showing."""
_ESCAPES: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_KINDS: Final = {
    "Cc": "a control character",
    "Cf": "a format character that changes how the text reads",
    "Cs": "a lone surrogate",
    "Co": "a private-use character",
    "Cn": "an unassigned code point",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}


def normalize_name(name: str) -> str:
    """``name`` in the one normal form names have (NFC)."""
    if name.isascii():
        return name
    return unicodedata.normalize(NORMAL_FORM, name)


def shown(text: str) -> str:
    """``text`` with every character of :data:`UNSHOWN` escaped (``\\n``, ``\\x1b``,
    ``\\u202e``): safe to print on a terminal or into a line of a table or log."""
    if text.isprintable():  # the usual case: no control, format or separator character
        return text
    return "".join(_escape(ch) if unicodedata.category(ch) in UNSHOWN else ch for ch in text)


def name_problem(name: str, what: str = "hook name") -> str | None:
    """Why ``name`` (already :func:`normalize_name`-d) cannot name a hook, or None."""
    if not name.strip():
        return f"{what} must be a non-empty string, got {name!r}"
    if len(name) > MAX_NAME:
        return (
            f"{what} '{shown(name[:40])}...' is {len(name)} characters long; "
            f"the limit is {MAX_NAME}: rename the hook"
        )
    if name.isprintable():
        return None
    for ch in name:
        kind = _KINDS.get(unicodedata.category(ch))
        if kind is not None:
            label = unicodedata.name(ch, "")
            return (
                f"{what} '{shown(name)}' holds U+{ord(ch):04X}{' ' + label if label else ''} "
                f"({kind}, never shown as itself): rename the hook without it"
            )
    return None


def slug_problem(name: str) -> str | None:
    """Why ``name`` is not a name ``hooks new`` / ``hooks install`` may create, or None."""
    if not name:
        return "a hook name cannot be empty"
    if len(name) > MAX_SLUG:
        return (
            f"hook name '{shown(name[:40])}...' is {len(name)} characters long; "
            f"the limit is {MAX_SLUG}"
        )
    if not SLUG.fullmatch(name):
        suggestion = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-_")
        hint = f" (e.g. {suggestion!r})" if suggestion and SLUG.fullmatch(suggestion) else ""
        return (
            f"invalid hook name '{shown(name)}': use lowercase letters, digits, '-' and '_', "
            f"starting with a letter or digit{hint}"
        )
    return None


def _escape(ch: str) -> str:
    if ch in _ESCAPES:
        return _ESCAPES[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
