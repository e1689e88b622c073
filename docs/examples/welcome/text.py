"""The greeting's wording, kept apart from the handler (imported as ``from .text import``)."""

from __future__ import annotations


def render(greeting: str, reason: object) -> str:
    """The greeting, noting a session restarted by ``/new`` or ``/reset``."""
    if reason in ("new", "reset"):
        return f"{greeting} (a fresh session, after /{reason})"
    return greeting
