"""The Prometheus endpoint (``gateway.metrics.listen``): the gateway's figures for a scraper.

Off unless ``gateway.metrics.listen`` is set (``PORT`` listens on 127.0.0.1, ``HOST:PORT`` where
asked). The figures come from the official ``prometheus_client`` library: a custom collector
reads the gateway's own counters at scrape time, so the dispatch path does nothing extra for
metrics. ``GET /metrics`` is served by a small HTTP/1.0 responder on the event loop (one
request per connection), which gives the collector a consistent view: nothing changes while it
reads. Anything else gets 404; a request head over :data:`MAX_HEAD` bytes or slower than
:data:`READ_TIMEOUT_S` is dropped. Nothing a scraper or the process's limits do ends the
daemon: a failed ``accept()`` (EMFILE) is logged once and retried with backoff, and a scrape
that fails is logged with its traceback and answered 500.

Families (all prefixed ``gatewayd_``): ``events_total{type}``, ``queue_depth``,
``queue_capacity``, ``queue_refused_total`` (refused with ``queue_full``: their session stayed
full), ``queue_latency_seconds{quantile}``, ``events_dispatched_total``,
``hook_calls_total{hook}``, ``hook_errors_total{hook}``, ``hook_timeouts_total{hook}``,
``hook_stalls_total{hook}``, ``hook_duration_seconds{hook}`` (a histogram),
``reloads_total{result}``, ``loop_stalls_total``, ``hooks{status}`` (the last load), and
``journal_*`` for every figure of the trigger queue's journal: the ones that only grow as
counters (``journal_commits_total``, ``journal_refused_total``, Redis's ``posted``, ``read``,
``claimed``, ``reconnects``), the others as gauges, a yes/no figure as 0 or 1 (``journal_full``,
``journal_connected``), and for Redis each owned partition's ``journal_partition_lag`` and
``journal_partition_pending`` (``{partition}``). ``process_*`` are prometheus_client's own
(CPU seconds, resident and virtual memory, open and maximum descriptors, start time).

``hook_duration_seconds`` holds the calls *timed*, so its count can be below
``hook_calls_total``, which counts every call: a call that suspends, fails, or runs in a thread
or another process is always timed; an async handler's call that returns without suspending is
timed unless its event came in a burst (less than 1 ms after the one before), where only one
event in 8 of that key is (``gatewayd/hooks/stats.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import anyio
import structlog
from anyio.abc import SocketStream, TaskStatus
from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from gatewayd.accepting import RetryingAccept
from gatewayd.hooks.stats import BUCKETS, HookStats

log = structlog.get_logger("gatewayd.metrics")

MAX_HEAD = 8192
READ_TIMEOUT_S = 5.0


class MetricsSource(Protocol):
    """What the collector reads (``facade.GatewayFacade`` provides it)."""

    def metrics_snapshot(self) -> dict[str, Any]:
        """``{events: {key: n}, queue: {...}, hooks: {name: HookStats}, reloads: {result: n},
        loop_stalls: n, statuses: {status: n}, journal: {...} | None}``."""
        ...


def parse_listen(value: str) -> tuple[str, int]:
    """``PORT`` -> ``("127.0.0.1", PORT)``; ``HOST:PORT`` as given (``[::1]:9464`` too)."""
    host, _, port = value.rpartition(":")
    return (host.strip("[]") or "127.0.0.1"), int(port)


class GatewayCollector(Collector):
    """Reads a :class:`MetricsSource` at each scrape; see the module docstring."""

    def __init__(self, source: MetricsSource) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        snap = self.source.metrics_snapshot()
        by_type: dict[str, int] = {}
        for key, n in snap["events"].items():
            etype = key.partition(":")[0]
            by_type[etype] = by_type.get(etype, 0) + n
        events = CounterMetricFamily(
            "gatewayd_events", "Events dispatched, by event type", labels=["type"]
        )
        for etype, n in sorted(by_type.items()):
            events.add_metric([etype], n)
        yield events
        queue = snap["queue"]
        yield GaugeMetricFamily("gatewayd_queue_depth", "Events queued", value=queue["depth"])
        yield GaugeMetricFamily(
            "gatewayd_queue_capacity", "Events the queue holds", value=queue["capacity"]
        )
        yield CounterMetricFamily(
            "gatewayd_queue_refused",
            "Events refused with queue_full (their session stayed at gateway.queue.perSessionMax)",
            value=queue.get("refused", 0),
        )
        yield CounterMetricFamily(
            "gatewayd_events_dispatched", "Events the workers dispatched", value=queue["dispatched"]
        )
        latency = GaugeMetricFamily(
            "gatewayd_queue_latency_seconds",
            "Post-to-dispatched latency over recent events",
            labels=["quantile"],
        )
        ms = queue.get("latency_ms") or {}
        latency.add_metric(["0.5"], float(ms.get("p50", 0.0)) / 1000)
        latency.add_metric(["0.99"], float(ms.get("p99", 0.0)) / 1000)
        yield latency
        yield from self._hooks(snap["hooks"])
        reloads = CounterMetricFamily("gatewayd_reloads", "Reloads, by result", labels=["result"])
        for result, n in sorted(snap["reloads"].items()):
            reloads.add_metric([result], n)
        yield reloads
        yield CounterMetricFamily(
            "gatewayd_loop_stalls", "Times the event loop was blocked", value=snap["loop_stalls"]
        )
        statuses = GaugeMetricFamily(
            "gatewayd_hooks", "Hooks of the last load, by status", labels=["status"]
        )
        for status, n in sorted(snap["statuses"].items()):
            statuses.add_metric([status], n)
        yield statuses
        yield from _journal(snap.get("journal") or {})

    def _hooks(self, hooks: dict[str, HookStats]) -> Iterator[Metric]:
        counters: list[tuple[str, str, Callable[[HookStats], int]]] = [
            ("calls", "Handler calls", lambda s: s.calls),
            ("errors", "Handler errors", lambda s: s.errors),
            ("timeouts", "Handler timeouts", lambda s: s.timeouts),
            ("stalls", "Times a hook blocked the event loop", lambda s: s.stalls),
        ]
        for name, doc, read in counters:
            family = CounterMetricFamily(f"gatewayd_hook_{name}", doc, labels=["hook"])
            for hook, stats in sorted(hooks.items()):
                family.add_metric([hook], read(stats))
            yield family
        durations = HistogramMetricFamily(
            "gatewayd_hook_duration_seconds",
            "Handler run time of the calls timed: every call that suspends, fails or runs in a "
            "thread or process; of calls that return at once, those of 1 event in 8 of a key "
            "during a burst (events < 1 ms apart). gatewayd_hook_calls_total counts every call",
            labels=["hook"],
        )
        bounds = [str(b) for b in BUCKETS] + ["+Inf"]
        for hook, stats in sorted(hooks.items()):
            cumulative, total, _ = stats.histogram()
            durations.add_metric([hook], list(zip(bounds, cumulative, strict=True)), total)
        yield durations


JOURNAL_COUNTERS = frozenset(
    {"commits", "refused", "posted", "read", "claimed", "reconnects", "restores"}
)
"""The journal's figures that only grow (the others go up and down)."""


def _journal(stats: dict[str, Any]) -> Iterator[Metric]:
    """``gatewayd_journal_*`` for the figures of ``status.queue.journal``."""
    for key, value in sorted(stats.items()):
        name = f"gatewayd_journal_{key}"
        if isinstance(value, bool):
            yield GaugeMetricFamily(name, f"Journal: {key} (1: yes)", value=int(value))
        elif not isinstance(value, int | float):
            continue
        elif key in JOURNAL_COUNTERS:
            yield CounterMetricFamily(name, f"Journal: {key}", value=value)
        else:
            yield GaugeMetricFamily(name, f"Journal: {key}", value=value)
    owned = stats.get("owned")
    if isinstance(owned, list):  # Redis: the partitions this instance reads
        for figure, doc in (
            ("lag", "entries of the partition not read yet"),
            ("pending", "entries of the partition read and not acknowledged"),
        ):
            family = GaugeMetricFamily(
                f"gatewayd_journal_partition_{figure}",
                f"Redis queue, each partition this instance owns: {doc}",
                labels=["partition"],
            )
            for part in owned:
                if isinstance(part, dict) and isinstance(part.get(figure), int):
                    family.add_metric([str(part["partition"])], part[figure])
            yield family


class MetricsServer:
    """Serves ``GET /metrics`` for one gateway; run :meth:`serve` in the root task group."""

    def __init__(self, source: MetricsSource, listen: str) -> None:
        self.host, self.port = parse_listen(listen)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(GatewayCollector(source))
        ProcessCollector(registry=self.registry)  # process_*: read from /proc at each scrape
        self.address = f"{self.host}:{self.port}"

    async def serve(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Listen, report started, answer scrapes until cancelled. A port in use is logged
        (``metrics.listen_failed``) and the gateway runs on without metrics."""
        try:
            listener = await anyio.create_tcp_listener(
                local_host=self.host, local_port=self.port, reuse_port=False
            )
        except OSError as exc:
            log.error(
                "metrics.listen_failed",
                address=self.address,
                error=str(exc),
                fix="set gateway.metrics.listen to a free PORT or HOST:PORT",
            )
            task_status.started()
            return
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        self.address = f"{self.host}:{port}"
        log.info("metrics.listening", address=self.address, path="/metrics")
        task_status.started()
        # Not listener.serve(): an accept() error (EMFILE) would leave it, and the daemon.
        async with listener, anyio.create_task_group() as scrapes:
            for one in listener.listeners:
                assert isinstance(one, anyio.abc.SocketListener)  # create_tcp_listener's
                scrapes.start_soon(self._accept_loop, one, scrapes)

    async def _accept_loop(
        self, listener: anyio.abc.SocketListener, scrapes: anyio.abc.TaskGroup
    ) -> None:
        accepting = RetryingAccept(
            log,
            "metrics",
            lambda: {"address": self.address},
            lambda _: {
                "fix": "out of file descriptors? raise LimitNOFILE (ulimit -n) or find the "
                "hook that leaks them; scrapes are retried meanwhile"
            },
        )
        while True:
            scrapes.start_soon(self._answer, await accepting.accept(listener))

    async def _answer(self, stream: SocketStream) -> None:
        # The stream is closed here, after the 500: closed by _answer_one on its way out, it
        # left the client a bare closed connection instead.
        async with stream:
            try:
                await self._answer_one(stream)
            except Exception as exc:  # a bug in a collector: this scrape fails, never the daemon
                log.exception("metrics.scrape_failed", error=f"{type(exc).__name__}: {exc}")
                with anyio.move_on_after(1), contextlib.suppress(Exception):
                    await stream.send(_response(500, "text/plain", b"scrape failed; see the log\n"))

    async def _answer_one(self, stream: SocketStream) -> None:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.EndOfStream, OSError):
            head = b""
            with anyio.move_on_after(READ_TIMEOUT_S):
                while b"\r\n\r\n" not in head and b"\n\n" not in head:
                    if len(head) > MAX_HEAD:
                        return
                    head += await stream.receive(4096)
            request_line = head.split(b"\r\n", 1)[0].split(b"\n", 1)[0].decode("latin-1")
            parts = request_line.split()
            path = parts[1].split("?", 1)[0] if len(parts) >= 2 else ""
            if len(parts) < 2 or parts[0] != "GET" or path != "/metrics":
                await stream.send(_response(404, "text/plain", b"not found: GET /metrics\n"))
                return
            body = generate_latest(self.registry)
            await stream.send(_response(200, CONTENT_TYPE_LATEST, body))


def _response(code: int, content_type: str, body: bytes) -> bytes:
    reason = {200: "OK", 404: "Not Found", 500: "Internal Server Error"}[code]
    head = (
        f"HTTP/1.0 {code} {reason}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body
