"""``previousSessionMemory``: the ended session's last messages, for ``/new`` and ``/reset`` hooks.

OpenClaw 2026.9.6's gateway hands its ``command:new`` and ``command:reset`` hooks the ending
session's recent conversation as ``context.previousSessionMemory``, ``{status, content,
originClass}``, captured while that session is still the current one; its bundled
session-memory hook writes ``content`` into the memory file, and reads OpenClaw's own session
store only when the field is absent (a store a gateway other than OpenClaw never has). gatewayd
builds the field from the session's transcript, as OpenClaw's capture renders it:

* the last 15 user and assistant messages with text (OpenClaw's default count), a slash command
  left out;
* one line each, ``<role>: <the text as a JSON string>`` (U+0085, U+2028 and U+2029 escaped, so
  that a line of the file is a line of the conversation);
* ``originClass: "untrusted"``: OpenClaw marks a conversation untrusted unless its user is the
  owner, which a gateway's senders never are;
* ``content: null`` for a session without such messages (or no transcript yet), and ``status:
  "unavailable"`` with the ``reason`` when the transcript cannot be read.

At most the last :data:`TAIL_BYTES` of the transcript are read (OpenClaw's capture reads at most
that much too), in a worker thread.
"""

from __future__ import annotations

import json
import os
from collections import deque
from pathlib import Path
from typing import Any, Final

from gatewayd.transcript import read_messages

DEFAULT_MESSAGES: Final = 15
TAIL_BYTES: Final = 8 << 20
_LINE_BREAKS: Final = {ord(c): f"\\u{ord(c):04x}" for c in "\u0085\u2028\u2029"}
_ROLES: Final = ("user", "assistant")


def previous_session_memory(transcript: Path, keep: int = DEFAULT_MESSAGES) -> dict[str, Any]:
    """The ``previousSessionMemory`` of the session whose transcript is ``transcript`` (see
    the module docstring). Blocking: run it in a thread."""
    try:
        lines = _tail_lines(transcript)
    except FileNotFoundError:
        lines = []
    except OSError as exc:
        return {"status": "unavailable", "reason": f"{transcript}: {exc.strerror or exc}"}
    kept: deque[str] = deque(maxlen=keep)
    for message in read_messages(lines):
        role, text = message["role"], message["text"].strip()
        if role in _ROLES and text and not text.startswith("/"):
            quoted = json.dumps(text, ensure_ascii=False).translate(_LINE_BREAKS)
            kept.append(f"{role}: {quoted}")
    return {
        "status": "available",
        "content": "\n".join(kept) if kept else None,
        "originClass": "untrusted",
    }


def _tail_lines(path: Path) -> list[bytes]:
    with open(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size > TAIL_BYTES:
            file.seek(size - TAIL_BYTES)
            data = file.read()
            return data.split(b"\n")[1:]  # the first line is cut: left out
        return file.read().split(b"\n")
