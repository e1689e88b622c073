"""Running one handler under its timeout: async coroutines, sync functions, command hooks.

Every runner returns an :class:`Outcome` and never raises for a handler's own failure (an
exception, ``SystemExit``, a timeout, a non-zero exit); only cancellation from outside passes
through. The dispatcher (``registry.py``) starts async handlers itself and only calls
:func:`finish_async` for the ones that actually suspend, so a handler that completes without
awaiting anything costs no cancel scope at all.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import types
from collections.abc import Coroutine, Generator
from enum import Enum
from typing import Any

import anyio
import structlog

from gatewayd.hooks.events import HookEvent, encode_event
from gatewayd.hooks.handlers import Handler
from gatewayd.hooks.results import merge_result
from gatewayd.hooks.stats import error_location, exc_text, running, thread_hook
from gatewayd.paths import HOOK_DEPTH_ENV

log = structlog.get_logger("gatewayd.hooks")

MAX_COMMAND_OUTPUT = 1 << 20  # bytes kept from a command hook's stdout (and stderr)
COMMAND_LINGER_S = 0.5
"""How long a command hook's output pipes may stay open after it exited (held by a child it
left in the background) before that process group is killed."""


class Outcome(Enum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"


def report_failure(handler: Handler, event: HookEvent, exc: BaseException) -> Outcome:
    """Log a handler's exception with the hook and event, count it on the hook (with its
    ``file:line``), and return ``Outcome.ERROR``."""
    message = f"{type(exc).__name__}: {exc_text(exc)}"
    source = getattr(getattr(handler.call, "__code__", None), "co_filename", None)
    where = error_location(exc, source)
    handler.stats.error(message, where)
    log.error(
        "hook.error",
        hook=handler.hook,
        event_key=event.key,
        session_key=event.session_key,
        error=message,
        where=where,
        exc_info=exc,
    )
    return Outcome.ERROR


def report_timeout(handler: Handler, event: HookEvent, timeout_s: float) -> Outcome:
    """Log a handler's timeout, count it on the hook, and return ``Outcome.TIMEOUT``."""
    handler.stats.timeout(f"timed out after {round(timeout_s * 1000)} ms")
    log.error(
        "hook.timeout",
        hook=handler.hook,
        event_key=event.key,
        session_key=event.session_key,
        timeout_ms=round(timeout_s * 1000),
        fix=f"make the handler faster or raise hooks.entries.{handler.hook_key}.timeoutMs",
    )
    return Outcome.TIMEOUT


async def finish_async(
    handler: Handler,
    event: HookEvent,
    coro: Coroutine[Any, Any, Any],
    yielded: Any,
    timeout_s: float,
) -> Outcome:
    """Drive an async handler that suspended on its first step, bounded by ``timeout_s``."""
    cancelled = anyio.get_cancelled_exc_class()
    try:
        with anyio.move_on_after(timeout_s) as scope:
            value = await resume(coro, yielded, handler.hook)
    except cancelled:
        raise
    except BaseException as exc:  # SystemExit / KeyboardInterrupt from a handler included
        return report_failure(handler, event, exc)
    if scope.cancelled_caught:
        coro.close()
        return report_timeout(handler, event, timeout_s)
    if value is not None:
        merge_result(event, handler.hook, value)
    return Outcome.OK


@types.coroutine
def resume(coro: Any, yielded: Any, hook: str | None) -> Generator[Any, Any, Any]:
    """Continue a handler's coroutine in the calling task (as ``eager.resume`` does), with
    ``running.hook`` naming it while each of its steps runs.

    A handler's coroutine that swallows the cancellation thrown into it (its timeout, or the
    shutdown) and suspends again is abandoned there: closed, and the cancellation raised on, so
    that neither the timeout nor the shutdown waits on it. ``hook`` ``None``: a runner's
    coroutine (``run_sync``, ``run_command``, a Node hook's), which catches its own timeout and
    cleans up, and is only passed through."""
    slot = running
    cancelled = anyio.get_cancelled_exc_class()
    while True:
        try:
            sent = yield yielded
        except BaseException as exc:  # cancellation included: hand it to the coroutine
            slot.hook = hook
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
            finally:
                slot.hook = None
            if hook is not None and isinstance(exc, cancelled):  # it caught it and carried on
                log.error(
                    "hook.ignored_cancel",
                    hook=hook,
                    fix="let asyncio.CancelledError propagate (clean up in finally:)",
                )
                with contextlib.suppress(RuntimeError):  # "coroutine ignored GeneratorExit"
                    coro.close()
                raise
        else:
            slot.hook = hook
            try:
                yielded = coro.send(sent)
            except StopIteration as stop:
                return stop.value
            finally:
                slot.hook = None


class HookThreads:
    """The worker threads sync handlers run in: at most ``size`` at once (a capacity limiter),
    and at most ``max_abandoned`` left running by handlers that timed out.

    Python cannot stop a thread, so a sync handler past its timeout keeps its thread until it
    returns, outside the limiter. Once ``max_abandoned`` such threads still run, no new sync
    handler is started (its call fails at once, counted in :attr:`refused`) until one ends:
    a hook that hangs forever costs a bounded number of threads, not all of them.
    """

    def __init__(self, size: int, max_abandoned: int = 16) -> None:
        self.limiter = anyio.CapacityLimiter(size)
        self.max_abandoned = max_abandoned
        self.abandoned = 0
        """Threads of timed-out handlers that are still running."""
        self.refused = 0
        """Sync handler calls not started because too many threads were abandoned."""
        self._lock = threading.Lock()

    def abandon(self, call: _ThreadCall) -> None:
        with self._lock:
            if not call.done:
                call.abandoned = True
                self.abandoned += 1

    def finished(self, call: _ThreadCall) -> None:
        with self._lock:
            call.done = True
            if call.abandoned:
                self.abandoned -= 1

    def stats(self) -> dict[str, int]:
        return {
            "size": int(self.limiter.total_tokens),
            "busy": self.limiter.borrowed_tokens,
            "abandoned": self.abandoned,
            "refused": self.refused,
        }


class _ThreadCall:
    __slots__ = ("abandoned", "done")

    def __init__(self) -> None:
        self.abandoned = False
        self.done = False


def _invoke_in_thread(
    handler: Handler, event: HookEvent, threads: HookThreads, call: _ThreadCall
) -> Any:
    token = thread_hook.set(handler.hook)
    try:
        return handler.invoke(event)
    finally:
        thread_hook.reset(token)
        threads.finished(call)


async def run_sync(
    handler: Handler, event: HookEvent, timeout_s: float, threads: HookThreads
) -> Outcome:
    """Run a sync handler in a worker thread; on timeout the thread is abandoned, not joined
    (and counted: see :class:`HookThreads`)."""
    if threads.abandoned >= threads.max_abandoned:
        threads.refused += 1
        log.error(
            "hook.thread_refused",
            hook=handler.hook,
            event_key=event.key,
            abandoned=threads.abandoned,
            fix="a sync hook keeps timing out and its threads still run: fix or disable it "
            "(gatewayd hooks list --daemon shows which), or raise hooks.maxAbandonedThreads",
        )
        return Outcome.ERROR
    cancelled = anyio.get_cancelled_exc_class()
    call = _ThreadCall()
    try:
        with anyio.move_on_after(timeout_s) as scope:
            value = await anyio.to_thread.run_sync(
                _invoke_in_thread,
                handler,
                event,
                threads,
                call,
                limiter=threads.limiter,
                abandon_on_cancel=True,
            )
    except cancelled:
        threads.abandon(call)
        raise
    except BaseException as exc:
        return report_failure(handler, event, exc)
    if scope.cancelled_caught:
        threads.abandon(call)
        return report_timeout(handler, event, timeout_s)
    if value is not None:
        merge_result(event, handler.hook, value)
    return Outcome.OK


def parse_command_output(stdout: str) -> tuple[list[str], Any]:
    """A command hook's reply and result: one JSON object ``{"messages": [...], "result":
    {...}}`` (either key optional), or else its non-empty lines and no result."""
    text = stdout.strip()
    if text.startswith("{"):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than it decodes
            data = None
        if isinstance(data, dict) and (
            isinstance(data.get("messages"), list) or isinstance(data.get("result"), dict)
        ):
            return [str(m) for m in data.get("messages") or []], data.get("result")
    return [line for line in stdout.splitlines() if line.strip()], None


async def _read_capped(stream: Any, sink: bytearray, drained: anyio.Event) -> None:
    try:
        async for chunk in stream:
            if len(sink) < MAX_COMMAND_OUTPUT:
                sink.extend(chunk[: MAX_COMMAND_OUTPUT - len(sink)])
    finally:
        drained.set()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def run_command(handler: Handler, event: HookEvent, timeout_s: float) -> Outcome:
    """Run an executable hook: event JSON on stdin, replies from stdout, its group killed on
    timeout or cancellation."""
    assert handler.command is not None
    env = {
        **os.environ,
        **handler.env,
        "ELIZA_HOOK_NAME": handler.hook,
        "ELIZA_EVENT": event.key,
        "ELIZA_SESSION_KEY": event.session_key,
        # An event the hook posts (gatewayd trigger / send) is one deeper than this one: the
        # client sends it as the request's depth, which counts toward hooks.maxDepth.
        HOOK_DEPTH_ENV: str(len(event.chain) + 1),
    }
    payload = encode_event(event, default=str)[0].encode() + b"\n"
    stdout, stderr = bytearray(), bytearray()
    cancelled = anyio.get_cancelled_exc_class()
    try:
        process = await anyio.open_process(
            [str(handler.command)],
            env=env,
            cwd=handler.command.parent,
            start_new_session=True,
        )
    except OSError as exc:
        return report_failure(handler, event, exc)
    try:
        with anyio.move_on_after(timeout_s) as scope:
            async with anyio.create_task_group() as tg:
                assert process.stdout and process.stderr and process.stdin
                drained = [anyio.Event(), anyio.Event()]
                tg.start_soon(_read_capped, process.stdout, stdout, drained[0])
                tg.start_soon(_read_capped, process.stderr, stderr, drained[1])
                # A hook that never reads stdin is allowed.
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await process.stdin.send(payload)
                await process.stdin.aclose()
                await process.wait()
                # The hook exited. A child it left running in the background may still hold
                # its stdout/stderr open: that child must not hold the event (or the daemon's
                # exit) hostage, so past a short linger the group is killed.
                with anyio.move_on_after(COMMAND_LINGER_S) as linger:
                    for done in drained:
                        await done.wait()
                if linger.cancelled_caught:
                    _kill_group(process.pid)
                    log.warning(
                        "hook.command_orphans",
                        hook=handler.hook,
                        command=str(handler.command),
                        fix="a process it started in the background kept its stdout/stderr "
                        "open and was killed; redirect its output (>/dev/null 2>&1) or "
                        "detach it (setsid) if it must outlive the hook",
                    )
                    tg.cancel_scope.cancel()
    except cancelled:
        _kill_group(process.pid)
        with anyio.CancelScope(shield=True):
            await process.aclose()
        raise
    except BaseException as exc:
        _kill_group(process.pid)
        with anyio.CancelScope(shield=True):
            await process.aclose()
        return report_failure(handler, event, exc)
    if scope.cancelled_caught:
        _kill_group(process.pid)
        with anyio.CancelScope(shield=True):
            await process.aclose()
        return report_timeout(handler, event, timeout_s)
    await process.aclose()
    if process.returncode != 0:
        tail = stderr.decode(errors="replace").strip().rpartition("\n")[2][-200:]
        message = f"exited with code {process.returncode}" + (f": {tail}" if tail else "")
        handler.stats.error(message, str(handler.command))
        log.error(
            "hook.command_failed",
            hook=handler.hook,
            event_key=event.key,
            command=str(handler.command),
            exit_code=process.returncode,
            stderr=stderr.decode(errors="replace")[-2000:],
        )
        return Outcome.ERROR
    messages, result = parse_command_output(stdout.decode(errors="replace"))
    event.messages.extend(messages)
    if result is not None:
        merge_result(event, handler.hook, result)
    return Outcome.OK
