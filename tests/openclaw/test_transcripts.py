"""Transcripts as OpenClaw reads them: a session file a running gateway wrote, read by OpenClaw's
own session-file functions (``transcript.mjs``, from the installed package's ``dist/``).

A hook written for OpenClaw that reads ``sessionFile`` reads it with those functions or with the
same rules: the header, ``message`` entries chained by ``parentId``, ``message.role`` and the text
parts of ``message.content``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.openclaw import reference
from tests.support.fixtures import StartGateway
from tests.support.hooks import write_hook_dir
from tests.support.state import session_table

TRANSCRIPT_READER = Path(__file__).with_name("transcript.mjs")

pytestmark = pytest.mark.anyio


def openclaw_reads(path: Path) -> dict[str, Any]:
    """What OpenClaw's session-file functions make of ``path``."""
    node = reference.required()
    done = subprocess.run(
        [node, str(TRANSCRIPT_READER), str(reference.package_dir()), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


ECHO = """
async def handler(event):
    event.messages.append("echo: " + event.context["content"])
    event.messages.append("second line")
"""


async def test_openclaw_reads_the_conversation_a_gateway_wrote(
    state_dir: Path, start_gateway: StartGateway
) -> None:
    write_hook_dir(state_dir / "hooks", "echo", events=["message:received"], handler=ECHO)
    gateway = await start_gateway()
    await gateway.send("hello", session="agent:main:main")
    await gateway.send('quotes " and a line\nbreak \u2028 é', session="agent:main:main")
    assert await gateway.stop() == 0
    # A new run goes on from the last entry of the file it finds.
    gateway = await start_gateway()
    await gateway.send("after a restart", session="agent:main:main")
    assert await gateway.stop() == 0
    entry = session_table(state_dir)["agent:main:main"]

    read = openclaw_reads(Path(entry["sessionFile"]))

    assert read["opaque"] == []  # every line is an entry OpenClaw recognizes
    assert read["current"] and not read["migrated"]
    assert read["header"]["id"] == entry["sessionId"]
    assert read["header"]["cwd"] == str(state_dir / "workspace")
    said = [(m["role"], m["text"]) for m in read["messages"]]
    assert said == [
        ("user", "hello"),
        ("assistant", "echo: hello"),
        ("assistant", "second line"),
        ("user", 'quotes " and a line\nbreak \u2028 é'),
        ("assistant", 'echo: quotes " and a line\nbreak \u2028 é'),
        ("assistant", "second line"),
        ("user", "after a restart"),
        ("assistant", "echo: after a restart"),
        ("assistant", "second line"),
    ]
    assert all(isinstance(m["timestamp"], int) for m in read["messages"])  # epoch ms
