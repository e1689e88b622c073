"""command-logger, called directly on real files: line format, rotation, threads, failures."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gatewayd.hooks import HookContext, create_hook_event
from tests.support.fixtures import LogRecords, find_log, log_events
from tests.support.hooks import load_bundled_hook

hook = load_bundled_hook("command-logger")
ISO_MS_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def command(action: str, session: str = "agent:main:main", **context: Any) -> Any:
    return create_hook_event("command", action, session, context)


def log_files(ctx: HookContext) -> list[Path]:
    """commands.log.N ... commands.log.1, commands.log: oldest first."""
    logs = Path(ctx.state_dir) / "logs"
    rotated = sorted(logs.glob("commands.log.[0-9]*"), key=lambda p: -int(p.suffix[1:]))
    return [*rotated, logs / "commands.log"]


def test_line_has_the_documented_fields(make_ctx: Callable[..., HookContext]) -> None:
    ctx = make_ctx("command-logger")
    event = command("new", senderId="u42", commandSource="telegram")
    event.timestamp = datetime(2025, 1, 31, 9, 15, 2, 347_891, tzinfo=UTC)
    hook.handler(event, ctx)
    hook.handler(command("stop", session="s2"), ctx)

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
    for i in range(40):
        hook.handler(command(f"c{i:02d}"), ctx)

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
    for i in range(20):
        hook.handler(command(f"c{i}"), ctx)
    assert [p.name for p in log_files(ctx)] == ["commands.log"]
    assert json.loads(log_files(ctx)[-1].read_text().splitlines()[-1])["action"] == "c19"

    ctx = make_ctx("command-logger", {"maxBytes": 0, "backups": 3})
    log_files(ctx)[-1].unlink()
    for i in range(50):
        hook.handler(command(f"c{i}"), ctx)
    assert [p.name for p in log_files(ctx)] == ["commands.log"]
    assert len(log_files(ctx)[-1].read_text().splitlines()) == 50


def test_concurrent_threads_never_interleave_or_lose_lines_across_rotations(
    make_ctx: Callable[..., HookContext],
) -> None:
    # backups large enough to keep everything, so every line can be accounted for
    ctx = make_ctx("command-logger", {"maxBytes": 2000, "backups": 1000})
    threads, per_thread = 8, 150
    start = threading.Barrier(threads)

    def worker(t: int) -> None:
        start.wait()
        for i in range(per_thread):
            hook.handler(command(f"t{t}-{i}", senderId="x" * (i % 50)), ctx)

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join(60)

    seen: list[str] = []
    files = log_files(ctx)
    assert len(files) > 10  # it really rotated many times while threads were writing
    for path in files:
        assert path.stat().st_size <= 2000
        seen += [json.loads(line)["action"] for line in path.read_bytes().decode().splitlines()]
    assert sorted(seen) == sorted(f"t{t}-{i}" for t in range(threads) for i in range(per_thread))
    for t in range(threads):  # one thread's lines stay in the order it wrote them
        mine = [a for a in seen if a.startswith(f"t{t}-")]
        assert mine == [f"t{t}-{i}" for i in range(per_thread)]


def test_bad_settings_fall_back_to_defaults_and_say_so(
    make_ctx: Callable[..., HookContext],
    log_records: LogRecords,
) -> None:
    ctx = make_ctx("command-logger", {"maxBytes": "10MB", "backups": -1})
    hook.handler(command("new"), ctx)
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
    hook.handler(command("new"), ctx)  # must not raise
    failed = find_log(log_records, "command_logger.failed")
    assert failed["action"] == "new"
    assert failed["path"].endswith("logs/commands.log")
