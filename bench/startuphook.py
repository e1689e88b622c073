"""Benchmark 6: when ``gateway:startup`` reaches its handler, measured over repeated starts.

Each start runs ``gatewayd run`` (default config, ``gateway.startupHookDelayMs`` = 250) with a
workspace hook on ``gateway:startup`` that records ``time.time()`` in a file. The delay is that
time minus the timestamp of the daemon's ``channels.up`` log line (wall clock, both on this
machine): the target is 250 ms, and within 10 ms of it at the median and at the maximum.

Baseline, same run: ``anyio.sleep(0.25)`` on an idle uvloop loop in this process, from before
the sleep to after it: the timer precision the daemon's own sleep can at best have.
"""

from __future__ import annotations

import tempfile
import time
from datetime import datetime
from pathlib import Path

import anyio

from bench.harness import Figure, Scale, Section, Target, main, median, progress, spread
from bench.process import gatewayd
from bench.workload import env_for, make_state, write_config, write_hook

DELAY_MS = 250
TOLERANCE_MS = 10

PROBE = '''"""Benchmark hook: records when gateway:startup reached it."""

import time
from pathlib import Path


async def handler(event):
    with open(Path(__file__).with_name("fired"), "a", encoding="utf-8") as out:
        out.write(f"{time.time()!r}\\n")
'''


def one_start(state: Path, probe_dir: Path) -> float:
    """Seconds from ``channels.up`` to the startup handler, for one start."""
    fired = probe_dir / "fired"
    fired.unlink(missing_ok=True)
    with gatewayd(state, env_for(state)) as daemon:
        deadline = time.monotonic() + 10
        while not fired.exists() or not fired.read_text().strip():
            if time.monotonic() > deadline:
                raise RuntimeError(f"gateway:startup never reached the hook; log:\n{daemon.log()}")
            time.sleep(0.01)
        daemon.kill()  # how it stops is not measured here (see benchmark 5)
        up = [e for e in daemon.log_events() if e.get("event") == "channels.up"]
    if not up:
        raise RuntimeError("no channels.up line in the daemon's log")
    up_at = datetime.fromisoformat(up[0]["timestamp"]).timestamp()
    return float(fired.read_text().split()[0]) - up_at


async def sleep_floor(count: int) -> list[float]:
    out = []
    for _ in range(count):
        start = time.perf_counter()
        await anyio.sleep(DELAY_MS / 1000)
        out.append(time.perf_counter() - start)
    return out


def run(scale: Scale) -> Section:
    section = Section("startuphook", "6. Startup hook timing: `channels.up` to `gateway:startup`")
    starts = scale.pick(20, 2)
    delays = []
    with tempfile.TemporaryDirectory(prefix="gatewayd-bench-") as tmp:
        state = make_state(Path(tmp))
        probe = write_hook(
            state / "workspace" / "hooks",
            "startup-probe",
            events=("gateway:startup",),
            source=PROBE,
        )
        write_config(state, bundled=True)
        for i in range(starts):
            progress(f"startuphook: start {i + 1}/{starts}")
            delays.append(one_start(state, probe))
    floor = anyio.run(
        sleep_floor, scale.pick(10, 2), backend="asyncio", backend_options={"use_uvloop": True}
    )
    ms = [d * 1000 for d in delays]
    low, high = DELAY_MS - TOLERANCE_MS, DELAY_MS + TOLERANCE_MS
    target = Target(f"{DELAY_MS} ms ± {TOLERANCE_MS}", low=low, high=high)
    section.add(
        Figure(
            "sleep.p50",
            "`anyio.sleep(0.25)`, p50",
            median(floor) * 1000,
            "ms",
            "lower",
            detail=spread(floor, 1000),
        )
    )
    section.add(Figure("sleep.max", "`anyio.sleep(0.25)`, max", max(floor) * 1000, "ms", "lower"))
    section.add(
        Figure(
            "delay.p50",
            "delay, p50",
            median(ms),
            "ms",
            "lower",
            vs=["sleep.p50"],
            target=target,
            detail=spread(ms),
        )
    )
    section.add(
        Figure(
            "delay.max",
            "delay, max",
            max(ms),
            "ms",
            "lower",
            vs=["sleep.max"],
            target=target,
            detail={"min": round(min(ms), 3)},
        )
    )
    section.notes.append(
        f"{starts} starts; the delay is the handler's `time.time()` minus the `channels.up` log "
        "timestamp, so it includes the trip through the trigger queue to the handler."
    )
    return section


if __name__ == "__main__":
    main(run)
