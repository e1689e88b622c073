"""bootstrap-extra-files and boot-md, called directly on real workspace files."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gatewayd.hooks import HookContext, create_hook_event
from tests.support.fixtures import LogRecords, find_log
from tests.support.hooks import load_bundled_hook

extra = load_bundled_hook("bootstrap-extra-files")
boot = load_bundled_hook("boot-md")


def write(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def bootstrap(ctx: HookContext, session: str = "agent:main:main", files: Any = None) -> Any:
    ws = Path(ctx.workspace_dir)
    if files is None:  # what the gateway pre-fills: the standard files at the top that exist
        files = [
            {"name": p.name, "path": str(p), "content": p.read_text(), "missing": False}
            for p in sorted(ws.glob("*.md"))
        ]
    event = create_hook_event(
        "agent", "bootstrap", session, {"bootstrapFiles": files, "workspaceDir": str(ws)}
    )
    extra.handler(event, ctx)
    return event


def names(event: Any) -> list[str]:
    ws = event.context["workspaceDir"]
    return [os.path.relpath(f["path"], ws) for f in event.context["bootstrapFiles"]]


def test_globs_from_all_three_keys_add_allowed_names_only(
    make_ctx: Callable[..., HookContext],
    log_records: LogRecords,
) -> None:
    ctx = make_ctx(
        "bootstrap-extra-files",
        {"paths": ["packages/*/AGENTS.md"], "patterns": "docs/**/*.md", "files": ["notes/USER.md"]},
    )
    ws = Path(ctx.workspace_dir)
    write(ws / "AGENTS.md", "root agents")
    write(ws / "packages/api/AGENTS.md", "api agents")
    write(ws / "packages/web/AGENTS.md", "web agents")
    write(ws / "packages/web/README.md")
    write(ws / "docs/deep/er/TOOLS.md", "tools")
    write(ws / "docs/SOUL.md", "soul")
    write(ws / "docs/notes.md")  # matched by the glob, not a bootstrap name
    write(ws / "notes/USER.md", "user")

    event = bootstrap(ctx)

    assert names(event) == [
        "AGENTS.md",
        "packages/api/AGENTS.md",
        "packages/web/AGENTS.md",
        "docs/SOUL.md",
        "docs/deep/er/TOOLS.md",
        "notes/USER.md",
    ]
    api = event.context["bootstrapFiles"][1]
    assert api == {
        "name": "AGENTS.md",
        "path": str(ws / "packages/api/AGENTS.md"),
        "content": "api agents",
        "missing": False,
    }
    refused = [r for r in log_records if r["event"] == "bootstrap_extra_files.refused"]
    assert [os.path.relpath(f["path"], ws) for f in refused] == ["docs/notes.md"]


def test_basename_allow_list(make_ctx: Callable[..., HookContext]) -> None:
    allowed = sorted(extra.STANDARD_NAMES)
    ctx = make_ctx("bootstrap-extra-files", {"paths": ["a/*"]})
    ws = Path(ctx.workspace_dir)
    for name in [*allowed, "agents.md", "AGENTS.md.bak", "secrets.env", "Memory.md"]:
        write(ws / "a" / name)
    event = bootstrap(ctx)
    assert sorted(f["name"] for f in event.context["bootstrapFiles"]) == allowed


def test_the_2_mib_limit(make_ctx: Callable[..., HookContext], log_records: LogRecords) -> None:
    ctx = make_ctx("bootstrap-extra-files", {"paths": ["*/TOOLS.md"]})
    ws = Path(ctx.workspace_dir)
    write(ws / "fits/TOOLS.md", "t" * (2 * 1024 * 1024))
    write(ws / "over/TOOLS.md", "t" * (2 * 1024 * 1024 + 1))
    event = bootstrap(ctx)
    assert names(event) == ["fits/TOOLS.md"]
    assert len(event.context["bootstrapFiles"][0]["content"]) == 2 * 1024 * 1024
    assert (
        "larger than 2097152 bytes"
        in find_log(log_records, "bootstrap_extra_files.refused")["reason"]
    )


def test_a_symlink_out_of_the_workspace_is_refused(
    make_ctx: Callable[..., HookContext], log_records: LogRecords, tmp_path: Path
) -> None:
    ctx = make_ctx("bootstrap-extra-files", {"paths": ["**/SOUL.md", "../outside/SOUL.md"]})
    ws = Path(ctx.workspace_dir)
    secret = write(tmp_path / "outside/SOUL.md", "secret")
    (ws / "linked").mkdir()
    (ws / "linked/SOUL.md").symlink_to(secret)  # file symlink leading out
    (ws / "dirlink").symlink_to(secret.parent, target_is_directory=True)  # directory symlink
    write(ws / "inside/target.txt", "inside via symlink")
    (ws / "inside/SOUL.md").symlink_to(ws / "inside/target.txt")  # a symlink that stays inside

    event = bootstrap(ctx)

    assert names(event) == ["inside/SOUL.md"]
    assert event.context["bootstrapFiles"][0]["content"] == "inside via symlink"
    reasons = [r["reason"] for r in log_records if r["event"] == "bootstrap_extra_files.refused"]
    assert reasons and all("outside the workspace" in r for r in reasons)
    assert all("secret" not in str(f) for f in event.context["bootstrapFiles"])


def test_not_regular_and_duplicates(
    make_ctx: Callable[..., HookContext], log_records: LogRecords
) -> None:
    ctx = make_ctx("bootstrap-extra-files", {"paths": ["AGENTS.md", "*/AGENTS.md", "x/*"]})
    ws = Path(ctx.workspace_dir)
    write(ws / "AGENTS.md", "root")
    (ws / "x").mkdir()
    os.mkfifo(ws / "x/TOOLS.md")  # would block a plain open(); must be refused, not read
    (ws / "x/USER.md").mkdir()
    write(ws / "y/AGENTS.md")
    (ws / "z").mkdir()
    (ws / "z/AGENTS.md").symlink_to(ws / "y/AGENTS.md")  # same file as y/AGENTS.md

    event = bootstrap(ctx)

    assert names(event) == ["AGENTS.md", "y/AGENTS.md"]
    reasons = {
        os.path.relpath(r["path"], ws): r["reason"]
        for r in log_records
        if r["event"] == "bootstrap_extra_files.refused"
    }
    assert reasons == {"x/TOOLS.md": "not a regular file", "x/USER.md": "not a regular file"}


def test_subagent_and_cron_sessions_keep_the_minimal_set(
    make_ctx: Callable[..., HookContext],
) -> None:
    ctx = make_ctx("bootstrap-extra-files", {"paths": ["more/*.md"]})
    ws = Path(ctx.workspace_dir)
    for name in ("AGENTS.md", "SOUL.md", "MEMORY.md", "HEARTBEAT.md"):
        write(ws / name)
    for name in ("TOOLS.md", "BOOTSTRAP.md"):
        write(ws / "more" / name)

    full = bootstrap(ctx, "agent:main:main")
    assert names(full) == [
        "AGENTS.md",
        "HEARTBEAT.md",
        "MEMORY.md",
        "SOUL.md",
        "more/BOOTSTRAP.md",
        "more/TOOLS.md",
    ]
    for key in ("agent:main:subagent:7", "agent:main:cron:nightly"):
        assert names(bootstrap(ctx, key)) == ["AGENTS.md", "SOUL.md", "more/TOOLS.md"]


def test_no_globs_leaves_the_list_alone_and_failures_keep_it(
    make_ctx: Callable[..., HookContext],
    log_records: LogRecords,
) -> None:
    ctx = make_ctx("bootstrap-extra-files", {"paths": 42})
    write(Path(ctx.workspace_dir) / "AGENTS.md")
    files = [{"name": "AGENTS.md", "path": "p", "content": "c", "missing": False}]
    event = bootstrap(ctx, files=files)
    assert event.context["bootstrapFiles"] is files  # mutated in place, never replaced
    assert files == [{"name": "AGENTS.md", "path": "p", "content": "c", "missing": False}]
    assert find_log(log_records, "bootstrap_extra_files.bad_setting")["key"].endswith(".paths")

    event = bootstrap(ctx, files="not a list")
    assert find_log(log_records, "bootstrap_extra_files.failed")["error"].startswith("TypeError")


class RecordingGateway:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    async def deliver(self, *args: Any, **kwargs: Any) -> tuple[list[str], None]:
        self.calls.append((args, kwargs))
        return [], None


def startup(ctx: HookContext, gateway: Any) -> None:
    context = {"workspaceDir": str(ctx.workspace_dir), "gateway": gateway}
    asyncio.run(boot.handler(create_hook_event("gateway", "startup", "", context), ctx))


def test_boot_md_delivers_once_without_waiting(
    make_ctx: Callable[..., HookContext], log_records: LogRecords
) -> None:
    ctx = make_ctx("boot-md")
    write(Path(ctx.workspace_dir) / "BOOT.md", "Check the inbox.\n")
    gateway = RecordingGateway()
    startup(ctx, gateway)
    assert gateway.calls == [
        (
            ("agent:main:boot", "Check the inbox.\n"),
            {"sender_id": "boot-md", "channel": "boot", "wait": False},
        )
    ]
    assert find_log(log_records, "boot_md.ran")["bytes"] == 17


def test_boot_md_missing_empty_and_failing(
    make_ctx: Callable[..., HookContext], log_records: LogRecords
) -> None:
    ctx = make_ctx("boot-md")
    gateway = RecordingGateway()
    startup(ctx, gateway)
    assert find_log(log_records, "boot_md.skipped")["reason"] == "missing"
    write(Path(ctx.workspace_dir) / "BOOT.md", " \n\t\n")
    startup(ctx, gateway)
    assert find_log(log_records, "boot_md.skipped")["reason"] == "empty"
    assert gateway.calls == []

    write(Path(ctx.workspace_dir) / "BOOT.md", "hello")
    startup(ctx, None)  # no gateway to deliver through
    assert "no gateway to deliver through" in find_log(log_records, "boot_md.failed")["error"]
    write(Path(ctx.workspace_dir) / "BOOT.md", "x" * (1024 * 1024 + 1))
    startup(ctx, gateway)
    assert "over 1048576 bytes" in find_log(log_records, "boot_md.failed")["error"]
    assert gateway.calls == []
