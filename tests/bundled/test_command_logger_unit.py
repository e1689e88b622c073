"""command-logger, called directly on real files: line format, rotation, batches, a held lock,
failures. Its handler buffers a line and writes the loop turn's lines when the turn ends, so each
test runs the calls in an event loop and lets the turn end (:func:`log_commands`)."""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from gatewayd.hooks import HookContext, create_hook_event
from tests.support.fixtures import LogRecords, find_log, log_events
from tests.support.hooks import load_bundled_hook

hook = load_bundled_hook("command-logger")
ISO_MS_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def command(action: str, session: str = "agent:main:main", **context: Any) -> Any:
    return create_hook_event("command", action, session, context)


async def settle() -> None:
    """Let the flush the handler scheduled for this loop turn run."""
    for _ in range(3):
        await anyio.lowlevel.checkpoint()


def log_commands(ctx: HookContext, *turns: Iterable[Any]) -> None:
    """Run the handler on each event of each turn: one loop turn per group, flushed after it."""

    async def main() -> None:
        for events in turns:
            for event in events:
                await hook.handler(event, ctx)
            await settle()

    anyio.run(main)


def log_files(ctx: HookContext) -> list[Path]:
    """commands.log.N ... commands.log.1, commands.log: oldest first."""
    logs = Path(ctx.state_dir) / "logs"
    rotated = sorted(logs.glob("commands.log.[0-9]*"), key=lambda p: -int(p.suffix[1:]))
    return [*rotated, logs / "commands.log"]


def test_line_has_the_documented_fields(make_ctx: Callable[..., HookContext]) -> None:
    ctx = make_ctx("command-logger")
    event = command("new", senderId="u42", commandSource="telegram")
    event.timestamp = datetime(2025, 1, 31, 9, 15, 2, 347_891, tzinfo=UTC)
    log_commands(ctx, [event], [command("stop", session="s2")])

    lines = (Path(ctx.state_dir) / "logs" / "commands.log").read_text().splitlines()
    assert json.loads(lines[0]) == {
        "timestamp": "2025-01-31T09:15:02.347Z",
        "action": "new",
        "sessionKey": "agent:main:main",
        "senderId": "u42",
        "source": "telegram",
    }
    second = json.loads(lines[1])
    assert ISO_MS_Z.match(second["timestamp"])
    assert (second["senderId"], second["source"], second["sessionKey"]) == (
        "unknown",
        "unknown",
        "s2",
    )
    assert len(lines) == 2


def test_rotation_keeps_backups_and_drops_the_oldest(make_ctx: Callable[..., HookContext]) -> None:
    ctx = make_ctx("command-logger", {"maxBytes": 400, "backups": 2})
    log_commands(ctx, *([command(f"c{i:02d}")] for i in range(40)))

    files = log_files(ctx)
    assert [p.name for p in files] == ["commands.log.2", "commands.log.1", "commands.log"]
    actions = []
    for path in files:
        assert 0 < path.stat().st_size <= 400
        actions += [json.loads(line)["action"] for line in path.read_text().splitlines()]
    # the kept lines are the newest ones, in order, with nothing lost between the files
    assert actions == [f"c{i:02d}" for i in range(40 - len(actions), 40)]
    assert len(actions) < 40


def test_zero_backups_starts_over_and_zero_max_bytes_never_rotates(
    make_ctx: Callable[..., HookContext],
) -> None:
    ctx = make_ctx("command-logger", {"maxBytes": 300, "backups": 0})
    log_commands(ctx, [command(f"c{i}") for i in range(20)])  # one batch, rotated within
    assert [p.name for p in log_files(ctx)] == ["commands.log"]
    assert json.loads(log_files(ctx)[-1].read_text().splitlines()[-1])["action"] == "c19"

    ctx = make_ctx("command-logger", {"maxBytes": 0, "backups": 3})
    log_files(ctx)[-1].unlink()
    log_commands(ctx, [command(f"c{i}") for i in range(50)])
    assert [p.name for p in log_files(ctx)] == ["commands.log"]
    assert len(log_files(ctx)[-1].read_text().splitlines()) == 50


def test_batches_across_rotations_lose_nothing_and_keep_each_sessions_order(
    make_ctx: Callable[..., HookContext],
) -> None:
    # backups large enough to keep everything, so every line can be accounted for
    ctx = make_ctx("command-logger", {"maxBytes": 2000, "backups": 1000})
    sessions, turns = 8, 150
    log_commands(
        ctx,
        *(
            [
                command(f"s{n}-{i}", session=f"s{n}", senderId="x" * (i % 50))
                for n in range(sessions)
            ]
            for i in range(turns)
        ),
    )
    seen: list[str] = []
    files = log_files(ctx)
    assert len(files) > 10  # it really rotated many times, inside batches too
    for path in files:
        assert path.stat().st_size <= 2000
        seen += [json.loads(line)["action"] for line in path.read_bytes().decode().splitlines()]
    assert sorted(seen) == sorted(f"s{s}-{i}" for s in range(sessions) for i in range(turns))
    for s in range(sessions):  # one session's lines stay in the order they were logged
        mine = [a for a in seen if a.startswith(f"s{s}-")]
        assert mine == [f"s{s}-{i}" for i in range(turns)]


def test_a_held_lock_delays_the_lines_and_loses_none(make_ctx: Callable[..., HookContext]) -> None:
    ctx = make_ctx("command-logger")
    logs = Path(ctx.state_dir) / "logs"
    logs.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = logs / "commands.log"

    async def main() -> None:
        # Another writer (its own open file description, as another process has) holds it.
        fd = os.open(logs / "commands.log.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            for i in range(5):
                await hook.handler(command(f"c{i}"), ctx)
            await anyio.sleep(0.05)  # several retries while the lock is held
            assert not path.exists()
            await hook.handler(command("c5"), ctx)
        finally:
            os.close(fd)
        for _ in range(3000):  # the retry comes RETRY_S after the release; 30 s at most
            if path.exists() and len(path.read_bytes().splitlines()) == 6:
                break
            await anyio.sleep(0.01)

    anyio.run(main)
    actions = [json.loads(line)["action"] for line in path.read_text().splitlines()]
    assert actions == [f"c{i}" for i in range(6)]


def test_bad_settings_fall_back_to_defaults_and_say_so(
    make_ctx: Callable[..., HookContext],
    log_records: LogRecords,
) -> None:
    ctx = make_ctx("command-logger", {"maxBytes": "10MB", "backups": -1})
    log_commands(ctx, [command("new")])
    assert (
        log_events(log_records, "command_logger.bad_setting") == ["command_logger.bad_setting"] * 2
    )
    assert (
        find_log(log_records, "command_logger.bad_setting")["key"]
        == "hooks.entries.command-logger.backups"
    )
    assert (Path(ctx.state_dir) / "logs" / "commands.log").is_file()


def test_a_write_failure_is_logged_not_raised(
    make_ctx: Callable[..., HookContext], log_records: LogRecords
) -> None:
    ctx = make_ctx("command-logger")
    (Path(ctx.state_dir) / "logs").write_text("a file where the logs dir should be")
    log_commands(ctx, [command("new")])  # must not raise
    failed = find_log(log_records, "command_logger.failed")
    assert failed["action"] == "new"
    assert failed["path"].endswith("logs/commands.log")
