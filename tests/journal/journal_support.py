"""Helpers for the journal tests: a recording hook, producers that survive restarts, the CLI.

* :func:`recording_hook`: handler source that (after an optional delay or failure) appends
  ``{id, key, session, n, pid}`` to ``<state>/<file>``, one line per dispatch.
* :class:`Producer`: a thread posting ``trigger`` requests (``wait: false``) one at a time on its
  own sessions; it counts an event accepted only on its ``queued: true`` reply, and after a lost
  connection (the daemon was killed) reconnects and resends the request it had in flight.
* :func:`events_cli`: ``python -m gatewayd events ...`` against a state dir.

The daemons, the control client and the CLI runner are the suite's (:mod:`tests.support`).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from tests.support.cli import Result, gatewayd
from tests.support.control import Control

RECORDER = """
import asyncio, json, os

PATH = os.path.join(os.environ["ELIZA_STATE_DIR"], FILE)


async def handler(event):
    DELAY
    FAIL
    line = json.dumps({"id": event.id, "key": event.key, "session": event.session_key,
                       "n": event.context.get("n"), "pid": os.getpid()})
    with open(PATH, "a") as f:
        f.write(line + "\\n")
"""


def recording_hook(file: str = "record.jsonl", delay_s: float = 0.0, fail_unless: str = "") -> str:
    """Handler source recording each dispatch to ``file``; ``fail_unless``: it raises
    ``RuntimeError`` while that file does not exist in the state dir (it records either way)."""
    fail = ""
    if fail_unless:
        fail = (
            f"if not os.path.exists(os.path.join(os.environ['ELIZA_STATE_DIR'], {fail_unless!r})):"
            "\n        with open(PATH, 'a') as f:"
            "\n            f.write(json.dumps({'id': event.id, 'failed': True}) + '\\n')"
            "\n        raise RuntimeError('not yet: ' + event.id)"
        )
    return (
        RECORDER.replace("FILE", repr(file))
        .replace("DELAY", f"await asyncio.sleep({delay_s})" if delay_s else "pass")
        .replace("FAIL", fail or "pass")
    )


def read_records(state: Path, file: str = "record.jsonl") -> list[dict[str, Any]]:
    """The recorded dispatches; a line cut short by a kill -9 is skipped."""
    path = state / file
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


class Producer(threading.Thread):
    """Posts ``(session, n)`` events in order, one request in flight; see the module docstring."""

    def __init__(self, socket_path: Path, events: list[tuple[str, int]], deadline: float) -> None:
        super().__init__(daemon=True)
        self.socket_path = socket_path
        self.events = events
        self.deadline = deadline
        self.accepted: list[tuple[str, int]] = []
        self.resent = 0
        self.refused: list[dict[str, Any]] = []
        self.error: str | None = None

    def _connect(self) -> Control:
        while True:
            try:
                return Control(self.socket_path, timeout=30)
            except OSError:
                if time.monotonic() > self.deadline:
                    raise
                time.sleep(0.05)

    def run(self) -> None:
        try:
            self._run()
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def _run(self) -> None:
        i = 0
        control: Control | None = None
        in_flight = False
        while i < len(self.events):
            if time.monotonic() > self.deadline:
                raise TimeoutError(f"posted {i} of {len(self.events)} before the deadline")
            if control is None:
                control = self._connect()
                if in_flight:
                    self.resent += 1
            session, n = self.events[i]
            try:
                in_flight = True
                reply = control.request(
                    "trigger",
                    event="command:work",
                    sessionKey=session,
                    context={"n": n},
                    wait=False,
                )
            except (OSError, AssertionError, ValueError):  # killed mid-request: resend it
                control.close()
                control = None
                continue
            in_flight = False
            if reply.get("ok"):
                self.accepted.append((session, n))
                i += 1
            elif reply["error"]["code"] == "shutting_down":
                control.close()
                control = None
                time.sleep(0.05)
            else:
                self.refused.append(reply)
                i += 1
        if control is not None:
            control.close()


def events_cli(state: Path, *args: str, timeout: float = 60) -> Result:
    """``python -m gatewayd events ARGS`` against ``state``."""
    return gatewayd(state, "events", *args, timeout=timeout)
