"""Loading: statuses, path safety, fresh from-source imports, export checks, ctx, timeouts."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
import structlog

from gatewayd.hooks import HookEvent, create_hook_event
from gatewayd.hooks.handlers import HandlerKind
from gatewayd.hooks.loader import HookLoader, LoadResult, hooks_listing
from gatewayd.hooks.registry import HookRegistry
from tests.hooks.hooks_support import Build, Roots
from tests.support.hooks import WriteHook


def fire(registry: HookRegistry, key: str = "command:new") -> HookEvent:
    etype, _, action = key.partition(":")
    event = create_hook_event(etype, action, "s1")
    anyio.run(registry.dispatch, event)
    return event


def messages(result: LoadResult, key: str = "command:new") -> list[str]:
    registry = HookRegistry()
    registry.set_file_hooks(result.handlers)
    return fire(registry, key).messages


def record(result: LoadResult, name: str) -> Any:
    (found,) = [r for r in result.records if r.name == name and r.status != "shadowed"]
    return found


def hook_modules(loader: HookLoader) -> list[str]:
    return sorted(m for m in sys.modules if m.startswith(loader.importer.root + "."))


# -- the happy path and the result contract ---------------------------------------------------


def test_load_registers_and_dispatches(
    roots: Roots, config_for: Any, write_hook: WriteHook, loader: HookLoader
) -> None:
    write_hook(roots.managed, "hello", events=["command:new", "command"])
    write_hook(
        roots.workspace,
        "sync-one",
        handler="def handler(event):\n    event.messages.append('sync')\n",
    )
    registry = HookRegistry()
    with structlog.testing.capture_logs() as logs:
        result = loader.load(config_for().load_spec(), registry)
    assert result.summary() == {
        "discovered": 2,
        "eligible": 2,
        "registered": 2,
        "skipped": [],
        "failed": [],
        "warnings": 0,
    }
    summary_lines = [line for line in logs if line["event"] == "hooks.loaded"]
    assert summary_lines == [
        {
            "event": "hooks.loaded",
            "log_level": "info",
            "discovered": 2,
            "eligible": 2,
            "registered": 2,
            "skipped": 0,
            "failed": 0,
            "warnings": 0,
        }
    ]
    # `hello` is registered for both keys and runs once per key, in dispatch order.
    assert fire(registry).messages == ["hello", "sync", "hello"]
    kinds = {h.hook: h.kind for h, _ in result.handlers}
    assert kinds == {"hello": HandlerKind.ASYNC, "sync-one": HandlerKind.SYNC}
    assert registry.default_timeout_s == 30.0


def test_summary_accounts_for_every_hook(roots: Roots, build: Build, write_hook: WriteHook) -> None:
    write_hook(roots.bundled, "ok")
    write_hook(roots.managed, "ok")  # shadows the bundled one
    write_hook(roots.managed, "broken-md", hook_md="---\nname: broken-md\n---\nno end")
    (roots.managed / "broken-md" / "HOOK.md").write_text("name: broken-md\n")
    write_hook(roots.managed, "needs-bin", meta={"requires": {"bins": ["no-such-bin-xyz"]}})
    write_hook(roots.managed, "off")
    write_hook(roots.managed, "quiet", events=None)
    write_hook(roots.managed, "crash", handler="raise RuntimeError('boom')\n")
    result = build({"hooks": {"entries": {"off": {"enabled": False}}}})
    statuses = {(r.name, r.source): r.status for r in result.records}
    assert statuses == {
        ("ok", "bundled"): "shadowed",
        ("broken-md", "managed"): "invalid",
        ("crash", "managed"): "failed",
        ("needs-bin", "managed"): "ineligible",
        ("off", "managed"): "disabled",
        ("ok", "managed"): "ready",
        ("quiet", "managed"): "skipped",
    }
    assert result.discovered == 7
    assert result.registered == 1
    assert result.eligible == 4  # ok, crash, off, quiet (shadowed and invalid are not counted)
    assert result.discovered == result.registered + len(result.skipped) + len(result.failed)
    assert "off: disabled in config" in result.skipped
    assert (
        "quiet: no events: it subscribes to nothing, so its code is never loaded "
        "(add metadata.eliza.events)"
    ) in result.skipped
    assert "needs-bin: Binary missing: no-such-bin-xyz" in result.skipped
    (failed,) = result.failed
    assert failed.startswith(
        f"crash: import failed: {roots.managed / 'crash' / 'handler.py'}:1: RuntimeError: boom"
    )


def test_listing_document(
    roots: Roots, config_for: Any, write_hook: WriteHook, loader: HookLoader
) -> None:
    write_hook(roots.managed, "shown", meta={"emoji": "🔔", "hookKey": "shown-key"})
    spec = config_for().load_spec()
    listing = hooks_listing(spec, loader.build(spec))
    assert listing["stateDir"] == str(roots.state)
    assert listing["workspaceDir"] == str(roots.state / "workspace")
    assert listing["agents"] == {"default": "main", "ids": ["main"]}
    assert listing["hooks"] == [
        {
            "name": "shown",
            "hookKey": "shown-key",
            "description": "test hook shown",
            "emoji": "🔔",
            "source": "managed",
            "path": str(roots.managed / "shown"),
            "handler": str(roots.managed / "shown" / "handler.py"),
            "events": ["command:new"],
            "status": "ready",
            "eligible": True,
            "enabled": True,
            "reasons": [],
            "missing": {"bins": [], "anyBins": [], "env": [], "config": [], "os": []},
            "warnings": [],
            "agent": None,
            "subagent": None,
            "agents": None,
        }
    ]
    json.dumps(listing)  # plain JSON data


def test_build_runs_in_a_worker_thread(
    roots: Roots, config_for: Any, write_hook: WriteHook, loader: HookLoader
) -> None:
    write_hook(roots.managed, "threaded")
    spec = config_for().load_spec()

    async def main() -> list[str]:
        result = await anyio.to_thread.run_sync(loader.build, spec)
        registry = HookRegistry()
        result.apply(registry, spec)
        event = create_hook_event("command", "new", "s")
        await registry.dispatch(event)
        return event.messages

    assert anyio.run(main) == ["threaded"]


# -- enablement and "no events" ---------------------------------------------------------------


def test_disabled_hook_is_not_imported(roots: Roots, build: Build, write_hook: WriteHook) -> None:
    marker = roots.state / "imported"
    write_hook(roots.managed, "off", handler=f"open({str(marker)!r}, 'w').close()\n")
    result = build({"hooks": {"entries": {"off": {"enabled": False}}}})
    rec = record(result, "off")
    assert (rec.status, rec.reasons, rec.enabled, rec.eligible) == (
        "disabled",
        ["disabled in config"],
        False,
        True,
    )
    assert not marker.exists()


def test_no_events_skips_without_importing(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    marker = roots.state / "imported"
    no_events: tuple[list[str] | None, ...] = (None, [])
    for events in no_events:
        write_hook(
            roots.managed, "silent", events=events, handler=f"open({str(marker)!r}, 'w').close()\n"
        )
        rec = record(build(), "silent")
        assert rec.status == "skipped"
        assert rec.reasons[0].startswith("no events: it subscribes to nothing")
        assert not marker.exists()


def test_hooks_enabled_false_clears_file_hooks_but_keeps_code_hooks(
    roots: Roots, config_for: Any, write_hook: WriteHook, loader: HookLoader
) -> None:
    write_hook(roots.managed, "filehook")
    registry = HookRegistry()
    registry.register("command:new", lambda e: e.messages.append("code"), name="code")
    loader.load(config_for().load_spec(), registry)
    assert fire(registry).messages == ["code", "filehook"]
    result = loader.load(config_for({"hooks": {"enabled": False}}).load_spec(), registry)
    assert fire(registry).messages == ["code"]
    assert result.handlers == []
    rec = record(result, "filehook")
    assert rec.status == "disabled"
    assert rec.reasons == ["hooks.enabled is false: no file hooks are loaded"]


def test_apply_sets_the_default_timeout(
    roots: Roots, config_for: Any, write_hook: WriteHook, loader: HookLoader
) -> None:
    registry = HookRegistry()
    loader.load(config_for({"hooks": {"timeoutMs": 1234}}).load_spec(), registry)
    assert registry.default_timeout_s == pytest.approx(1.234)


def test_per_hook_timeout_precedence(roots: Roots, build: Build, write_hook: WriteHook) -> None:
    write_hook(roots.managed, "default")
    write_hook(roots.managed, "own", meta={"timeoutMs": 2500})
    write_hook(roots.managed, "both", frontmatter={"timeoutMs": 2500})
    result = build({"hooks": {"entries": {"both": {"timeoutMs": 700}}}})
    timeouts = {h.hook: h.timeout_s for h, _ in result.handlers}
    assert timeouts == {"both": 0.7, "default": None, "own": 2.5}


BLOCKS_UNTIL_RELEASED = """
import threading
RELEASE = threading.Event()
RELEASE.wait(30)  # an import that does not return until the test lets it

async def handler(event):
    event.messages.append("stuck")
"""


def test_an_import_over_its_timeout_fails_that_hook_and_the_rest_load_in_order(
    roots: Roots, build: Build, write_hook: WriteHook, loader: HookLoader
) -> None:
    write_hook(roots.managed, "a-before")
    write_hook(roots.managed, "b-stuck", handler=BLOCKS_UNTIL_RELEASED)
    write_hook(roots.managed, "c-after")
    started = time.monotonic()
    result = build({"hooks": {"entries": {"b-stuck": {"timeoutMs": 300}}}})
    assert time.monotonic() - started < 10
    stuck = record(result, "b-stuck")
    assert stuck.status == "failed"
    (reason,) = stuck.reasons
    assert reason.startswith("importing ") and "b-stuck" in reason
    assert reason.endswith(
        "did not finish within 0.3 s (abandoned); remove what blocks at import time "
        "(move it into the handler)"
    )
    assert [h.hook for h, _ in result.handlers] == ["a-before", "c-after"]
    assert messages(result) == ["a-before", "c-after"]
    assert result.registered == 2 and result.failed == [stuck.summary_line()]
    # Let the abandoned import return: its thread then ends without touching the loader.
    (stuck_module,) = [
        module
        for name, module in sys.modules.items()
        if name.startswith(f"{loader.importer.root}.b_stuck") and name.endswith(".handler")
    ]
    stuck_module.RELEASE.set()
    deadline = time.monotonic() + 10
    while any(t.name.startswith("gatewayd-load") for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the abandoned load's thread did not end"
        time.sleep(0.01)


# -- path safety --------------------------------------------------------------------------------


def test_hook_dir_symlink_escaping_the_roots_is_refused(
    roots: Roots, tmp_path: Path, build: Build, write_hook: WriteHook
) -> None:
    outside = write_hook(tmp_path / "elsewhere", "escapee")
    roots.managed.mkdir(parents=True)
    os.symlink(outside, roots.managed / "escapee")
    rec = record(build(), "escapee")
    assert rec.status == "failed"
    assert rec.reasons == [
        f"{roots.managed / 'escapee'}: resolves to {outside}, outside every hook root; "
        "move the hook directory into a hook root instead of linking to it"
    ]


def test_hook_dir_symlink_within_the_roots_is_fine(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    target = write_hook(roots.managed, "real-one")
    roots.workspace.mkdir(parents=True)
    os.symlink(target, roots.workspace / "alias", target_is_directory=True)
    result = build()
    # Same name twice: the workspace link wins, the managed original is shadowed.
    assert [(r.source, r.status) for r in result.records] == [
        ("managed", "shadowed"),
        ("workspace", "ready"),
    ]


def test_handler_symlink_escaping_the_hook_dir_is_refused(
    roots: Roots, tmp_path: Path, build: Build, write_hook: WriteHook
) -> None:
    evil = tmp_path / "evil.py"
    evil.write_text("async def handler(event):\n    event.messages.append('evil')\n")
    hook = write_hook(roots.managed, "linked", handler=None)
    os.symlink(evil, hook / "handler.py")
    rec = record(build(), "linked")
    assert rec.status == "failed"
    assert rec.reasons == [
        f"{hook / 'handler.py'}: resolves to {evil}, outside the hook directory {hook}; "
        "copy the file into the hook directory instead of linking to it"
    ]


def test_sibling_module_symlink_escaping_is_refused(
    roots: Roots, tmp_path: Path, build: Build, write_hook: WriteHook
) -> None:
    evil = tmp_path / "helper.py"
    evil.write_text("X = 'evil'\n")
    hook = write_hook(
        roots.managed,
        "sib",
        handler="from .helper import X\nasync def handler(event):\n    pass\n",
    )
    os.symlink(evil, hook / "helper.py")
    rec = record(build(), "sib")
    assert rec.status == "failed"
    assert f"{hook / 'helper.py'}: resolves to {evil}, outside the hook directory" in rec.reasons[0]


def test_a_root_others_may_write_fails_its_hooks_on_the_next_load(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    # A load remembers the directories it found safe (importer.safe_dirs), for that load only:
    # a root made writable by others after a load fails every hook in it on the next one.
    write_hook(roots.managed, "first")
    write_hook(roots.managed, "second")
    result = build()
    assert [record(result, n).status for n in ("first", "second")] == ["ready", "ready"]
    mode = roots.managed.stat().st_mode
    roots.managed.chmod(mode | 0o002)
    try:
        result = build()
    finally:
        roots.managed.chmod(mode)
    for name in ("first", "second"):
        rec = record(result, name)
        assert rec.status == "failed"
        assert f"its directory {roots.managed} is writable by other users" in rec.reasons[0]


def test_a_hook_dir_others_may_write_fails_that_hook(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    # The loader's own lstat of each hook directory stands in for the import's stat of it
    # (importer.note_dir) only when it shows no other writer.
    write_hook(roots.managed, "tidy")
    loose = write_hook(roots.managed, "loose")
    loose.chmod(loose.stat().st_mode | 0o020)
    result = build()
    assert record(result, "tidy").status == "ready"
    rec = record(result, "loose")
    assert rec.status == "failed"
    assert f"its directory {loose} is writable by other users" in rec.reasons[0]


def test_symlink_inside_the_hook_dir_is_fine(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    hook = write_hook(roots.managed, "inner", handler=None)
    (hook / "impl").mkdir()
    (hook / "impl" / "real.py").write_text(
        "async def handler(event):\n    event.messages.append('inner')\n"
    )
    os.symlink(hook / "impl" / "real.py", hook / "handler.py")
    assert messages(build()) == ["inner"]


def test_hard_linked_handler_is_refused(
    roots: Roots, tmp_path: Path, build: Build, write_hook: WriteHook
) -> None:
    hook = write_hook(roots.managed, "hard", handler=None)
    source = tmp_path / "elsewhere.py"
    source.write_text("async def handler(event):\n    pass\n")
    os.link(source, hook / "handler.py")
    rec = record(build(), "hard")
    assert rec.status == "failed"
    assert rec.reasons == [
        f"{hook / 'handler.py'}: is hard-linked (2 links), so its content may come from outside "
        "the hook directory; replace it with a plain copy (cp --no-preserve=links)"
    ]


def test_bundled_hooks_may_be_hard_linked_by_installers(
    roots: Roots, tmp_path: Path, build: Build, write_hook: WriteHook
) -> None:
    hook = write_hook(roots.bundled, "shipped", handler=None)
    cache = tmp_path / "installer-cache.py"
    cache.write_text("async def handler(event):\n    event.messages.append('shipped')\n")
    os.link(cache, hook / "handler.py")
    assert messages(build()) == ["shipped"]


# -- legacy hooks.handlers -------------------------------------------------------------------


def test_legacy_handler_inside_a_root_loads_with_tilde(
    roots: Roots, build: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(roots.state.parent))
    module = roots.managed / "legacy" / "on_new.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        "def run(event, ctx):\n    event.messages.append('legacy ' + ctx.hook_name)\n"
    )
    result = build(
        {
            "hooks": {
                "handlers": [
                    {
                        "event": "command:new",
                        "module": f"~/{roots.state.name}/hooks/legacy/on_new.py",
                        "export": "run",
                    }
                ]
            }
        }
    )
    rec = record(result, "legacy/on_new")
    assert (rec.source, rec.status, rec.events) == ("config", "ready", ["command:new"])
    assert messages(result) == ["legacy legacy/on_new"]


def test_legacy_handler_outside_the_roots_is_refused(
    roots: Roots, tmp_path: Path, build: Build
) -> None:
    module = tmp_path / "outside" / "h.py"
    module.parent.mkdir()
    module.write_text("async def handler(event):\n    pass\n")
    marker_free = build({"hooks": {"handlers": [{"event": "command:new", "module": str(module)}]}})
    rec = record(marker_free, "outside/h")
    assert rec.status == "failed"
    assert rec.reasons[0].startswith(
        f"hooks.handlers[0].module: {module} resolves to {module}, outside the managed, "
        "bundled and workspace hook roots ("
    )
    assert marker_free.handlers == []


def test_legacy_handler_extra_dirs_do_not_count(roots: Roots, build: Build) -> None:
    module = roots.extra / "x" / "h.py"
    module.parent.mkdir(parents=True)
    module.write_text("async def handler(event):\n    pass\n")
    result = build(
        {
            "hooks": {
                "load": {"extraDirs": [str(roots.extra)]},
                "handlers": [{"event": "command:new", "module": str(module)}],
            }
        }
    )
    assert record(result, "x/h").status == "failed"


def test_legacy_handler_with_a_bad_event_or_missing_file(roots: Roots, build: Build) -> None:
    roots.managed.mkdir(parents=True)
    result = build(
        {
            "hooks": {
                "handlers": [
                    {"event": "comand:new", "module": str(roots.managed / "a" / "h.py")},
                    {"event": "command:new", "module": str(roots.managed / "b" / "gone.py")},
                ]
            }
        }
    )
    bad_event, gone = result.records
    assert bad_event.status == "invalid"
    assert bad_event.reasons[0].startswith("hooks.handlers[0].event: unknown event type 'comand'")
    assert gone.status == "failed"
    assert gone.reasons == [
        f"hooks.handlers[1].module: {roots.managed / 'b' / 'gone.py'} "
        "does not exist or is not a file"
    ]


# -- imports: fresh, relative, isolated ---------------------------------------------------------


def test_relative_imports_of_sibling_modules_and_subpackages(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    hook = write_hook(
        roots.managed,
        "rel",
        handler="""
        from . import helpers
        from .helpers import greet
        from .lib.util import shout
        from .pkg import VALUE

        async def handler(event):
            event.messages.append(shout(greet(helpers.NAME)) + VALUE)
        """,
    )
    (hook / "helpers.py").write_text("NAME = 'rel'\ndef greet(n):\n    return 'hi ' + n\n")
    (hook / "lib").mkdir()
    (hook / "lib" / "util.py").write_text("def shout(s):\n    return s.upper()\n")
    (hook / "pkg").mkdir()
    (hook / "pkg" / "__init__.py").write_text("from .inner import VALUE\n")
    (hook / "pkg" / "inner.py").write_text("VALUE = '!'\n")
    assert messages(build()) == ["HI REL!"]


def test_an_edit_100ms_after_a_load_is_seen_even_with_same_size_and_mtime(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    hook = write_hook(
        roots.managed,
        "fresh",
        handler="""
        from .word import WORD
        async def handler(event):
            event.messages.append('one ' + WORD)
        """,
    )
    (hook / "word.py").write_text("WORD = 'aaa'\n")
    assert messages(build()) == ["one aaa"]
    time.sleep(0.1)
    for path, old, new in ((hook / "handler.py", "one", "two"), (hook / "word.py", "aaa", "bbb")):
        st = path.stat()
        path.write_text(path.read_text().replace(old, new))  # same size
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the same mtime
    assert messages(build()) == ["two bbb"]


@pytest.mark.slow
def test_reloads_do_not_grow_sys_modules_and_names_are_stable(
    roots: Roots, build: Build, write_hook: WriteHook, loader: HookLoader
) -> None:
    hook = write_hook(
        roots.managed, "stable", handler="from . import side\n" + "handler = side.h\n"
    )
    (hook / "side.py").write_text("async def h(event):\n    pass\n")
    build()
    before = hook_modules(loader)
    for _ in range(25):
        build()
    assert hook_modules(loader) == before
    assert len([m for m in before if m.endswith(".handler")]) == 1
    (hook / "HOOK.md").unlink()  # the hook is gone: its modules leave sys.modules
    build()
    assert hook_modules(loader) == []


def test_module_identity_is_fresh_per_load_and_old_handlers_keep_working(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    hook = write_hook(
        roots.managed,
        "gen",
        handler="""
        async def handler(event):
            from .version import V  # imported lazily, at call time
            event.messages.append(V)
        """,
    )
    (hook / "version.py").write_text("V = 'v1'\n")
    first = build()
    (hook / "version.py").write_text("V = 'v2'\n")
    second = build()
    assert first.handlers[0][0].call is not second.handlers[0][0].call
    assert messages(second) == ["v2"]
    assert messages(first) == ["v2"]  # a lazy import sees the current package: documented


def test_module_attributes(
    roots: Roots, build: Build, write_hook: WriteHook, loader: HookLoader
) -> None:
    hook = write_hook(
        roots.managed,
        "attrs",
        handler="""
        import dataclasses
        from pathlib import Path

        @dataclasses.dataclass
        class Reply:  # dataclasses look the module up in sys.modules while it runs
            text: str

        async def handler(event):
            event.messages.append(f"{__name__}|{Path(__file__).name}|{Reply('ok').text}")
        """,
    )
    (message,) = messages(build())
    name, file, text = message.split("|")
    assert name.startswith(f"{loader.importer.root}.attrs_") and name.endswith(".handler")
    assert (file, text) == ("handler.py", "ok")
    assert dataclasses.is_dataclass(sys.modules[name].Reply)
    assert not (hook / "__pycache__").exists()  # compiled from source, nothing written


@pytest.mark.parametrize(
    ("code", "line", "error"),
    [
        ("import os\nimport no_such_module_xyz\n", 2, "ModuleNotFoundError: No module named"),
        ("x = 1\ndef handler(event:\n    pass\n", 2, "SyntaxError:"),
        ("\n\nraise SystemExit(3)\n", 3, "SystemExit: 3"),
        ("raise KeyboardInterrupt\n", 1, "KeyboardInterrupt"),
        ("from .missing import x\n", 1, "ModuleNotFoundError"),
    ],
)
def test_module_level_failures_fail_only_that_hook(
    roots: Roots,
    build: Build,
    write_hook: WriteHook,
    loader: HookLoader,
    code: str,
    line: int,
    error: str,
) -> None:
    write_hook(roots.managed, "bad", handler=code)
    write_hook(roots.managed, "good")
    result = build()
    rec = record(result, "bad")
    assert rec.status == "failed"
    handler = roots.managed / "bad" / "handler.py"
    assert rec.reasons[0].startswith(f"import failed: {handler}:{line}: ")
    assert error in rec.reasons[0]
    assert messages(result) == ["good"]
    # A hook's package is `<root>.<name>_<digest>`: match the name, not any "bad" (the hex
    # digest of the good hook's directory can spell it: "good_fac0cbad" was seen).
    assert not [m for m in hook_modules(loader) if m.split(".")[1].startswith("bad_")]


def test_failure_inside_a_sibling_module_names_that_file(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    hook = write_hook(roots.managed, "deep", handler="from . import helper\n")
    (hook / "helper.py").write_text("\n\n\n1 / 0\n")
    rec = record(build(), "deep")
    assert rec.reasons == [
        f"import failed: {hook / 'helper.py'}:4: ZeroDivisionError: division by zero"
    ]


# -- exports ------------------------------------------------------------------------------------


def test_export_named_default_and_fallbacks(
    roots: Roots, build: Build, write_hook: WriteHook
) -> None:
    write_hook(
        roots.managed,
        "named",
        meta={"export": "on_new"},
        handler="def on_new(event):\n    event.messages.append('named')\n",
    )
    write_hook(
        roots.managed,
        "dflt",
        meta={"export": "default"},
        handler="async def default(event):\n    event.messages.append('dflt')\n",
    )
    write_hook(
        roots.managed,
        "index-style",
        handler_file="index.py",
        handler="class H:\n    async def __call__(self, event):\n"
        "        event.messages.append('callable')\nhandler = H()\n",
    )
    assert messages(build()) == ["dflt", "callable", "named"]


@pytest.mark.parametrize(
    ("meta", "code", "expected"),
    [
        (
            {"export": "nope"},
            "def handler(event): pass\ndef other(event): pass\n",
            "handler.py: export 'nope' not found (callables defined: handler, other); "
            "fix metadata.eliza.export",
        ),
        (
            {},
            "def run(event): pass\n",
            "handler.py: defines neither 'handler' nor 'default'; add `async def handler(event):`"
            " or name the function in metadata.eliza.export",
        ),
        ({}, "handler = 5\n", "handler.py: export 'handler': is a int, not a callable"),
        (
            {},
            "def handler(event, ctx, extra): pass\n",
            "handler.py: export 'handler': takes 3 required arguments; "
            "define it as handler(event) or handler(event, ctx)",
        ),
        (
            {},
            "def handler(): pass\n",
            "handler.py: export 'handler': takes no arguments",
        ),
    ],
)
def test_bad_exports_fail_naming_file_and_export(
    roots: Roots,
    build: Build,
    write_hook: WriteHook,
    meta: dict[str, Any],
    code: str,
    expected: str,
) -> None:
    write_hook(roots.managed, "exp", meta=meta, handler=code)
    rec = record(build(), "exp")
    assert rec.status == "failed"
    assert len(rec.reasons) == 1
    assert rec.reasons[0].startswith(str(roots.managed / "exp" / "handler.py"))
    assert expected in rec.reasons[0]


# -- ctx and command hooks -------------------------------------------------------------------


def test_ctx_carries_name_entry_env_logger_and_dirs(
    roots: Roots, build: Build, write_hook: WriteHook, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FROM_PROCESS", "p")
    monkeypatch.setenv("OVERRIDDEN", "process")
    write_hook(
        roots.managed,
        "ctxhook",
        meta={"hookKey": "ctx-key"},
        handler="""
        SEEN = []
        def handler(event, ctx):
            SEEN.append(ctx)
            ctx.log.info("ctx.used", detail=1)
        """,
    )
    result = build(
        {
            "workspace": {"dir": str(roots.state / "ws")},
            "hooks": {
                "entries": {
                    "ctx-key": {"apiKey": "k", "timeoutMs": 900, "env": {"OVERRIDDEN": "entry"}}
                }
            },
        }
    )
    registry = HookRegistry()
    registry.set_file_hooks(result.handlers)
    with structlog.testing.capture_logs() as logs:
        fire(registry)
    handler = result.handlers[0][0]
    ctx = handler.ctx
    assert ctx is not None
    assert (ctx.hook_name, ctx.hook_key) == ("ctxhook", "ctx-key")
    assert dict(ctx.config) == {
        "enabled": True,
        "env": {"OVERRIDDEN": "entry"},
        "timeoutMs": 900,
        "apiKey": "k",
    }
    assert ctx.env["FROM_PROCESS"] == "p"
    assert ctx.env["OVERRIDDEN"] == "entry"
    assert (ctx.state_dir, ctx.workspace_dir) == (roots.state, roots.state / "ws")
    assert {"event": "ctx.used", "hook": "ctxhook", "detail": 1, "log_level": "info"} in logs
    assert handler.timeout_s == pytest.approx(0.9)


def test_command_hook_gets_entry_env(roots: Roots, build: Build, write_hook: WriteHook) -> None:
    write_hook(
        roots.managed,
        "cmd",
        handler_file="handler",
        handler='#!/bin/sh\necho "$ELIZA_HOOK_NAME $ELIZA_EVENT $GREETING"\n',
    )
    result = build({"hooks": {"entries": {"cmd": {"env": {"GREETING": "hello"}}}}})
    ((handler, _),) = result.handlers
    assert handler.kind is HandlerKind.COMMAND
    assert handler.command == roots.managed / "cmd" / "handler"
    assert dict(handler.env) == {"GREETING": "hello"}
    assert messages(result) == ["cmd command:new hello"]


def test_warnings_reach_the_record(roots: Roots, build: Build, write_hook: WriteHook) -> None:
    write_hook(roots.managed, "typo", meta={"requires": {"bin": ["git"]}})
    rec = record(build(), "typo")
    assert rec.status == "ready"
    assert rec.warnings == [
        f"{roots.managed / 'typo' / 'HOOK.md'}: metadata.eliza.requires.bin: unknown key, "
        "ignored (expected bins, anyBins, env or config)"
    ]
