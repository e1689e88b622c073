"""The Prometheus endpoint of a real daemon, scraped and parsed with prometheus_client."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from structlog.testing import capture_logs

from gatewayd.metrics import MetricsServer
from tests.support.cli import off_loop
from tests.support.fixtures import StartDaemon, StartGateway
from tests.support.hooks import FD_LEAKER, WriteHook

FLAKY = """
import asyncio

async def handler(event):
    if event.context.get("fail"):
        raise RuntimeError("asked to fail")
    if event.context.get("slow"):
        await asyncio.sleep(5)
"""


def _scrape(address: str) -> dict[str, list[Sample]]:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as reply:
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("text/plain; version=")
        text = reply.read().decode()
    samples: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    return samples


def _value(samples: dict[str, list[Sample]], name: str, **labels: str) -> float:
    found = [
        s.value
        for s in samples.get(name, [])
        if all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(found) == 1, (name, labels, samples.get(name))
    return found[0]


@pytest.mark.anyio
async def test_scrape_parses_and_counts_events_hooks_and_reloads(
    write_hook: WriteHook, start_gateway: StartGateway, state_dir: Path
) -> None:
    """A gateway serving in this process, where coverage measures the collector."""
    write_hook(state_dir / "hooks", "flaky", events=["command:go"], handler=FLAKY)
    write_hook(state_dir / "hooks", "off", events=["command:go"])
    config = {
        "gateway": {"metrics": {"listen": "127.0.0.1:0"}},
        "hooks": {"entries": {"off": {"enabled": False}, "flaky": {"timeoutMs": 200}}},
    }
    daemon = await start_gateway(config)
    address = (await daemon.wait_log("metrics.listening"))["address"]
    assert address.startswith("127.0.0.1:")
    async with daemon.control() as control:
        for context in ({}, {}, {"fail": True}, {"slow": True}):
            await control.ok("trigger", event="command:go", sessionKey="s", context=context)
        await control.ok("trigger", event="session:start", sessionKey="s")
        await control.ok("reload")
    samples = await off_loop(_scrape, address)
    assert _value(samples, "gatewayd_events_total", type="command") == 4
    assert _value(samples, "gatewayd_events_total", type="session") == 1
    assert _value(samples, "gatewayd_hook_calls_total", hook="flaky") == 4
    assert _value(samples, "gatewayd_hook_errors_total", hook="flaky") == 1
    assert _value(samples, "gatewayd_hook_timeouts_total", hook="flaky") == 1
    assert _value(samples, "gatewayd_hook_duration_seconds_count", hook="flaky") == 4
    assert _value(samples, "gatewayd_hook_duration_seconds_bucket", hook="flaky", le="+Inf") == 4
    # The timed-out call took about its 200 ms timeout: the sub-0.1 s buckets miss it. (Not
    # ">= 0.2": libuv caches its clock per loop iteration, so a timer may fire a little before
    # 200 ms have passed on perf_counter, which the duration is read from: 199.8 ms was seen.)
    assert _value(samples, "gatewayd_hook_duration_seconds_bucket", hook="flaky", le="0.1") <= 3
    assert _value(samples, "gatewayd_hook_duration_seconds_sum", hook="flaky") >= 0.15
    assert _value(samples, "gatewayd_reloads_total", result="ok") == 1
    assert _value(samples, "gatewayd_hooks", status="disabled") == 1
    assert _value(samples, "gatewayd_queue_depth") == 0
    assert _value(samples, "gatewayd_queue_capacity") == 1024
    assert _value(samples, "gatewayd_queue_refused_total") == 0
    assert _value(samples, "gatewayd_events_dispatched_total") >= 5
    assert _value(samples, "gatewayd_queue_latency_seconds", quantile="0.99") >= 0
    with pytest.raises(urllib.error.HTTPError) as missing:
        await off_loop(urllib.request.urlopen, f"http://{address}/nope", timeout=30)
    assert missing.value.code == 404
    missing.value.close()
    assert await daemon.stop() == 0


def test_metrics_are_off_by_default_and_a_busy_port_is_not_fatal(
    start_daemon: StartDaemon,
) -> None:
    daemon = start_daemon()
    assert daemon.events("metrics.listening") == []
    daemon.stop()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        daemon = start_daemon({"gateway": {"metrics": {"listen": str(port)}}})
        failed = daemon.wait_log("metrics.listen_failed")
        assert failed["address"] == f"127.0.0.1:{port}"
        with daemon.control() as control:
            assert control.ok("ping")["pong"] is True
        assert daemon.stop() == 0


def test_a_scrape_while_no_descriptor_is_left_is_retried_not_fatal(
    start_daemon: StartDaemon, state_dir: Path, write_hook: WriteHook
) -> None:
    """A Python hook that leaks every descriptor, then a scrape: accept() failed with EMFILE,
    and the listener's serve() (anyio's, with no error handling) ended the daemon. Now the
    failure is logged once with the fix, accepting is retried with backoff, and the waiting
    scrape is answered once descriptors are free."""
    write_hook(
        state_dir / "hooks", "leaker", events=["command:leak", "command:free"], handler=FD_LEAKER
    )
    daemon = start_daemon(
        {"gateway": {"metrics": {"listen": "127.0.0.1:0"}}},
        prefix=["sh", "-c", 'ulimit -n 256; exec "$@"', "sh"],
    )
    address = daemon.wait_log("metrics.listening")["address"]
    scraped: list[dict[str, list[Sample]]] = []
    with daemon.control() as ctl:  # one connection throughout: accept() fails meanwhile
        assert ctl.ok("message", sessionKey="s", text="/leak")["messages"][0] != "held 0"
        scraper = threading.Thread(target=lambda: scraped.append(_scrape(address)))
        scraper.start()
        failed = daemon.wait_log("metrics.accept_failed", timeout=30)
        assert "Too many open files" in failed["error"] and "fix" in failed, failed
        assert ctl.ok("message", sessionKey="s", text="/free")["messages"] == ["held 0"]
    scraper.join(timeout=60)
    assert scraped and "gatewayd_queue_depth" in scraped[0], scraped
    daemon.wait_log("metrics.accept_recovered")
    assert daemon.stop() == 0


class _BrokenSource:
    """A metrics source whose snapshot fails, as a bug in the gateway's bookkeeping would."""

    def __init__(self) -> None:
        self.calls = 0

    def metrics_snapshot(self) -> dict[str, Any]:
        self.calls += 1
        raise KeyError("a collector bug")


def test_a_scrape_that_fails_is_answered_500_and_the_next_one_too() -> None:
    """The 500 the module promises: the failing scrape's stream was closed before the 500 was
    sent, so the client got a bare closed connection; and the server answers on after it."""
    source = _BrokenSource()
    server = MetricsServer(source, "127.0.0.1:0")
    answers: list[tuple[int, bytes]] = []

    def scrape() -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(f"http://{server.address}/metrics", timeout=10) as reply:
                return reply.status, reply.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(server.serve)
            for _ in range(2):
                answers.append(await anyio.to_thread.run_sync(scrape))
            tg.cancel_scope.cancel()

    with capture_logs() as logs:
        anyio.run(main)
    assert answers == [(500, b"scrape failed; see the log\n")] * 2
    assert source.calls == 2
    failed = [entry for entry in logs if entry["event"] == "metrics.scrape_failed"]
    assert [entry["error"] for entry in failed] == ["KeyError: 'a collector bug'"] * 2
