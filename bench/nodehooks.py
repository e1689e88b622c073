"""Benchmark 7: JS/TS hooks, run by the Node worker, beside Python hooks and the node reference.

Dispatch, in one process on uvloop, the same registry and the same events (``message:received``
on one session, dispatched one after another, as the ``dispatch`` benchmark's registry loop):

  ``python``     one no-op ``async def handler(event)``;
  ``js``         one no-op ``export default async (event) => {}`` in ``handler.js``, run by the
                 Node worker (the event goes over the socket pair and back);
  ``js.64``      the same JS handler through the trigger queue and dispatcher with 64 sessions,
                 so up to 64 calls are in flight in the worker at once;
  ``node``       ``reference/dispatch.mjs``: the TypeScript reference design's loop in plain
                 node, one no-op handler awaited inline (no process boundary, no timeout).

Added latency of a JS handler = the mean time per event with the JS handler minus with the
Python one; a single call's p50/p99 are measured call by call.

Save to new code: a real ``gatewayd run`` (watching) with one workspace hook ``live`` whose
``handler.ts`` answers ``message`` with its version; each edit rewrites ``handler.ts`` and a client
polls with ``message`` until the new version answers (as ``livereload`` does for ``handler.py``).
"""

from __future__ import annotations

import gc
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from time import perf_counter
from typing import Any

import anyio

from bench.dispatch import node_reference
from bench.harness import (
    Figure,
    Scale,
    Section,
    Target,
    main,
    median,
    percentile,
    progress,
    spread,
)
from bench.livereload import HANDLER as LIVE_PY
from bench.livereload import POLL_S, WAIT_S, Client
from bench.nodee2e import e2e_rounds
from bench.nodepipe import NodePipe
from bench.process import gatewayd
from bench.workload import env_for, hook_md, make_state, write_config
from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.handlers import HandlerKind
from gatewayd.hooks.node import NodeHook, NodeRuntime, choose
from gatewayd.hooks.registry import HookRegistry

KEY = "message:received"
CALL_TARGET = 1.5
"""js.call.p50: at most this multiple of the raw pipe's round trip (pipe.p50), same run."""
CPU_TARGET_US = 20.0
"""Python CPU a JS call, one call at a time."""
JS64_TARGET = 0.3
"""js.64: at least this share of py.64, same run."""
E2E_TARGET = 0.7
"""e2e.js3: at least this share of e2e.py3, same run."""
GAP_S = 0.1
"""Quiet after each answered edit, as ``livereload`` waits (edits back to back)."""
SETTLED_S = 1.0
"""Quiet after each answered edit: the replaced load's handlers have been dropped by then."""
NOOP_JS = "export default async (event) => {};\n"
LIVE_TS = """import type {{ HookHandler }} from "openclaw/hooks";
const handler: HookHandler = async (event) => {{
  event.messages.push("version {n}");
}};
export default handler;
"""

Measure = Callable[[], Awaitable[float]]


async def noop(event: HookEvent) -> None:
    return None


def write_js_hook(root: Path, name: str, filename: str, source: str, events: list[str]) -> Path:
    directory = root / name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "HOOK.md").write_text(hook_md(name, events), encoding="utf-8")
    (directory / filename).write_text(source, encoding="utf-8")
    return directory / filename


def sequential(registry: HookRegistry, events: int) -> Measure:
    async def measure() -> float:
        dispatch = registry.dispatch
        start = perf_counter()
        for _ in range(events):
            await dispatch(HookEvent("message", "received", "agent:main:bench"))
        return events / (perf_counter() - start)

    return measure


def through_queue(registry: HookRegistry, events: int, sessions: int) -> Measure:
    from gatewayd.dispatcher import Dispatcher
    from gatewayd.triggers import TriggerQueue

    keys = [f"agent:main:s{i}" for i in range(sessions)]

    async def measure() -> float:
        queue = TriggerQueue(4096)
        dispatcher = Dispatcher(queue, registry, sessions)
        async with anyio.create_task_group() as tg:
            await tg.start(dispatcher.run)
            start = perf_counter()
            for i in range(events):
                await queue.post(HookEvent("message", "received", keys[i % sessions]))
            left = await dispatcher.drain(120.0)
            elapsed = perf_counter() - start
        if left:
            raise RuntimeError(f"{left} events left in the queue")
        return events / elapsed

    return measure


async def call_latencies(registry: HookRegistry, calls: int) -> tuple[list[float], float]:
    """``calls`` dispatches one after another: the seconds of each, and this process's CPU
    seconds a call."""
    out = []
    cpu0 = time.process_time()
    for _ in range(calls):
        event = HookEvent("message", "received", "agent:main:bench")
        t0 = perf_counter()
        await registry.dispatch(event)
        out.append(perf_counter() - t0)
    return out, (time.process_time() - cpu0) / calls


async def dispatch_figures(base: Path, scale: Scale) -> dict[str, list[float]]:
    runs = scale.pick(5, 1)
    # Sized for make bench's 10 minute limit on a busy 2-core machine.
    events = scale.pick(5_000, 200)
    py_events = scale.pick(50_000, 200)
    calls, latency_rounds = scale.pick(2_000, 100), scale.pick(3, 1)
    handler_file = write_js_hook(base / "hooks", "noop-js", "handler.js", NOOP_JS, [KEY])
    binary = choose([handler_file], None, True).binary
    if binary is None:
        raise RuntimeError("no node found: install gatewayd[node]")
    python = HookRegistry(default_timeout_s=30.0)
    python.register(KEY, noop, name="noop-py")
    js = HookRegistry(default_timeout_s=30.0)
    runtime = NodeRuntime()
    pipe = NodePipe(binary.path)
    results: dict[str, list[float]] = {}
    async with anyio.create_task_group() as tg:
        await tg.start(runtime.run)
        await pipe.start()
        hook = NodeHook("noop-js", handler_file)
        generation, errors = await runtime.load(binary, [hook])
        if errors:
            raise RuntimeError(f"the JS hook did not load: {errors}")
        runtime.activate(generation)
        assert hook.handler is not None and hook.handler.kind is HandlerKind.NODE
        js.set_file_hooks([(hook.handler, [KEY])])
        variants = {
            "python": sequential(python, events),
            "js": sequential(js, events),
            "py.64": through_queue(python, py_events, 64),
            "js.64": through_queue(js, events, 64),
        }
        for fn in variants.values():  # warm-up round
            await fn()
        gc.freeze()
        results = {name: [] for name in variants}
        for i in range(runs):
            progress(f"nodehooks: dispatch round {i + 1}/{runs}")
            for name, fn in variants.items():
                results[name].append(await fn())
        for key in ("js.calls", "js.cpu", "py.calls", "pipe.calls", "pipe.cpu"):
            results[key] = []
        for i in range(latency_rounds):  # call by call, the pipe's rounds between the JS ones
            progress(f"nodehooks: call latency round {i + 1}/{latency_rounds}")
            rounds = await pipe.round_trips(calls)
            results["pipe.calls"] += rounds.latencies
            results["pipe.cpu"].append(rounds.cpu_s / rounds.count)
            latencies, cpu = await call_latencies(js, calls)
            results["js.calls"] += latencies
            results["js.cpu"].append(cpu)
            results["py.calls"] += (await call_latencies(python, calls))[0]
        results["node.version"] = [float(binary.version[0])]
        pipe.close()
        tg.cancel_scope.cancel()
    return results


def ts_reload(base: Path, count: int, gap_s: float, language: str = "ts") -> list[float]:
    """Save-to-new-code latencies of ``count`` edits of a ``handler.ts`` (or, as the baseline,
    ``handler.py``) after a warm-up edit, ``gap_s`` after each answered one."""
    state = make_state(base)
    filename, template = ("handler.py", LIVE_PY) if language == "py" else ("handler.ts", LIVE_TS)
    handler = write_js_hook(
        state / "workspace" / "hooks", "live", filename, template.format(n=0), [KEY]
    )
    write_config(state, bundled=True, settings={"hooks": {"load": {"watch": True}}})
    latencies: list[float] = []
    with gatewayd(state, env_for(state)) as daemon:
        client = Client(daemon.socket_path)
        try:
            for i in range(count + 1):
                version = i + 1
                start = time.perf_counter()
                handler.write_text(template.format(n=version), encoding="utf-8")
                while not client.answers(version):
                    if time.perf_counter() - start > WAIT_S:
                        raise RuntimeError(
                            f"version {version} never answered; log:\n{daemon.log()[-2000:]}"
                        )
                    time.sleep(POLL_S)
                if i:
                    latencies.append(time.perf_counter() - start)
                time.sleep(gap_s)
        finally:
            client.close()
        daemon.stop()
    return latencies


def run(scale: Scale) -> Section:
    section = Section("nodehooks", "7. JS/TS hooks: the Node worker")
    with tempfile.TemporaryDirectory(prefix="gatewayd-bench-") as tmp:
        results = anyio.run(
            dispatch_figures, Path(tmp) / "dispatch", scale, backend_options={"use_uvloop": True}
        )
        progress("nodehooks: node reference")
        # The same reference loop as bench/dispatch.py, with one handler.
        node_rates = node_reference(scale.pick(200_000, 500), scale.pick(5, 1), (1,))[1][1]
        e2e = e2e_rounds(
            Path(tmp) / "e2e", scale.pick(3, 1), 2.5 if not scale.smoke else 1.0,
            0.5 if not scale.smoke else 0.3,
        )  # fmt: skip
        progress("nodehooks: save-to-new-code of a .ts handler, edits 1 s apart")
        reload_s = ts_reload(Path(tmp) / "reload", scale.pick(15, 2), SETTLED_S)
        progress("nodehooks: save-to-new-code of a .py handler (baseline), edits 1 s apart")
        py_reload_s = ts_reload(Path(tmp) / "pyreload", scale.pick(15, 2), SETTLED_S, "py")
        progress("nodehooks: save-to-new-code of a .ts handler, edits back to back")
        rapid_s = ts_reload(Path(tmp) / "rapid", scale.pick(15, 2), GAP_S)

    def rates(key: str) -> dict[str, object]:
        return {"runs": [round(v) for v in results[key]]}

    def rate(key: str, label: str, vs: list[str] | None = None, **extra: Any) -> Figure:
        return section.add(
            Figure(key, label, median(results[key]), "events/s", "higher", vs=vs or [],
                   detail=rates(key), **extra)
        )  # fmt: skip

    py_rate, js_rate = median(results["python"]), median(results["js"])
    rate("python", "no-op Python handler, 1 session")
    section.add(Figure("node", "node reference loop, 1 handler", median(node_rates), "events/s",
                       "higher", detail={"runs": [round(v) for v in node_rates]}))  # fmt: skip
    rate("js", "no-op JS handler, 1 session", ["python", "node"], headline=True)
    rate("py.64", "no-op Python handler, 64 sessions (queue + dispatcher)")
    py64 = median(results["py.64"])
    rate(
        "js.64",
        "no-op JS handler, 64 sessions (queue + dispatcher)",
        ["py.64"],
        target=Target(f">= {JS64_TARGET}x py.64 ({JS64_TARGET * py64:.0f}/s)",
                      low=JS64_TARGET * py64),
    )  # fmt: skip
    section.add(
        Figure(
            "js.added_us",
            "added time per event, JS handler over Python handler (mean)",
            (1 / js_rate - 1 / py_rate) * 1e6,
            "us",
            "lower",
            headline=True,
        )
    )
    js_calls, py_calls, pipe_calls = results["js.calls"], results["py.calls"], results["pipe.calls"]
    section.add(
        Figure("py.call.p50", "one Python handler call, p50", percentile(py_calls, 50) * 1e6,
               "us", "lower")
    )  # fmt: skip
    pipe_p50 = percentile(pipe_calls, 50) * 1e6
    section.add(
        Figure("pipe.p50", "raw Python <-> Node round trip of a small JSON line, p50", pipe_p50,
               "us", "lower", detail={"p99_us": round(percentile(pipe_calls, 99) * 1e6, 1)})
    )  # fmt: skip
    section.add(
        Figure(
            "js.call.p50",
            "one JS handler call, p50",
            percentile(js_calls, 50) * 1e6,
            "us",
            "lower",
            vs=["pipe.p50", "py.call.p50"],
            target=Target(f"<= {CALL_TARGET}x pipe.p50 ({CALL_TARGET * pipe_p50:.1f} us)",
                          high=CALL_TARGET * pipe_p50),
            detail={"p99_us": round(percentile(js_calls, 99) * 1e6, 1)},
            headline=True,
        )
    )  # fmt: skip
    section.add(
        Figure("pipe.cpu_us", "Python CPU a raw round trip", median(results["pipe.cpu"]) * 1e6,
               "us", "lower", detail={"runs": [round(v * 1e6, 1) for v in results["pipe.cpu"]]})
    )  # fmt: skip
    section.add(
        Figure("js.cpu_us", "Python CPU a JS handler call (one at a time)",
               median(results["js.cpu"]) * 1e6, "us", "lower", vs=["pipe.cpu_us"],
               target=Target(f"<= {CPU_TARGET_US} us", high=CPU_TARGET_US),
               detail={"runs": [round(v * 1e6, 1) for v in results["js.cpu"]]}, headline=True)
    )  # fmt: skip
    e2e_figures(section, e2e)
    section.add(
        Figure(
            "py.reload.p50",
            "save a .py handler to its new code answering, p50",
            median(py_reload_s) * 1000,
            "ms",
            "lower",
            detail=spread(py_reload_s, 1000),
        )
    )
    section.add(
        Figure(
            "ts.rapid.p50",
            f"the same, edits {GAP_S * 1000:.0f} ms after the last answered, p50",
            median(rapid_s) * 1000,
            "ms",
            "lower",
            detail=spread(rapid_s, 1000),
        )
    )
    section.add(
        Figure(
            "ts.reload.p50",
            "save a .ts handler to its new code answering, p50",
            median(reload_s) * 1000,
            "ms",
            "lower",
            vs=["py.reload.p50"],
            target=Target("< 50 ms", high=50),
            detail=spread(reload_s, 1000),
            headline=True,
        )
    )
    section.add(
        Figure(
            "ts.reload.p95",
            "save a .ts handler to its new code answering, p95",
            float(spread(reload_s, 1000)["p95"]),
            "ms",
            "lower",
            target=Target("< 100 ms", high=100),
        )
    )
    section.notes.append(
        f"Worker: node {int(results['node.version'][0])} (the first of hooks.node.path, PATH and "
        "the gatewayd[node] extra that runs the hooks); reference: `node` on PATH running "
        "`bench/reference/dispatch.mjs`. Dispatch rates: median of interleaved runs after a "
        "warm-up round; gatewayd applies the 30 s per-handler timeout to JS calls too. "
        "pipe.p50: `bench/nodepipe.py` against `bench/reference/pipe_echo.mjs` on the worker's "
        "Node, its rounds interleaved with the JS calls'; CPU a call: `time.process_time()` of "
        "this process over a round of calls made one at a time."
    )
    section.notes.append(
        "End to end (`bench/nodee2e.py`): two daemons, in-memory queue, bundled hooks off, three "
        "hooks on message:received adding a reply line each, Python in one and JS in the other; "
        "32 clients of `bench/loadgen.py`, the daemons' rounds interleaved."
    )
    section.notes.append(
        f"Save to new code: {len(reload_s)} edits of `handler.ts` after a warm-up edit, each "
        f"{SETTLED_S:g} s after the previous one answered, polled with `message` every "
        f"{POLL_S * 1000:.0f} ms; each reload imports the hook, with a module graph of its own, "
        "into the running worker (Node's module.registerHooks; a fresh worker, started ahead "
        "as the spare, every 100 reloads). Back to back: "
        f"{GAP_S * 1000:.0f} ms after the last answered edit, as `livereload` edits."
    )
    return section


def e2e_figures(section: Section, e2e: dict[str, list[dict[str, Any]]]) -> None:
    """``e2e.py3``, ``e2e.js3`` (with its ratio and target) and their CPU a message."""

    def med(name: str, key: str) -> float:
        return median([float(r[key]) for r in e2e[name]])

    def runs(name: str) -> dict[str, Any]:
        return {
            "runs": [round(r["rate"]) for r in e2e[name]],
            "p99_ms": [r["latency_ms"]["p99"] for r in e2e[name]],
        }

    py3 = med("py3", "rate")
    section.add(Figure("e2e.py3", "`message` op, 32 clients, three Python hooks (memory queue)",
                       py3, "msg/s", "higher", detail=runs("py3")))  # fmt: skip
    section.add(
        Figure("e2e.js3", "`message` op, 32 clients, three JS hooks (memory queue)",
               med("js3", "rate"), "msg/s", "higher", vs=["e2e.py3"],
               target=Target(f">= {E2E_TARGET}x e2e.py3 ({E2E_TARGET * py3:.0f} msg/s)",
                             low=E2E_TARGET * py3),
               detail=runs("js3"), headline=True)
    )  # fmt: skip
    for name in ("py3", "js3"):
        section.add(
            Figure(f"e2e.{name}.loop_us", f"e2e.{name}: the event loop's CPU a message",
                   med(name, "loop_us"), "us", "lower",
                   detail={"process_tree_us": round(med(name, "process_us"), 1)})
        )  # fmt: skip


if __name__ == "__main__":
    main(run)
