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
from bench.process import gatewayd
from bench.workload import env_for, hook_md, make_state, write_config
from gatewayd.hooks.events import HookEvent
from gatewayd.hooks.handlers import HandlerKind
from gatewayd.hooks.node import NodeHook, NodeRuntime, choose
from gatewayd.hooks.registry import HookRegistry

KEY = "message:received"
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


async def call_latencies(registry: HookRegistry, calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        event = HookEvent("message", "received", "agent:main:bench")
        t0 = perf_counter()
        await registry.dispatch(event)
        out.append(perf_counter() - t0)
    return out


async def dispatch_figures(base: Path, scale: Scale) -> dict[str, list[float]]:
    runs = scale.pick(5, 1)
    # Sized for make bench's 10 minute limit on a busy 2-core machine (a JS call is ~0.4 ms).
    events = scale.pick(5_000, 200)
    handler_file = write_js_hook(base / "hooks", "noop-js", "handler.js", NOOP_JS, [KEY])
    binary = choose([handler_file], None, True).binary
    if binary is None:
        raise RuntimeError("no node found: install gatewayd[node]")
    python = HookRegistry(default_timeout_s=30.0)
    python.register(KEY, noop, name="noop-py")
    js = HookRegistry(default_timeout_s=30.0)
    runtime = NodeRuntime()
    results: dict[str, list[float]] = {}
    async with anyio.create_task_group() as tg:
        await tg.start(runtime.run)
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
        results["js.calls"] = await call_latencies(js, scale.pick(2_000, 100))
        results["py.calls"] = await call_latencies(python, scale.pick(2_000, 100))
        results["node.version"] = [float(binary.version[0])]
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
        progress("nodehooks: save-to-new-code of a .ts handler, edits 1 s apart")
        reload_s = ts_reload(Path(tmp) / "reload", scale.pick(15, 2), SETTLED_S)
        progress("nodehooks: save-to-new-code of a .py handler (baseline), edits 1 s apart")
        py_reload_s = ts_reload(Path(tmp) / "pyreload", scale.pick(15, 2), SETTLED_S, "py")
        progress("nodehooks: save-to-new-code of a .ts handler, edits back to back")
        rapid_s = ts_reload(Path(tmp) / "rapid", scale.pick(15, 2), GAP_S)

    def rates(key: str) -> dict[str, object]:
        return {"runs": [round(v) for v in results[key]]}

    py_rate, js_rate = median(results["python"]), median(results["js"])
    section.add(Figure("python", "no-op Python handler, 1 session", py_rate, "events/s", "higher"))
    section.add(Figure("node", "node reference loop, 1 handler", median(node_rates), "events/s",
                       "higher", detail={"runs": [round(v) for v in node_rates]}))  # fmt: skip
    section.add(
        Figure(
            "js",
            "no-op JS handler, 1 session",
            js_rate,
            "events/s",
            "higher",
            vs=["python", "node"],
            detail=rates("js"),
            headline=True,
        )
    )
    section.add(
        Figure(
            "js.64",
            "no-op JS handler, 64 sessions (queue + dispatcher)",
            median(results["js.64"]),
            "events/s",
            "higher",
            vs=["python", "node"],
            detail=rates("js.64"),
            headline=True,
        )
    )
    js_calls, py_calls = results["js.calls"], results["py.calls"]
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
    section.add(
        Figure(
            "py.call.p50",
            "one Python handler call, p50",
            percentile(py_calls, 50) * 1e6,
            "us",
            "lower",
        )
    )
    section.add(
        Figure(
            "js.call.p50",
            "one JS handler call, p50",
            percentile(js_calls, 50) * 1e6,
            "us",
            "lower",
            vs=["py.call.p50"],
            detail={"p99_us": round(percentile(js_calls, 99) * 1e6, 1)},
        )
    )
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
        "warm-up round; gatewayd applies the 30 s per-handler timeout to JS calls too."
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


if __name__ == "__main__":
    main(run)
