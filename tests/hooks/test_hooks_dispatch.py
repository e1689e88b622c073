"""HookRegistry dispatch: order, the two layers, isolation of failures, timeouts, threads, and
the traced dispatch (the same engine, observed)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest
import structlog

import gatewayd.hooks.registry
from gatewayd.hooks import HookEvent, create_hook_event
from gatewayd.hooks.engine import dispatching
from gatewayd.hooks.events import EventKeyError
from gatewayd.hooks.handlers import Handler, HandlerSignatureError, make_handler
from gatewayd.hooks.registry import CodeHooks, HookRegistry, cause_chain
from gatewayd.hooks.stats import BUCKETS, RING, HookStats


def new_event(key: str = "command:new") -> HookEvent:
    etype, _, action = key.partition(":")
    return create_hook_event(etype, action, "session-1")


def appender(text: str) -> Callable[[HookEvent], Any]:
    async def handler(event: HookEvent) -> None:
        event.messages.append(text)

    return handler


def file_hook(name: str, fn: Callable[..., Any], timeout_s: float | None = None) -> Handler:
    return make_handler(fn, hook=name, timeout_s=timeout_s, source="managed")


def test_dispatch_order_specific_then_type_then_star_code_before_files() -> None:
    registry = HookRegistry()
    registry.set_file_hooks(
        [
            (file_hook("f1", appender("file1 new")), ["command:new"]),
            (file_hook("f-star", appender("file *")), ["*"]),
            (file_hook("f-type", appender("file command")), ["command"]),
            (file_hook("f2", appender("file2 new")), ["command:new"]),
        ]
    )
    registry.register("*", appender("code *"))
    registry.register("command", appender("code command"))
    registry.register("command:new", appender("code new"))
    registry.register("command:reset", appender("code reset"))
    registry.register("session", appender("code session"))
    event = new_event()
    report = anyio.run(registry.dispatch, event)
    assert event.messages == [
        "code new",
        "file1 new",
        "file2 new",
        "code command",
        "file command",
        "code *",
        "file *",
    ]
    assert (report.handlers, report.errors, report.timeouts) == (7, 0, 0)


def test_code_handlers_survive_every_file_reload() -> None:
    registry = HookRegistry()
    registry.register("command:new", appender("code"))
    for generation in range(3):
        registry.set_file_hooks([(file_hook("f", appender(f"file {generation}")), ["command"])])
        event = new_event()
        anyio.run(registry.dispatch, event)
        assert event.messages == ["code", f"file {generation}"]
    registry.set_file_hooks([])
    event = new_event()
    anyio.run(registry.dispatch, event)
    assert event.messages == ["code"]


def test_a_key_listed_twice_runs_the_handler_once() -> None:
    registry = HookRegistry()
    registry.set_file_hooks([(file_hook("f", appender("once")), ["command", "command"])])
    event = new_event()
    anyio.run(registry.dispatch, event)
    assert event.messages == ["once"]


def test_the_plan_is_copied_before_running() -> None:
    registry = HookRegistry()

    async def registers_another(event: HookEvent) -> None:
        event.messages.append("first")
        registry.register("command:new", appender("late"))
        registry.set_file_hooks([])

    registry.register("command:new", registers_another)
    registry.set_file_hooks([(file_hook("f", appender("file")), ["command:new"])])
    event = new_event()
    anyio.run(registry.dispatch, event)
    assert event.messages == ["first", "file"]  # the plan it started with
    event = new_event()
    anyio.run(registry.dispatch, event)
    assert event.messages == ["first", "late"]


def test_register_validates_key_and_signature() -> None:
    registry = HookRegistry()
    with pytest.raises(EventKeyError, match="unknown event type 'comand'"):
        registry.register("comand:new", appender("x"))
    with pytest.raises(HandlerSignatureError, match="define it as handler"):
        registry.register("command:new", lambda: None)
    fn = appender("x")
    registry.register("command:new", fn)
    assert registry.unregister("command:new", fn) is True
    assert registry.unregister("command:new", fn) is False


def test_code_handler_with_ctx_gets_a_default_context() -> None:
    registry = HookRegistry()
    seen: list[Any] = []
    registry.register("command", lambda event, ctx: seen.append(ctx.hook_name), name="named")
    anyio.run(registry.dispatch, new_event())
    assert seen == ["named"]


def _raiser(exc: BaseException, *, after_await: bool, sync: bool) -> Callable[..., Any]:
    if sync:

        def sync_handler(event: HookEvent) -> None:
            raise exc

        return sync_handler

    async def async_handler(event: HookEvent) -> None:
        if after_await:
            await anyio.lowlevel.checkpoint()
        raise exc

    return async_handler


@pytest.mark.parametrize(
    "exc",
    [RuntimeError("boom"), SystemExit(2), KeyboardInterrupt(), ValueError("v")],
    ids=["RuntimeError", "SystemExit", "KeyboardInterrupt", "ValueError"],
)
@pytest.mark.parametrize(
    ("sync", "after_await"),
    [(False, False), (False, True), (True, False)],
    ids=["async-immediate", "async-after-await", "sync-thread"],
)
def test_failures_are_isolated_logged_and_counted(
    exc: BaseException, sync: bool, after_await: bool
) -> None:
    registry = HookRegistry()
    registry.set_file_hooks(
        [
            (file_hook("before", appender("before")), ["command:new"]),
            (file_hook("bad", _raiser(exc, after_await=after_await, sync=sync)), ["command:new"]),
            (file_hook("after", appender("after")), ["command"]),
        ]
    )
    event = new_event()
    with structlog.testing.capture_logs() as logs:
        report = anyio.run(registry.dispatch, event)
    assert event.messages == ["before", "after"]
    assert (report.handlers, report.errors, report.timeouts) == (3, 1, 0)
    (line,) = [entry for entry in logs if entry["event"] == "hook.error"]
    assert line["hook"] == "bad"
    assert line["event_key"] == "command:new"
    assert line["error"].startswith(type(exc).__name__)


def test_async_timeout_is_isolated() -> None:
    registry = HookRegistry()

    async def slow(event: HookEvent) -> None:
        await anyio.sleep(60)

    registry.set_file_hooks(
        [
            (file_hook("slow", slow, timeout_s=0.2), ["command:new"]),
            (file_hook("after", appender("after")), ["command:new"]),
        ]
    )
    event = new_event()
    with structlog.testing.capture_logs() as logs:
        report = anyio.run(registry.dispatch, event)
    assert event.messages == ["after"]
    assert (report.errors, report.timeouts) == (0, 1)
    (line,) = [entry for entry in logs if entry["event"] == "hook.timeout"]
    assert (line["hook"], line["timeout_ms"]) == ("slow", 200)


def test_sync_timeout_abandons_the_thread() -> None:
    release = threading.Event()
    registry = HookRegistry()

    def stuck(event: HookEvent) -> None:
        release.wait(60)

    registry.set_file_hooks(
        [
            (file_hook("stuck", stuck, timeout_s=0.2), ["command:new"]),
            (file_hook("after", appender("after")), ["command:new"]),
        ]
    )
    event = new_event()
    try:
        report = anyio.run(registry.dispatch, event)
    finally:
        release.set()  # let the abandoned worker thread finish
    assert event.messages == ["after"]
    assert report.timeouts == 1


def test_registry_default_timeout_applies_without_a_hook_timeout() -> None:
    registry = HookRegistry(default_timeout_s=0.2)

    async def slow(event: HookEvent) -> None:
        await anyio.sleep(60)

    registry.set_file_hooks([(file_hook("slow", slow), ["command"])])
    assert anyio.run(registry.dispatch, new_event()).timeouts == 1


def test_a_sync_handler_does_not_block_the_loop() -> None:
    # The sync handler waits for an event only a task on the event loop sets: if the handler
    # ran on the loop's thread, that task could never run and the handler would time out.
    loop_ran = threading.Event()
    registry = HookRegistry()

    def waits_for_the_loop(event: HookEvent) -> None:
        if not loop_ran.wait(20):
            raise AssertionError("the event loop was blocked")
        event.messages.append(f"thread {threading.current_thread() is threading.main_thread()}")

    registry.set_file_hooks([(file_hook("sync", waits_for_the_loop, timeout_s=30), ["command"])])

    async def main() -> Any:
        async def on_the_loop() -> None:
            await anyio.sleep(0.05)
            loop_ran.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(on_the_loop)
            event = new_event()
            report = await registry.dispatch(event)
        return report, event.messages

    report, messages = anyio.run(main)
    assert (report.errors, report.timeouts) == (0, 0)
    assert messages == ["thread False"]


def test_cancellation_from_outside_is_not_swallowed() -> None:
    registry = HookRegistry()
    finished: list[bool] = []

    async def slow(event: HookEvent) -> None:
        await anyio.sleep(60)
        finished.append(True)

    registry.set_file_hooks([(file_hook("slow", slow, timeout_s=60), ["command"])])

    async def main() -> bool:
        with anyio.move_on_after(0.2) as scope:
            await registry.dispatch(new_event())
        return scope.cancelled_caught

    assert anyio.run(main) is True
    assert finished == []


def test_every_call_is_counted_and_timed_across_ring_folds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(gatewayd.hooks.registry, "BURST_S", 0.0)  # no burst: every call timed
    registry = HookRegistry()

    async def quiet(event: HookEvent) -> None:
        pass

    async def deciding(event: HookEvent) -> dict[str, Any]:
        return {"context": {"seen": True}}

    registry.set_file_hooks(
        [
            (file_hook("quiet", quiet), ["command:new"]),
            (file_hook("deciding", deciding), ["command"]),
        ]
    )

    async def many() -> list[Any]:
        return [await registry.dispatch(new_event()) for _ in range(RING + 44)]

    reports = anyio.run(many)
    assert {(r.handlers, r.errors, r.timeouts, r.outcomes) for r in reports} == {(2, 0, 0, ())}
    for name in ("quiet", "deciding"):
        stats = registry.stats()[name]
        cumulative, total_s, count = stats.histogram()
        assert stats.calls == stats.timed == count == cumulative[-1] == RING + 44
        assert stats.folded == RING and total_s >= 0
        assert all(0 <= d < 1 for d in stats.durations)


def test_in_a_burst_every_call_is_counted_and_one_event_in_eight_timed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Back-to-back events (one long burst here): the calls that return without suspending
    are timed on the 1st, 9th, 17th... event of their key; calls that suspend or run in a
    thread are timed every time, from their own start."""
    monkeypatch.setattr(gatewayd.hooks.registry, "BURST_S", 3600.0)

    async def quiet(event: HookEvent) -> None:
        pass

    async def suspends(event: HookEvent) -> None:
        await anyio.sleep(0.002)

    def in_thread(event: HookEvent) -> None:
        pass

    registry = HookRegistry()
    registry.set_file_hooks(
        [
            (file_hook("quiet", quiet), ["command:new"]),
            (file_hook("suspends", suspends, timeout_s=5), ["command:new"]),
            (file_hook("in_thread", in_thread), ["command:new"]),
            (file_hook("other_key", quiet), ["command:reset"]),
        ]
    )
    events = 8 * 5 + 3

    async def many() -> None:
        for _ in range(events):
            await registry.dispatch(new_event())
        await registry.dispatch(new_event("command:reset"))  # its key's first: timed

    anyio.run(many)
    stats = registry.stats()
    assert {name: s.calls for name, s in stats.items()} == {
        "quiet": events,
        "suspends": events,
        "in_thread": events,
        "other_key": 1,
    }
    assert {name: s.timed for name, s in stats.items()} == {
        "quiet": len(range(1, events + 1, 8)),  # the key's 1st, 9th, 17th... events
        "suspends": events,
        "in_thread": events,
        "other_key": 1,
    }
    for s in stats.values():
        cumulative, _, count = s.histogram()
        assert count == cumulative[-1] == s.timed
    assert min(stats["suspends"].durations[:events]) >= 0.002
    assert max(stats["in_thread"].durations[:events]) < 1


def test_a_fold_counts_each_duration_in_the_bucket_of_its_upper_bound() -> None:
    stats = HookStats()
    # Exactly on a bound counts in that bound's bucket (le="0.001" includes 0.001 s).
    ring = [0.0, 0.0005, 0.0007, 0.001, 0.0011, 29.0, 30.0, 31.0] * (RING // 8)
    for seconds in ring:
        stats.record(seconds)
    assert stats.folded == RING
    expected = [0] * (len(BUCKETS) + 1)
    for seconds in ring:
        expected[sum(bound < seconds for bound in BUCKETS)] += 1
    assert stats.buckets == expected
    assert stats.total_s == pytest.approx(sum(ring))
    stats.record(100.0)  # not folded yet: counted by histogram() from the ring
    cumulative, _, count = stats.histogram()
    assert count == RING + 1 and cumulative[-1] == RING + 1 and cumulative[-2] == RING - RING // 8


def _sleeper(text: str, seconds: float) -> Callable[[HookEvent], Any]:
    async def handler(event: HookEvent) -> None:
        await anyio.sleep(seconds)
        event.messages.append(text)

    return handler


def test_handlers_that_suspend_each_run_under_their_own_timeout() -> None:
    # The plan runs in one generator that dispatch steps by hand: a handler that suspends goes
    # on under its own timeout, one past it ends that generator and the rest of the plan runs
    # in a new one, which must still report what failed before.
    def sync_one(event: HookEvent) -> None:
        event.messages.append("sync")

    registry = HookRegistry()
    registry.set_file_hooks(
        [
            (file_hook("brief", _sleeper("brief", 0.01), timeout_s=5), ["command:new"]),
            (
                file_hook("bad", _raiser(ValueError("no"), after_await=False, sync=False)),
                ["command:new"],
            ),
            (file_hook("slow", _sleeper("slow", 60), timeout_s=0.2), ["command:new"]),
            (file_hook("yields", _sleeper("yields", 0), timeout_s=5), ["command:new"]),
            (file_hook("sync", sync_one, timeout_s=5), ["command:new"]),
            (file_hook("slow2", _sleeper("slow2", 60), timeout_s=0.1), ["command:new"]),
            (file_hook("last", appender("last")), ["command:new"]),
        ]
    )
    event = new_event()
    report = anyio.run(registry.dispatch, event)
    assert event.messages == ["brief", "yields", "sync", "last"]
    assert (report.handlers, report.errors, report.timeouts) == (7, 1, 2)
    assert [(o.hook, o.outcome) for o in report.outcomes] == [
        ("bad", "error"),
        ("slow", "timeout"),
        ("slow2", "timeout"),
    ]
    stats = registry.stats()
    assert {name: stats[name].calls for name in stats} == dict.fromkeys(stats, 1)
    assert 0.2 <= stats["slow"].durations[0] < 5 and 0.1 <= stats["slow2"].durations[0] < 5
    assert (stats["bad"].errors, stats["slow"].timeouts, stats["slow2"].timeouts) == (1, 1, 1)


def test_a_handler_that_swallows_its_timeout_and_waits_again_is_abandoned() -> None:
    closed: list[bool] = []

    async def stubborn(event: HookEvent) -> None:
        try:
            await anyio.sleep(60)
        except BaseException:
            try:
                await anyio.sleep(60)  # carries on after its cancellation: not waited for
            finally:
                closed.append(True)

    registry = HookRegistry()
    registry.set_file_hooks(
        [
            (file_hook("stubborn", stubborn, timeout_s=0.2), ["command:new"]),
            (file_hook("after", appender("after")), ["command:new"]),
        ]
    )
    event = new_event()

    async def timed() -> tuple[Any, float]:
        start = anyio.current_time()
        report = await registry.dispatch(event)
        return report, anyio.current_time() - start

    with structlog.testing.capture_logs() as logs:
        report, elapsed = anyio.run(timed)
    assert elapsed < 30
    assert event.messages == ["after"]
    assert closed == [True]
    assert (report.handlers, report.errors, report.timeouts) == (2, 0, 1)
    assert [entry["hook"] for entry in logs if entry["event"] == "hook.ignored_cancel"] == [
        "stubborn"
    ]


def test_a_handler_that_swallows_its_timeout_and_returns_lets_the_rest_run() -> None:
    async def shrugs(event: HookEvent) -> None:
        try:
            await anyio.sleep(60)
        except BaseException:
            event.messages.append("shrugged")

    registry = HookRegistry()
    registry.set_file_hooks(
        [
            (file_hook("shrugs", shrugs, timeout_s=0.1), ["command:new"]),
            (file_hook("next", _sleeper("next", 0.01), timeout_s=5), ["command:new"]),
        ]
    )
    event = new_event()
    report = anyio.run(registry.dispatch, event)
    assert event.messages == ["shrugged", "next"]
    assert report.handlers == 2 and report.errors == 0


def test_running_hook_names_a_handler_only_while_its_code_runs() -> None:
    from gatewayd.hooks.stats import running

    seen: list[tuple[str, str | None]] = []
    suspended, resume = anyio.Event(), anyio.Event()

    async def watched(event: HookEvent) -> None:
        seen.append(("before await", running.hook))
        suspended.set()
        await resume.wait()
        seen.append(("after await", running.hook))

    async def main() -> None:
        async def meanwhile() -> None:
            await suspended.wait()  # runs while the handler is suspended
            seen.append(("other task", running.hook))
            resume.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(meanwhile)
            await registry.dispatch(new_event())
        seen.append(("after dispatch", running.hook))

    registry = HookRegistry()
    registry.set_file_hooks([(file_hook("watched", watched, timeout_s=5), ["command"])])
    anyio.run(main)
    assert seen == [
        ("before await", "watched"),
        ("other task", None),
        ("after await", "watched"),
        ("after dispatch", None),
    ]


def test_each_handler_sees_its_cfg_and_the_event_gets_its_own_back_after_a_timeout() -> None:
    seen: list[Any] = []

    async def slow(event: HookEvent) -> None:
        seen.append(event.context["cfg"])
        await anyio.sleep(60)

    async def plain(event: HookEvent) -> None:
        seen.append(event.context["cfg"])

    registry = HookRegistry()
    own = file_hook("slow", slow, timeout_s=0.1)
    own.cfg = {"own": True}
    registry.set_file_hooks([(own, ["command:new"]), (file_hook("plain", plain), ["command"])])
    event = new_event()
    event.context["cfg"] = base = {"base": True}
    report = anyio.run(registry.dispatch, event)
    assert report.timeouts == 1
    assert seen == [{"own": True}, base]
    assert event.context["cfg"] is base


def test_a_handler_that_blocks_after_suspending_ends_the_chain() -> None:
    async def blocks(event: HookEvent) -> dict[str, Any]:
        await anyio.sleep(0.01)
        return {"cancel": True}

    registry = HookRegistry()
    registry.set_file_hooks(
        [
            (file_hook("blocks", blocks, timeout_s=5), ["message:sending"]),
            (file_hook("later", appender("later")), ["message:sending"]),
        ]
    )
    event = new_event("message:sending")
    report = anyio.run(registry.dispatch, event)
    assert event.halted and event.messages == []
    assert (report.handlers, report.errors, report.timeouts) == (1, 0, 0)


@pytest.mark.parametrize("trace", [False, True], ids=["untraced", "traced"])
def test_a_plan_of_every_case_runs_the_same_traced_or_not(trace: bool) -> None:
    """One plan of every case the engine takes (ctx, cfg views, a result, a failure, a handler
    that suspends, then one that halts the chain) runs the same traced or not: what the
    handlers saw, the event, the counts in the report, the counters; traced, the report holds
    every handler's record, in order."""
    seen: list[Any] = []

    async def plain(event: HookEvent) -> None:
        seen.append(("plain", event.context["cfg"]))

    async def with_ctx(event: HookEvent, ctx: Any) -> dict[str, Any]:
        seen.append(("with_ctx", ctx.hook_name, event.context["cfg"]))
        return {"content": "rewritten"}

    async def fails(event: HookEvent) -> None:
        seen.append(("fails", event.context["content"]))
        raise ValueError("no")

    async def suspends(event: HookEvent) -> None:
        await anyio.lowlevel.checkpoint()
        seen.append(("suspends", event.context["cfg"]))

    async def halts(event: HookEvent) -> dict[str, Any]:
        seen.append(("halts",))
        return {"block": True}

    own = file_hook("with_ctx", with_ctx)
    own.cfg = {"own": True}
    registry = HookRegistry()
    registry.set_file_hooks(
        [
            (file_hook("plain", plain), ["message:received"]),
            (own, ["message:received"]),
            (file_hook("fails", fails), ["message:received"]),
            (file_hook("suspends", suspends, timeout_s=5), ["message"]),
            (file_hook("halts", halts), ["message"]),
            (file_hook("never", appender("never")), ["*"]),
        ]
    )

    async def twice() -> list[Any]:
        reports = []
        for _ in range(2):  # the first builds the plan, the second runs the cached one
            event = new_event("message:received")
            event.context.update(cfg=base, content="hi")
            event.trace = trace
            reports.append((await registry.dispatch(event), event))
        return reports

    base = {"base": True}
    with structlog.testing.capture_logs():
        runs = anyio.run(twice)
    ran = ["plain", "with_ctx", "fails", "suspends", "halts"]
    for report, event in runs:
        assert (report.handlers, report.errors, report.timeouts) == (5, 1, 0)
        if trace:
            assert [(o.hook, o.outcome) for o in report.outcomes] == [
                (hook, "error" if hook == "fails" else "ok") for hook in ran
            ]
            changed = {o.hook: o.changed for o in report.outcomes}
            assert changed["with_ctx"] == {
                "messages": [],
                "context": {"added": [], "changed": ["content"], "removed": []},
            }
        else:
            assert [o.hook for o in report.outcomes] == ["fails"]
        assert event.halted and event.messages == []
        assert event.context["cfg"] is base and event.context["content"] == "rewritten"
        assert event.result == {"content": "rewritten", "block": True}
    assert seen == 2 * [
        ("plain", base),
        ("with_ctx", "with_ctx", {"own": True}),
        ("fails", "rewritten"),
        ("suspends", base),
        ("halts",),
    ]
    calls = {name: s.calls for name, s in registry.stats().items()}
    assert calls == {"plain": 2, "with_ctx": 2, "fails": 2, "suspends": 2, "halts": 2, "never": 0}
    assert registry.stats()["fails"].errors == 2


def test_a_plan_asked_for_with_another_type_is_that_key_s_plan() -> None:
    def sync_handler(event: HookEvent) -> None:
        event.messages.append("sync")

    registry = HookRegistry()
    registry.register("command:new", appender("async"))
    registry.register("command", sync_handler)
    registry.register("session", appender("session"))
    event = new_event()
    anyio.run(registry.dispatch, event)
    assert event.messages == ["async", "sync"]
    assert registry.plan("session", "command:other") == registry.plan("session", "session:start")


def test_a_traced_dispatch_records_sync_and_suspending_handlers_and_counts_them() -> None:
    """The trace observes the one engine: a sync handler (a thread) and an async one that
    suspends are recorded with what they added, and counted as an untraced run counts them."""

    def in_thread(event: HookEvent) -> None:
        event.messages.append("thread")
        event.context["seen"] = True

    async def suspends(event: HookEvent) -> None:
        await anyio.lowlevel.checkpoint()
        event.messages.append("later")

    registry = HookRegistry()
    registry.register("command:new", in_thread, name="sync")
    registry.register("command:new", suspends, name="suspends")
    event = new_event()
    event.trace = True
    report = anyio.run(registry.dispatch, event)
    assert event.messages == ["thread", "later"]
    assert [(o.hook, o.outcome, o.kind) for o in report.outcomes] == [
        ("sync", "ok", "python"),
        ("suspends", "ok", "python"),
    ]
    assert report.outcomes[0].changed == {
        "messages": ["thread"],
        "context": {"added": ["seen"], "changed": [], "removed": []},
    }
    assert report.outcomes[1].changed == {
        "messages": ["later"],
        "context": {"added": [], "changed": [], "removed": []},
    }
    stats = registry.stats()
    assert (stats["sync"].calls, stats["sync"].timed) == (1, 1)
    assert (stats["suspends"].calls, stats["suspends"].timed) == (1, 1)
    assert registry.event_counts == {"command:new": 1}


def test_handlers_given_run_whatever_they_subscribe_to_and_are_not_an_event_of_the_key() -> None:
    """``hooks test``'s way in: a hook's handlers, given, run for an event they do not
    subscribe to; counted on the hook, not as an event of the key."""
    registry = HookRegistry()
    handler = registry.register("session:start", appender("ran"), name="only-session")
    event = new_event("command:new")
    event.trace = True
    report = anyio.run(lambda: registry.dispatch(event, handlers=[handler]))
    assert event.messages == ["ran"]
    assert [o.hook for o in report.outcomes] == ["only-session"]
    assert registry.stats()["only-session"].calls == 1
    assert registry.event_counts == {}


def test_a_dispatch_whose_handlers_do_not_suspend_is_done_when_called() -> None:
    """dispatch() runs such a plan in the call and returns a done future holding the report;
    ``dispatching`` names the event only while the handlers run."""
    registry = HookRegistry()
    seen: list[Any] = []

    async def quiet(event: HookEvent) -> None:
        seen.append(dispatching.get())

    async def fails(event: HookEvent) -> None:
        raise ValueError("no")

    registry.register("command:new", quiet)
    registry.register("command:reset", fails)

    async def main() -> list[Any]:
        event, failing = new_event(), new_event("command:reset")
        ready = registry.dispatch(event)
        assert seen == [event] and dispatching.get() is None  # ran before any await
        failed = registry.dispatch(failing)
        assert dispatching.get() is None
        return [await ready, await failed, await registry.dispatch(new_event())]

    with structlog.testing.capture_logs():
        clean, failed, again = anyio.run(main)
    assert (clean.handlers, clean.errors, clean.timeouts, clean.outcomes) == (1, 0, 0, ())
    assert again == clean
    assert (failed.handlers, failed.errors, failed.timeouts) == (1, 1, 0)
    assert [o.outcome for o in failed.outcomes] == ["error"]


def test_a_handler_that_suspends_sees_its_event_until_the_dispatch_ends() -> None:
    """When a handler suspends, dispatch() returns a coroutine that runs the rest; the handler
    sees ``dispatching`` (its cause chain) before and after suspending, and the caller sees it
    reset once the dispatch ended, cancelled or not."""
    registry = HookRegistry()
    seen: list[tuple[str, Any]] = []

    async def suspends(event: HookEvent) -> None:
        seen.append(("before", dispatching.get()))
        await anyio.lowlevel.checkpoint()
        seen.append(("after", cause_chain(8, None)))
        if event.action == "stop":
            await anyio.sleep(60)

    async def next_one(event: HookEvent) -> None:
        seen.append(("next", dispatching.get()))

    registry.register("command", suspends)
    registry.register("command", next_one)

    async def main() -> tuple[Any, bool, Any]:
        event = new_event()
        pending = registry.dispatch(event)
        assert seen == [("before", event)] and dispatching.get() is None
        report = await pending
        assert dispatching.get() is None
        assert seen[1:] == [("after", ("command:new",)), ("next", event)]
        with anyio.move_on_after(0.1) as scope:
            await registry.dispatch(new_event("command:stop"))
        return report, scope.cancelled_caught, dispatching.get()

    report, cancelled, after = anyio.run(main)
    assert (report.handlers, report.errors, report.timeouts) == (2, 0, 0)
    assert cancelled and after is None
    assert [what for what, _ in seen] == ["before", "after", "next", "before", "after"]


@pytest.mark.parametrize("burst_s", [3600.0, 0.0], ids=["burst", "every-call-timed"])
def test_every_call_is_counted_once_whatever_ends_it(
    monkeypatch: pytest.MonkeyPatch, burst_s: float
) -> None:
    """The counters match the calls made, and the event counts the events (all-async plans
    count an event and its calls ahead, then take back the calls not made): a chain halted, a
    failure, a suspension, a cancellation raised by a handler (not counted: not its failure),
    a reload from inside a handler, counters read from inside one, a hook listed twice in a
    plan, and code handlers planned by two registries."""
    monkeypatch.setattr(gatewayd.hooks.registry, "BURST_S", burst_s)
    made: list[str] = []

    async def first(event: HookEvent) -> dict[str, Any] | None:
        made.append("first")
        what = event.context.get("do")
        if what == "fail":
            raise ValueError("no")
        if what == "suspend":
            await anyio.lowlevel.checkpoint()
        if what == "reload":
            registry.set_file_hooks(hooks)
        if what == "read":
            registry.stats()
        if what == "cancel":
            raise anyio.get_cancelled_exc_class()()
        return {"block": True} if what == "halt" else None

    async def twice(event: HookEvent) -> None:
        made.append("twice")

    async def last(event: HookEvent) -> None:
        made.append("last")

    async def shared(event: HookEvent) -> None:
        made.append("shared")

    code = CodeHooks()
    code.register("message:received", shared, name="shared")
    registry, other = HookRegistry(code=code), HookRegistry(code=code)
    hooks = [
        (file_hook("first", first), ["message:received"]),
        (file_hook("twice", twice), ["message", "message:received"]),
        (file_hook("last", last), ["*"]),
    ]
    registry.set_file_hooks(hooks)
    plans = ["clean", "halt", "fail", "suspend", "reload", "read", "cancel"] * 3

    async def main() -> None:
        for what in plans:
            event = new_event("message:received")
            event.context["do"] = what
            with structlog.testing.capture_logs():
                try:
                    await registry.dispatch(event)
                except anyio.get_cancelled_exc_class():
                    assert what == "cancel"
            await other.dispatch(new_event("message:received"))

    anyio.run(main)
    cancels = plans.count("cancel")  # each of those calls of "first" is not counted
    expected = {name: made.count(name) for name in ("first", "twice", "last", "shared")}
    expected["first"] -= cancels
    assert {name: s.calls for name, s in registry.stats().items()} == expected
    assert expected["twice"] == 2 * (len(plans) - plans.count("halt") - cancels)
    assert registry.stats()["first"].errors == plans.count("fail")
    assert registry.event_counts == other.event_counts == {"message:received": len(plans)}


def test_a_plan_of_many_handlers_reports_them_all() -> None:
    """Past the 64 clean reports (and their done futures) built once."""
    registry = HookRegistry()
    for i in range(70):
        registry.register("command:new", appender(str(i)), name=f"h{i}")

    async def twice() -> list[Any]:
        return [await registry.dispatch(new_event()) for _ in range(2)]

    reports = anyio.run(twice)
    assert [(r.handlers, r.errors, r.timeouts) for r in reports] == [(70, 0, 0)] * 2
    assert registry.stats()["h69"].calls == 2
