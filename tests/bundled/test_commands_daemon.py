"""command-logger and session-memory in a real gateway (in-process), driven over its control
socket."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timedelta
from typing import Any

import anyio
import pytest
import yaml

from tests.support.inprocess import InProcess
from tests.support.state import session_table, write_config

from .conftest import MakeDaemon, install_recorder

ISO_MS_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")

pytestmark = pytest.mark.anyio


async def log_lines(daemon: InProcess) -> list[list[dict[str, Any]]]:
    """Lines of commands.log.N ... commands.log.1, commands.log (oldest file first), parsed.

    command-logger writes its buffered lines at the end of the loop turn its handler ran in,
    and a command's reply can leave in that same turn (the event dispatched at once, the reply
    written straight to the socket): the last command's line may not be on disk yet when its
    reply arrives. A request answered after that reply is: its turn comes later."""
    if daemon.exit_code is None:  # still serving
        await daemon.request("ping")
    logs = daemon.state / "logs"
    rotated = sorted(logs.glob("commands.log.[0-9]*"), key=lambda p: -int(p.suffix[1:]))
    return [
        [json.loads(line) for line in p.read_text().splitlines()]
        for p in [*rotated, logs / "commands.log"]
    ]


async def test_one_line_per_command_and_size_rotation(make_daemon: MakeDaemon) -> None:
    daemon = await make_daemon({"command-logger": {"maxBytes": 700, "backups": 2}}).start()
    await daemon.send("hello, not a command")
    for i in range(30):
        await daemon.send(
            f"/custom-{i:02d} some args", session="agent:main:s1", sender="u7", channel="tg"
        )
    await daemon.request(
        "trigger", event="command:by-hand", sessionKey="s2"
    )  # no sender, no source

    logs = daemon.state / "logs"
    assert sorted(p.name for p in logs.iterdir()) == [
        "commands.log",
        "commands.log.1",
        "commands.log.2",
        "commands.log.lock",
    ]
    for name in ("commands.log", "commands.log.1", "commands.log.2"):
        assert 0 < (logs / name).stat().st_size <= 700
    lines = [line for file in await log_lines(daemon) for line in file]
    for line in lines:
        assert list(line) == ["timestamp", "action", "sessionKey", "senderId", "source"]
        assert ISO_MS_Z.match(line["timestamp"]), line
    assert {(x["sessionKey"], x["senderId"], x["source"]) for x in lines[:-1]} == {
        ("agent:main:s1", "u7", "tg")
    }
    assert lines[-1] | {"timestamp": ""} == {
        "timestamp": "",
        "action": "by-hand",
        "sessionKey": "s2",
        "senderId": "unknown",
        "source": "unknown",
    }
    # what survives rotation is the newest commands, in order, nothing missing in between
    customs = [line["action"] for line in lines[:-1]]
    assert customs == [f"custom-{i:02d}" for i in range(30 - len(customs), 30)]
    assert 5 < len(customs) < 30


async def test_backups_past_the_bound_fall_back_to_the_default(make_daemon: MakeDaemon) -> None:
    """A rotation renames each backup in turn on the event loop: ``backups: 1e12`` once froze
    the daemon at the first rotation. Past 1000 it is a bad setting, and the default (5) holds."""
    daemon = await make_daemon({"command-logger": {"maxBytes": 300, "backups": 10**12}}).start()
    for i in range(20):
        await daemon.send(f"/c{i:02d}")
    warning = await daemon.wait_log("command_logger.bad_setting")
    assert warning["key"] == "hooks.entries.command-logger.backups", warning
    assert "from 0 to 1000" in warning["fix"], warning
    rotated = sorted(p.name for p in (daemon.state / "logs").glob("commands.log.*[0-9]"))
    assert rotated == [f"commands.log.{n}" for n in range(1, 6)]
    assert await daemon.stop() == 0


async def test_a_fifo_where_the_log_goes_is_never_waited_on(make_daemon: MakeDaemon) -> None:
    """Opening a FIFO for writing waits for a reader: it held the event loop, so no command,
    nor anything else, was answered again."""
    setup = make_daemon()
    (setup.state / "logs").mkdir(mode=0o700)
    os.mkfifo(setup.state / "logs" / "commands.log")
    daemon = await setup.start()
    assert (await daemon.send("/new"))["command"] == "new"
    failed = await daemon.wait_log("command_logger.failed")
    assert "is a FIFO, not a regular file" in failed["error"], failed
    assert (await daemon.request("ping"))["pong"] is True
    assert await daemon.stop() == 0


async def test_concurrent_commands_never_interleave_or_get_lost(make_daemon: MakeDaemon) -> None:
    daemon = await make_daemon({"command-logger": {"maxBytes": 3000, "backups": 1000}}).start()
    sessions, per_session = 8, 25
    errors: list[BaseException] = []

    async def client(s: int) -> None:
        try:
            for i in range(per_session):
                await daemon.send(f"/c{s}-{i}", session=f"agent:main:p{s}", sender="x" * (i % 40))
        except Exception as exc:
            errors.append(exc)

    with anyio.fail_after(120):  # one client per session, all at once
        async with anyio.create_task_group() as tg:
            for s in range(sessions):
                tg.start_soon(client, s)
    assert not errors

    files = await log_lines(daemon)  # every line parses: no torn or interleaved line anywhere
    assert len(files) > 5  # rotated several times while commands were being logged
    actions = [line["action"] for file in files for line in file]
    expected = [f"c{s}-{i}" for s in range(sessions) for i in range(per_session)]
    assert sorted(actions) == sorted(expected)
    for s in range(sessions):  # one session's commands are logged in the order it sent them
        assert [a for a in actions if a.startswith(f"c{s}-")] == [
            f"c{s}-{i}" for i in range(per_session)
        ]


async def command_date(daemon: InProcess, nth: int = -1) -> str:
    """The UTC date of the ``nth`` /new or /reset in commands.log: the event's own timestamp,
    which session-memory names its file by."""
    resets = ("new", "reset")
    news = [line for file in await log_lines(daemon) for line in file if line["action"] in resets]
    return str(news[nth]["timestamp"][:10])


async def test_memory_file_content_and_no_overwrite(make_daemon: MakeDaemon) -> None:
    setup = make_daemon({"session-memory": {"messages": 5}})
    install_recorder(setup.workspace)  # replies "echo: <text>": the assistant side
    memory = setup.workspace / "memory"
    memory.mkdir()
    today = datetime.now().astimezone().date()
    for near in (today - timedelta(days=1), today, today + timedelta(days=1)):  # any UTC date
        (memory / f"{near.isoformat()}-plan-the-friday-deploy.md").write_text("mine\n")
    daemon = await setup.start()

    for round_ in range(2):
        await daemon.send("Plan the Friday deploy!", channel="telegram")
        await daemon.send("/status")  # a slash command (and its echo) is left out
        await daemon.send("what about rollback?")
        await daemon.send(f"round {round_}")
        session_id = session_table(daemon.state)["agent:main:main"]["sessionId"]
        await daemon.send("/new", channel="telegram")

    day0, day = await command_date(daemon, 0), await command_date(daemon, 1)
    slug = "plan-the-friday-deploy"
    second = f"{day}-{slug}-3.md" if day == day0 else f"{day}-{slug}-2.md"  # midnight UTC
    for saved in (f"{day0}-{slug}-2.md", second):
        assert (memory / saved).is_file(), sorted(p.name for p in memory.iterdir())
    for name in (f"{day0}-{slug}.md", f"{day}-{slug}.md"):
        assert (memory / name).read_text() == "mine\n"  # never overwritten
    assert len(list(memory.iterdir())) == 5  # the 3 placed beforehand, 2 saved, no temp files
    text = (memory / second).read_text()
    assert re.fullmatch(
        rf"# Session {day} \d\d:\d\d:\d\d UTC\n\n"
        r"- Session key: agent:main:main\n"
        rf"- Session id: {session_id}\n"
        r"- Source: telegram\n\n"
        r"## Conversation\n\n"
        r"assistant: echo: Plan the Friday deploy!\n"
        r"user: what about rollback\?\n"
        r"assistant: echo: what about rollback\?\n"
        r"user: round 1\n"
        r"assistant: echo: round 1\n",
        text,
    ), text


async def test_empty_sessions_write_nothing(make_daemon: MakeDaemon) -> None:
    setup = make_daemon()
    install_recorder(setup.workspace)
    daemon = await setup.start()
    await daemon.send("/new")  # a key that never had a session
    await daemon.send("/new")  # a session holding only "/new" and its echo
    await daemon.send("/stop")
    await daemon.send("/reset")  # "/stop" and its echo only
    assert not (daemon.workspace / "memory").exists()
    reasons = [r["reason"] for r in daemon.events("session_memory.skipped")]
    assert reasons == ["no session", "empty session", "empty session"]


async def test_text_utf8_cannot_carry_still_gets_its_memory_file(make_daemon: MakeDaemon) -> None:
    """A lone surrogate (JSON may carry one, UTF-8 cannot) in a message or its channel once
    failed the memory file with UnicodeEncodeError: it is written escaped now."""
    daemon = await make_daemon().start()
    async with daemon.control() as control:
        for text, channel in (("caf\\udce9 plan", "t"), ("/new", "x\\ud800")):
            await control.send_raw(
                b'{"op": "message", "sessionKey": "s", "text": "%s", "channel": "%s"}\n'
                % (text.encode(), channel.encode())
            )
            reply = await control.read()
            assert reply is not None and reply["ok"] is True
    assert daemon.events("session_memory.failed") == []
    (memory,) = (daemon.workspace / "memory").iterdir()
    text = memory.read_text(encoding="utf-8")
    assert "caf\\udce9 plan" in text and "Source: x\\ud800" in text, text
    assert await daemon.stop() == 0


async def test_messages_past_the_bound_fall_back_to_the_default(make_daemon: MakeDaemon) -> None:
    """``messages: 1e20`` sized a deque past what Python takes (OverflowError): every memory
    file failed. Past 10000 it is a bad setting, and the default (15) holds."""
    daemon = await make_daemon({"session-memory": {"messages": 10**20}}).start()
    for i in range(20):
        await daemon.send(f"note {i:02d}")
    await daemon.send("/new")
    warning = await daemon.wait_log("session_memory.bad_setting")
    assert "from 1 to 10000" in warning["fix"], warning
    (memory,) = (daemon.workspace / "memory").iterdir()
    notes = [line for line in memory.read_text().splitlines() if "note " in line]
    assert len(notes) == 15 and notes[-1].endswith("note 19"), notes
    assert await daemon.stop() == 0


async def test_memory_dir_is_under_the_configured_workspace(make_daemon: MakeDaemon) -> None:
    setup = make_daemon()
    other = setup.state / "elsewhere"
    config = yaml.safe_load((setup.state / "gatewayd.yaml").read_text())
    write_config(setup.state, {**config, "workspace": {"dir": str(other)}})
    daemon = await setup.start()
    await daemon.send("Über-Plan für Ärger")
    await daemon.send("/reset")
    assert [p.name for p in (other / "memory").iterdir()] == [
        f"{await command_date(daemon)}-uber-plan-fur-arger.md"
    ]
    assert not (daemon.workspace / "memory").exists()


async def test_a_transcript_of_the_earlier_form_goes_on_and_is_read_whole(
    make_daemon: MakeDaemon,
) -> None:
    """A transcript an earlier gatewayd wrote (one ``{"role", "content"}`` object a line) is
    appended to in OpenClaw's form, and session-memory reads the messages of both."""
    setup = make_daemon({"session-memory": {"messages": 10}})
    install_recorder(setup.workspace)
    daemon = await setup.start()
    await daemon.send("first words")
    assert await daemon.stop() == 0
    path = anyio.Path(session_table(setup.state)["agent:main:main"]["sessionFile"])
    earlier = [
        {"role": "user", "content": "first words", "timestamp": "2025-01-31T09:15:02.347Z"},
        {"role": "assistant", "content": "echo: first words", "timestamp": "t"},
    ]
    await path.write_text("".join(json.dumps(line) + "\n" for line in earlier))

    daemon = await setup.start()
    await daemon.send("more words")
    lines = (await path.read_text()).splitlines()
    assert [json.loads(line).get("type") for line in lines] == [None, None, "message", "message"]
    assert json.loads(lines[2])["parentId"] is None  # the earlier lines have no ids
    await daemon.send("/new")
    [memory] = (setup.workspace / "memory").glob("*.md")
    assert memory.read_text().endswith(
        "user: first words\nassistant: echo: first words\n"
        "user: more words\nassistant: echo: more words\n"
    )
