"""session-memory, called directly on a real transcript file: content, slug, no-overwrite."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gatewayd.hooks import HookContext, create_hook_event
from tests.support.fixtures import LogRecords, find_log, log_events
from tests.support.hooks import load_bundled_hook

hook = load_bundled_hook("session-memory")
WHEN = datetime(2025, 1, 31, 9, 15, 2, 347_000, tzinfo=UTC)


def transcript(ctx: HookContext, session_id: str, messages: list[tuple[str, str]]) -> Path:
    path = Path(ctx.state_dir) / "sessions" / f"{session_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for role, text in messages:
            # the daemon's transcript line (gatewayd/sessions.py)
            f.write(json.dumps({"role": role, "content": text, "timestamp": "t"}) + "\n")
    return path


def reset_event(ctx: HookContext, session_id: str, action: str = "new", **extra: Any) -> Any:
    context = {
        "previousSessionEntry": {"sessionId": session_id},
        "sessionFile": str(Path(ctx.state_dir) / "sessions" / f"{session_id}.jsonl"),
        "sessionId": "the-new-session",
        "commandSource": "control",
        "workspaceDir": str(ctx.workspace_dir),
        **extra,
    }
    event = create_hook_event("command", action, "agent:main:main", context)
    event.timestamp = WHEN
    return event


def memory_files(ctx: HookContext) -> list[Path]:
    return sorted((Path(ctx.workspace_dir) / "memory").glob("*.md"))


def test_writes_header_and_last_messages_skipping_slash_commands(
    make_ctx: Callable[..., HookContext],
    log_records: LogRecords,
) -> None:
    ctx = make_ctx("session-memory", {"messages": 4})
    transcript(
        ctx,
        "s1",
        [
            ("user", "Plan the deploy for Friday, please!"),
            ("assistant", "Sure: step one."),
            ("user", "/stop"),
            ("system", "ignored: not a user or assistant message"),
            ("user", "what about rollback?"),
            ("assistant", "Keep the previous image."),
            ("user", "and the database\nmigrations?"),
        ],
    )
    hook.handler(reset_event(ctx, "s1"), ctx)

    [path] = memory_files(ctx)
    assert path.name == "2025-01-31-plan-the-deploy-for-friday.md"
    assert path.read_text() == (
        "# Session 2025-01-31 09:15:02 UTC\n"
        "\n"
        "- Session key: agent:main:main\n"
        "- Session id: s1\n"
        "- Source: control\n"
        "\n"
        "## Conversation\n"
        "\n"
        "assistant: Sure: step one.\n"
        "user: what about rollback?\n"
        "assistant: Keep the previous image.\n"
        "user: and the database\nmigrations?\n"
    )
    assert find_log(log_records, "session_memory.saved")["messages"] == 4
    assert list((Path(ctx.workspace_dir) / "memory").iterdir()) == [path]  # no temp file left


def test_default_keeps_fifteen(make_ctx: Callable[..., HookContext]) -> None:
    ctx = make_ctx("session-memory")
    transcript(ctx, "s1", [("user", f"message {i}") for i in range(40)])
    hook.handler(reset_event(ctx, "s1", action="reset"), ctx)
    [path] = memory_files(ctx)
    body = path.read_text().split("## Conversation\n\n")[1].splitlines()
    assert body == [f"user: message {i}" for i in range(25, 40)]
    assert path.name == "2025-01-31-message-0.md"


def test_never_overwrites_an_existing_file(make_ctx: Callable[..., HookContext]) -> None:
    ctx = make_ctx("session-memory")
    transcript(ctx, "s1", [("user", "hello there"), ("assistant", "hi")])
    memory = Path(ctx.workspace_dir) / "memory"
    memory.mkdir()
    (memory / "2025-01-31-hello-there.md").write_text("mine, keep it\n")

    for _ in range(3):
        hook.handler(reset_event(ctx, "s1"), ctx)

    assert [p.name for p in memory_files(ctx)] == [
        "2025-01-31-hello-there-2.md",
        "2025-01-31-hello-there-3.md",
        "2025-01-31-hello-there-4.md",
        "2025-01-31-hello-there.md",
    ]
    assert (memory / "2025-01-31-hello-there.md").read_text() == "mine, keep it\n"
    assert "user: hello there" in (memory / "2025-01-31-hello-there-4.md").read_text()


@pytest.mark.parametrize(
    ("first", "slug"),
    [
        ("Hello, World", "hello-world"),
        ("  --Ünïcode  & symbols!! 42 ", "unicode-symbols-42"),
        ("abcdefghij klmnopqrst uvwxyzabcd efgh", "abcdefghij-klmnopqrst"),
        ("x" * 45, "x" * 30),
        ("🙂🙂🙂", "0915"),
    ],
)
def test_slug(make_ctx: Callable[..., HookContext], first: str, slug: str) -> None:
    ctx = make_ctx("session-memory")
    transcript(ctx, "s1", [("user", "/new"), ("user", first), ("assistant", "ok")])
    hook.handler(reset_event(ctx, "s1"), ctx)
    [path] = memory_files(ctx)
    assert path.name == f"2025-01-31-{slug}.md"
    assert len(slug) <= 30


def test_replies_to_slash_commands_are_left_out(make_ctx: Callable[..., HookContext]) -> None:
    ctx = make_ctx("session-memory")
    transcript(
        ctx,
        "s1",
        [
            ("user", "/new"),
            ("assistant", "New session."),
            ("user", "real question"),
            ("assistant", "real answer"),
            ("user", "/status"),
            ("assistant", "status line 1"),
            ("assistant", "status line 2"),
            ("user", "thanks"),
        ],
    )
    hook.handler(reset_event(ctx, "s1"), ctx)
    [path] = memory_files(ctx)
    assert path.read_text().split("## Conversation\n\n")[1] == (
        "user: real question\nassistant: real answer\nuser: thanks\n"
    )


def test_empty_session_writes_nothing(
    make_ctx: Callable[..., HookContext], log_records: LogRecords
) -> None:
    ctx = make_ctx("session-memory")
    transcript(ctx, "s1", [("user", "/new"), ("assistant", "New session."), ("user", "/stop")])
    hook.handler(reset_event(ctx, "s1"), ctx)
    assert find_log(log_records, "session_memory.skipped")["reason"] == "empty session"

    fresh = reset_event(ctx, "s1", previousSessionEntry=None, sessionId=None, sessionFile=None)
    hook.handler(fresh, ctx)  # /new on a key that never had a session
    assert find_log(log_records, "session_memory.skipped")["reason"] == "no session"

    hook.handler(reset_event(ctx, "never-written"), ctx)
    assert find_log(log_records, "session_memory.skipped")["reason"] == "no transcript"
    assert not (Path(ctx.workspace_dir) / "memory").exists()


def test_torn_lines_are_skipped_and_content_parts_read(
    make_ctx: Callable[..., HookContext],
) -> None:
    ctx = make_ctx("session-memory")
    path = transcript(ctx, "s1", [("user", "first words")])
    with path.open("a") as f:
        f.write(json.dumps({"role": "assistant", "content": [{"type": "text", "text": "parts"}]}))
        f.write("\n" + json.dumps({"role": "user", "text": "text key"}))
        f.write('\n{"role": "user", "te')  # a line being written when the session ended
    hook.handler(reset_event(ctx, "s1"), ctx)
    [memory] = memory_files(ctx)
    assert memory.read_text().endswith("user: first words\nassistant: parts\nuser: text key\n")


def test_failures_are_logged_not_raised(
    make_ctx: Callable[..., HookContext], log_records: LogRecords
) -> None:
    ctx = make_ctx("session-memory", {"messages": 0})
    transcript(ctx, "s1", [("user", "hello")])
    (Path(ctx.workspace_dir) / "memory").write_text("a file where the memory dir should be")
    hook.handler(reset_event(ctx, "s1"), ctx)  # must not raise
    assert find_log(log_records, "session_memory.bad_setting")["using"] == 15
    assert "session_memory.failed" in log_events(log_records)
