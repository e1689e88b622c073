"""command-logger and session-memory in a real ``gatewayd run``, driven over the control socket."""

from __future__ import annotations

import json
import os
import re
import threading
from datetime import datetime, timedelta
from typing import Any

import yaml

from tests.support.daemon import Daemon
from tests.support.state import session_table, write_config

from .conftest import MakeDaemon, install_recorder

ISO_MS_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def log_lines(daemon: Daemon) -> list[list[dict[str, Any]]]:
    """Lines of commands.log.N ... commands.log.1, commands.log (oldest file first), parsed.

    command-logger writes its buffered lines at the end of the loop turn its handler ran in,
    and a command's reply can leave in that same turn (the event dispatched at once, the reply
    written straight to the socket): the last command's line may not be on disk yet when its
    reply arrives. A request answered after that reply is: its turn comes later."""
    if daemon.proc.poll() is None:
        daemon.request("ping")
    logs = daemon.state / "logs"
    rotated = sorted(logs.glob("commands.log.[0-9]*"), key=lambda p: -int(p.suffix[1:]))
    return [
        [json.loads(line) for line in p.read_text().splitlines()]
        for p in [*rotated, logs / "commands.log"]
    ]


def test_one_line_per_command_and_size_rotation(make_daemon: MakeDaemon) -> None:
    daemon = make_daemon({"command-logger": {"maxBytes": 700, "backups": 2}}).start()
    daemon.send("hello, not a command")
    for i in range(30):
        daemon.send(
            f"/custom-{i:02d} some args", session="agent:main:s1", sender="u7", channel="tg"
        )
    daemon.request("trigger", event="command:by-hand", sessionKey="s2")  # no sender, no source

    logs = daemon.state / "logs"
    assert sorted(p.name for p in logs.iterdir()) == [
        "commands.log",
        "commands.log.1",
        "commands.log.2",
        "commands.log.lock",
    ]
    for name in ("commands.log", "commands.log.1", "commands.log.2"):
        assert 0 < (logs / name).stat().st_size <= 700
    lines = [line for file in log_lines(daemon) for line in file]
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


def test_backups_past_the_bound_fall_back_to_the_default(make_daemon: MakeDaemon) -> None:
    """A rotation renames each backup in turn on the event loop: ``backups: 1e12`` once froze
    the daemon at the first rotation. Past 1000 it is a bad setting, and the default (5) holds."""
    daemon = make_daemon({"command-logger": {"maxBytes": 300, "backups": 10**12}}).start()
    for i in range(20):
        daemon.send(f"/c{i:02d}")
    warning = daemon.wait_log("command_logger.bad_setting")
    assert warning["key"] == "hooks.entries.command-logger.backups", warning
    assert "from 0 to 1000" in warning["fix"], warning
    rotated = sorted(p.name for p in (daemon.state / "logs").glob("commands.log.*[0-9]"))
    assert rotated == [f"commands.log.{n}" for n in range(1, 6)]
    assert daemon.stop() == 0


def test_a_fifo_where_the_log_goes_is_never_waited_on(make_daemon: MakeDaemon) -> None:
    """Opening a FIFO for writing waits for a reader: it held the event loop, so no command,
    nor anything else, was answered again."""
    daemon = make_daemon()
    (daemon.state / "logs").mkdir(mode=0o700)
    os.mkfifo(daemon.state / "logs" / "commands.log")
    daemon.start()
    assert daemon.send("/new")["command"] == "new"
    failed = daemon.wait_log("command_logger.failed")
    assert "is a FIFO, not a regular file" in failed["error"], failed
    assert daemon.request("ping")["pong"] is True
    assert daemon.stop() == 0


def test_concurrent_commands_never_interleave_or_get_lost(make_daemon: MakeDaemon) -> None:
    daemon = make_daemon({"command-logger": {"maxBytes": 3000, "backups": 1000}}).start()
    sessions, per_session = 8, 25
    errors: list[BaseException] = []

    def client(s: int) -> None:
        try:
            for i in range(per_session):
                daemon.send(f"/c{s}-{i}", session=f"agent:main:p{s}", sender="x" * (i % 40))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(s,)) for s in range(sessions)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors

    files = log_lines(daemon)  # every line parses: no torn or interleaved line anywhere
    assert len(files) > 5  # rotated several times while commands were being logged
    actions = [line["action"] for file in files for line in file]
    expected = [f"c{s}-{i}" for s in range(sessions) for i in range(per_session)]
    assert sorted(actions) == sorted(expected)
    for s in range(sessions):  # one session's commands are logged in the order it sent them
        assert [a for a in actions if a.startswith(f"c{s}-")] == [
            f"c{s}-{i}" for i in range(per_session)
        ]


def command_date(daemon: Daemon, nth: int = -1) -> str:
    """The UTC date of the ``nth`` /new or /reset in commands.log: the event's own timestamp,
    which session-memory names its file by."""
    resets = ("new", "reset")
    news = [line for file in log_lines(daemon) for line in file if line["action"] in resets]
    return str(news[nth]["timestamp"][:10])


def test_memory_file_content_and_no_overwrite(make_daemon: MakeDaemon) -> None:
    daemon = make_daemon({"session-memory": {"messages": 5}})
    install_recorder(daemon.workspace)  # replies "echo: <text>": the assistant side
    memory = daemon.workspace / "memory"
    memory.mkdir()
    today = datetime.now().astimezone().date()
    for near in (today - timedelta(days=1), today, today + timedelta(days=1)):  # any UTC date
        (memory / f"{near.isoformat()}-plan-the-friday-deploy.md").write_text("mine\n")
    daemon.start()

    for round_ in range(2):
        daemon.send("Plan the Friday deploy!", channel="telegram")
        daemon.send("/status")  # a slash command (and its echo) is left out
        daemon.send("what about rollback?")
        daemon.send(f"round {round_}")
        session_id = session_table(daemon.state)["agent:main:main"]["sessionId"]
        daemon.send("/new", channel="telegram")

    day0, day = command_date(daemon, 0), command_date(daemon, 1)
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


def test_empty_sessions_write_nothing(make_daemon: MakeDaemon) -> None:
    daemon = make_daemon()
    install_recorder(daemon.workspace)
    daemon.start()
    daemon.send("/new")  # a key that never had a session
    daemon.send("/new")  # a session holding only "/new" and its echo
    daemon.send("/stop")
    daemon.send("/reset")  # "/stop" and its echo only
    assert not (daemon.workspace / "memory").exists()
    reasons = [r["reason"] for r in daemon.events("session_memory.skipped")]
    assert reasons == ["no session", "empty session", "empty session"]


def test_text_utf8_cannot_carry_still_gets_its_memory_file(make_daemon: MakeDaemon) -> None:
    """A lone surrogate (JSON may carry one, UTF-8 cannot) in a message or its channel once
    failed the memory file with UnicodeEncodeError: it is written escaped now."""
    daemon = make_daemon().start()
    with daemon.control() as control:
        for text, channel in (("caf\\udce9 plan", "t"), ("/new", "x\\ud800")):
            control.send_raw(
                b'{"op": "message", "sessionKey": "s", "text": "%s", "channel": "%s"}\n'
                % (text.encode(), channel.encode())
            )
            assert json.loads(control.file.readline())["ok"] is True
    assert daemon.events("session_memory.failed") == []
    (memory,) = (daemon.workspace / "memory").iterdir()
    text = memory.read_text(encoding="utf-8")
    assert "caf\\udce9 plan" in text and "Source: x\\ud800" in text, text
    assert daemon.stop() == 0


def test_messages_past_the_bound_fall_back_to_the_default(make_daemon: MakeDaemon) -> None:
    """``messages: 1e20`` sized a deque past what Python takes (OverflowError): every memory
    file failed. Past 10000 it is a bad setting, and the default (15) holds."""
    daemon = make_daemon({"session-memory": {"messages": 10**20}}).start()
    for i in range(20):
        daemon.send(f"note {i:02d}")
    daemon.send("/new")
    warning = daemon.wait_log("session_memory.bad_setting")
    assert "from 1 to 10000" in warning["fix"], warning
    (memory,) = (daemon.workspace / "memory").iterdir()
    notes = [line for line in memory.read_text().splitlines() if "note " in line]
    assert len(notes) == 15 and notes[-1].endswith("note 19"), notes
    assert daemon.stop() == 0


def test_memory_dir_is_under_the_configured_workspace(make_daemon: MakeDaemon) -> None:
    daemon = make_daemon()
    other = daemon.state / "elsewhere"
    config = yaml.safe_load((daemon.state / "gatewayd.yaml").read_text())
    write_config(daemon.state, {**config, "workspace": {"dir": str(other)}})
    daemon.start()
    daemon.send("Über-Plan für Ärger")
    daemon.send("/reset")
    assert [p.name for p in (other / "memory").iterdir()] == [
        f"{command_date(daemon)}-uber-plan-fur-arger.md"
    ]
    assert not (daemon.workspace / "memory").exists()
