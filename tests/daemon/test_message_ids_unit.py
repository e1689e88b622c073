"""``messageId`` of ``message:received`` (gatewayd/commands.py ``message_id``): 32 hex digits,
a fresh one per message, and a different run (or a forked child) draws different ones."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from gatewayd.commands import message_id


def test_each_message_gets_a_fresh_id_of_32_hex_digits() -> None:
    ids = [message_id() for _ in range(1000)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == len(ids)


def test_another_process_draws_other_ids() -> None:
    code = "from gatewayd.commands import message_id; print(message_id())"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() != message_id()
    assert other.stdout.strip()[:16] != message_id()[:16]


def test_a_forked_child_draws_other_ids() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first id, then out without pytest's teardown
        os.write(write, message_id().encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        child = pipe.read().decode()
    os.waitpid(pid, 0)
    assert re.fullmatch(r"[0-9a-f]{32}", child)
    assert child[:16] != message_id()[:16]
