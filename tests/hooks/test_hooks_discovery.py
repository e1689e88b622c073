"""Discovery: roots and their precedence, shadowing, sorted order, handler lookup, extraDirs."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from gatewayd.config import Config
from gatewayd.hooks.discovery import discover, find_handler, hook_roots
from tests.hooks.hooks_support import Build, Roots
from tests.support.hooks import WriteHook


def test_roots_in_precedence_order(roots: Roots, config_for: Callable[..., Config]) -> None:
    config = config_for({"hooks": {"load": {"extraDirs": [str(roots.extra), "more"]}}})
    found, rejected = hook_roots(config.load_spec())
    assert [(r.source, r.path) for r in found] == [
        ("bundled", roots.bundled),
        ("extra", roots.extra),
        ("extra", roots.state / "more"),  # relative extraDirs are relative to the state dir
        ("managed", roots.managed),
        ("workspace", roots.workspace),
    ]
    assert rejected == []


def test_missing_roots_are_fine(roots: Roots, build: Build) -> None:
    result = build({"hooks": {"load": {"extraDirs": [str(roots.extra)]}}})
    assert (result.discovered, result.records, result.rejected_roots) == (0, [], [])


def test_later_root_wins_and_the_loser_is_reported(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    for root in (roots.extra, roots.bundled, roots.managed, roots.workspace):
        write_hook(
            root,
            "same",
            handler=f"async def handler(event):\n    event.messages.append({str(root)!r})\n",
        )
    write_hook(roots.bundled, "only-bundled")
    result = build({"hooks": {"load": {"extraDirs": [str(roots.extra)]}}})
    statuses = [(r.source, r.name, r.status) for r in result.records]
    assert statuses == [
        ("bundled", "only-bundled", "ready"),
        ("bundled", "same", "shadowed"),
        ("extra", "same", "shadowed"),
        ("managed", "same", "shadowed"),
        ("workspace", "same", "ready"),
    ]
    shadowed = [r for r in result.records if r.status == "shadowed"]
    assert shadowed[0].reasons == [
        f"shadowed by the extra hook at {roots.extra / 'same'} (a later root wins a name conflict)"
    ]
    assert shadowed[-1].reasons == [
        f"shadowed by the workspace hook at {roots.workspace / 'same'} "
        "(a later root wins a name conflict)"
    ]
    assert [h.hook for h, _ in result.handlers] == ["only-bundled", "same"]
    assert result.handlers[1][0].source == "workspace"
    assert any(line.startswith("same: shadowed by") for line in result.skipped)


def test_name_conflicts_use_the_frontmatter_name_not_the_directory(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    write_hook(roots.managed, "greeter", dirname="a-dir")
    write_hook(roots.workspace, "greeter", dirname="other-dir")
    result = build()
    assert [(r.path, r.status) for r in result.records] == [
        (str(roots.managed / "a-dir"), "shadowed"),
        (str(roots.workspace / "other-dir"), "ready"),
    ]


def test_same_name_twice_in_one_root_the_later_wins_but_in_the_bundled_root(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    # As OpenClaw merges them: in the managed, extra and workspace roots the later (sorted)
    # wins; in the bundled root the first.
    write_hook(roots.managed, "dup", dirname="b")
    write_hook(roots.managed, "dup", dirname="a")
    write_hook(roots.bundled, "bdup", dirname="d")
    write_hook(roots.bundled, "bdup", dirname="c")
    result = build()
    assert [(Path(r.path).name, r.status) for r in result.records] == [
        ("c", "ready"),
        ("d", "shadowed"),
        ("a", "shadowed"),
        ("b", "ready"),
    ]
    assert result.records[1].reasons == [
        f"duplicate name 'bdup' in the bundled root: {roots.bundled / 'c'} comes first and wins"
    ]
    assert result.records[2].reasons == [
        f"duplicate name 'dup' in the managed root: {roots.managed / 'b'} comes later and wins "
        "(as OpenClaw merges hooks of one root)"
    ]


def test_entries_are_taken_in_sorted_order(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    for name in ["zeta", "alpha", "Mid", "beta"]:
        write_hook(roots.managed, name)
    result = build()
    assert [r.name for r in result.records] == ["Mid", "alpha", "beta", "zeta"]
    assert [h.hook for h, _ in result.handlers] == ["Mid", "alpha", "beta", "zeta"]


def test_only_immediate_subdirectories_with_hook_md_are_hooks(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    write_hook(roots.managed, "real")
    (roots.managed / "no-hook-md").mkdir()
    (roots.managed / "no-hook-md" / "handler.py").write_text("raise SystemExit")
    (roots.managed / "HOOK.md").write_text("---\nname: file-in-root\n---\n")
    write_hook(roots.managed / "group", "nested")  # two levels down: not a hook
    write_hook(roots.managed, "hidden", dirname=".hidden")
    assert [r.name for r in build().records] == ["real"]


def test_a_broken_override_still_claims_its_name(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    write_hook(roots.bundled, "memo")
    write_hook(roots.workspace, "memo", meta={"priority": "first"})
    result = build()
    assert [(r.source, r.status) for r in result.records] == [
        ("bundled", "shadowed"),
        ("workspace", "invalid"),
    ]
    assert result.handlers == []


def test_handler_lookup_order(tmp_path: Path) -> None:
    hook = tmp_path / "h"
    hook.mkdir()
    assert find_handler(hook)[0] is None
    (hook / "index").write_text("#!/bin/sh\n")
    (hook / "index").chmod(0o755)
    assert find_handler(hook)[:2] == (hook / "index", True)
    (hook / "index.py").write_text("")
    assert find_handler(hook)[:2] == (hook / "index.py", False)
    (hook / "handler").write_text("#!/bin/sh\n")
    (hook / "handler").chmod(0o755)
    assert find_handler(hook)[:2] == (hook / "handler", True)
    (hook / "handler.py").write_text("")
    assert find_handler(hook)[:2] == (hook / "handler.py", False)


def test_a_non_executable_handler_is_passed_over_with_a_hint(tmp_path: Path) -> None:
    hook = tmp_path / "h"
    hook.mkdir()
    (hook / "handler").write_text("#!/bin/sh\n")
    (hook / "handler").chmod(0o644)
    handler, _, problem = find_handler(hook)
    assert handler is None
    assert problem is not None
    assert (
        "expected handler.py, handler.ts, handler.js, handler.mjs, handler (executable), "
        "index.py, index.ts, index.js, index.mjs or index (executable)"
    ) in problem
    assert "handler exists but is not executable (chmod +x it)" in problem
    (hook / "index.py").write_text("")
    assert find_handler(hook)[0] == hook / "index.py"


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (Path.mkdir, "is a directory, not a regular file"),
        (os.mkfifo, "is a FIFO, device or socket, not a regular file"),
        (lambda p: p.symlink_to(p.name), "is a symlink that cannot be followed (Too many levels"),
        (lambda p: p.symlink_to("gone"), "is a symlink that cannot be followed (No such file"),
    ],
)
def test_a_handler_name_that_is_no_file_says_so(
    tmp_path: Path, make: Callable[[Path], object], why: str
) -> None:
    """It was passed over, and then listed among the code files to rename: "none of which is
    a handler: rename handler.py to handler.ts, handler.js or handler.py"."""
    make(tmp_path / "handler.py")
    handler, _, problem = find_handler(tmp_path)
    assert handler is None and problem is not None
    assert f"{tmp_path / 'handler.py'} {why}" in problem
    assert "put the handler's code in a regular file of that name" in problem
    assert "rename" not in problem


def test_hook_md_without_handler_is_reported(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    write_hook(roots.managed, "lonely", handler=None)
    (record,) = build().records
    assert record.status == "failed"
    assert record.handler is None
    assert record.reasons == [
        f"no handler in {roots.managed / 'lonely'}: expected handler.py, handler.ts, handler.js, "
        "handler.mjs, handler (executable), index.py, index.ts, index.js, index.mjs or index "
        "(executable)"
    ]


@pytest.mark.parametrize(
    ("present", "chosen"),
    [
        (["handler.py", "handler.ts", "handler.js"], "handler.py"),
        (["handler.ts", "handler.js", "handler.mjs", "index.py"], "handler.ts"),
        (["handler.js", "handler.mjs"], "handler.js"),
        (["handler.mjs", "index.ts"], "handler.mjs"),
        (["index.ts", "index.js", "index.mjs"], "index.ts"),
        (["index.js", "index.mjs"], "index.js"),
        (["index.mjs"], "index.mjs"),
    ],
)
def test_handler_lookup_order_covers_js_and_ts(
    tmp_path: Path, present: list[str], chosen: str
) -> None:
    for name in present:
        (tmp_path / name).write_text("")
    assert find_handler(tmp_path)[:2] == (tmp_path / chosen, False)


def test_extra_dirs_must_resolve_under_the_state_dir(
    roots: Roots, tmp_path: Path, build: Build, write_hook: WriteHook
) -> None:
    outside = tmp_path / "outside"
    write_hook(outside, "from-outside")
    sneaky = roots.state / "sneaky"
    os.symlink(outside, sneaky)  # under the state dir by name, outside by real path
    inside_link = roots.state / "linked"
    write_hook(roots.state / "real-extra", "linked-hook")
    os.symlink(roots.state / "real-extra", inside_link)
    result = build(
        {"hooks": {"load": {"extraDirs": [str(outside), str(sneaky), str(inside_link)]}}}
    )
    assert [r.name for r in result.records] == ["linked-hook"]
    assert result.records[0].source == "extra"
    assert result.rejected_roots == [
        f"hooks.load.extraDirs: {outside} resolves to {outside}, outside the state dir "
        f"{roots.state}; move it (or a symlink to it) under the state dir",
        f"hooks.load.extraDirs: {sneaky} resolves to {outside}, outside the state dir "
        f"{roots.state}; move it (or a symlink to it) under the state dir",
    ]


def test_discover_does_not_import(
    roots: Roots, config_for: Callable[..., Config], write_hook: WriteHook
) -> None:
    marker = roots.state / "imported"
    write_hook(roots.managed, "x", handler=f"open({str(marker)!r}, 'w').close()\n")
    found = discover(config_for().load_spec())
    assert [h.name for h in found.hooks] == ["x"]
    assert not marker.exists()
