"""Benchmark 4: reload scaling, and memory over many reloads.

A full reload is what the daemon does when a hook file changes: ``load_config`` then
``HookLoader.load`` (discover, parse HOOK.md, check eligibility, compile each handler from source,
import it as a fresh module, swap it into a ``HookRegistry``). It is timed for 10, 100 and 1,000
generated hooks, each count in its own fresh interpreter.

The loader caches parsed manifests and compiled code by exact file content, so a reload after
an edit recompiles only what changed; the first load in a fresh process (nothing cached) is
shown too, for the largest count.

Baseline (``floor``), same process, interleaved: the least any loader can do for the same
files: ``os.scandir`` the root, read HOOK.md, parse the frontmatter with PyYAML's
``CSafeLoader``, read and ``compile`` handler.py, ``exec`` it into a new module object, and keep
the handler in a dict.

Memory: 1,000 reloads of 100 hooks in a fresh interpreter, ``VmRSS`` read from
``/proc/self/status`` after a warm-up of 20 reloads and at the end (both after ``gc.collect()``);
the floor loader does the same in its own interpreter.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import types
from collections.abc import Callable
from pathlib import Path
from time import perf_counter
from typing import Any

import yaml

from bench.harness import (
    PYTHON,
    Figure,
    Scale,
    Section,
    Target,
    child_json,
    children_json,
    main,
    median,
    progress,
    rss_kib,
    spread,
)
from bench.workload import env_for, generate_hooks, make_state, write_config

RSS_WARMUP = 20


# -- the two loaders (run in the child) ---------------------------------------------------------


def floor_loader(root: Path) -> Callable[[], int]:
    """The least work a reload of ``root`` can be; returns a callable doing one reload."""
    kept: dict[str, Any] = {}

    def reload() -> int:
        handlers: dict[str, Any] = {}
        for entry in sorted(os.scandir(root), key=lambda e: e.name):
            if not entry.is_dir():
                continue
            with open(os.path.join(entry.path, "HOOK.md"), encoding="utf-8") as f:
                text = f.read()
            front = text.split("---\n", 2)[1]
            meta = yaml.load(front, Loader=yaml.CSafeLoader)
            path = os.path.join(entry.path, "handler.py")
            with open(path, encoding="utf-8") as f:
                source = f.read()
            module = types.ModuleType(f"floor_{entry.name.replace('-', '_')}")
            module.__file__ = path
            exec(compile(source, path, "exec"), module.__dict__)
            handlers[meta["name"]] = (module.handler, meta["metadata"]["eliza"]["events"])
        kept["handlers"] = handlers  # the previous generation becomes garbage, as in a swap
        return len(handlers)

    return reload


def gatewayd_loader(config_file: Path) -> Callable[[], int]:
    """What the daemon does on a change: read the config, then load the hooks into the registry."""
    from gatewayd.config import load_config
    from gatewayd.hooks.loader import HookLoader
    from gatewayd.hooks.registry import HookRegistry
    from gatewayd.logging import configure_logging

    # The daemon logs at info; the lines go nowhere here, but are formatted all the same.
    configure_logging("info", "json", open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115
    registry = HookRegistry()
    loader = HookLoader()
    # As the daemon does before its first load: keep start-up objects out of later collections.
    gc.freeze()

    def reload() -> int:
        config = load_config(config_file)
        result = loader.load(config.load_spec(), registry)
        if result.failed:
            raise RuntimeError(f"hooks failed to load: {result.failed[:3]}")
        return result.registered

    return reload


def child_time(state: Path, reps: int) -> dict[str, Any]:
    gw = gatewayd_loader(state / "gatewayd.yaml")
    floor = floor_loader(state / "hooks")
    start = perf_counter()
    registered = gw()
    first = perf_counter() - start
    start = perf_counter()
    floor()
    floor_first = perf_counter() - start
    times: dict[str, list[float]] = {"gatewayd": [], "floor": []}
    for _ in range(reps):
        for name, fn in (("gatewayd", gw), ("floor", floor)):
            start = perf_counter()
            fn()
            times[name].append(perf_counter() - start)
    return {"first": first, "floor_first": floor_first, "registered": registered, **times}


def child_rss(state: Path, impl: str, reloads: int) -> dict[str, Any]:
    reload = (
        gatewayd_loader(state / "gatewayd.yaml")
        if impl == "gatewayd"
        else floor_loader(state / "hooks")
    )
    for _ in range(RSS_WARMUP):
        reload()
    gc.collect()
    before = rss_kib()
    trend = []
    step = max(1, reloads // 10)
    for i in range(1, reloads + 1):
        reload()
        if i % step == 0:
            gc.collect()
            trend.append(rss_kib())
    gc.collect()
    return {"before_kib": before, "after_kib": rss_kib(), "trend_kib": trend}


def child_main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", choices=["time", "rss"], required=True)
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--impl", choices=["gatewayd", "floor"], default="gatewayd")
    args = parser.parse_args(argv)
    if args.child == "time":  # with --reps 0: only the first (cold) load of each loader
        out = child_time(args.state, args.reps)
    else:
        out = child_rss(args.state, args.impl, args.reps)
    print(json.dumps(out))


# -- the parent ---------------------------------------------------------------------------------

COLD_STARTS = 4
"""Fresh interpreters whose first load is timed, for the cold figure (one sample each)."""


def add_cold(section: Section, state: Path, count: int, out: dict[str, Any], starts: int) -> None:
    """The first load in fresh processes (nothing cached), beside the floor's first load."""
    firsts, floor_firsts = [out["first"]], [out["floor_first"]]
    for _ in range(starts - 1):
        more = child_json(
            [PYTHON, "-m", "bench.reload", "--child", "time", "--state", str(state), "--reps", "0"],
            env=env_for(state),
            timeout=300,
        )
        firsts.append(more["first"])
        floor_firsts.append(more["floor_first"])
    section.add(
        Figure(
            f"floor.first.n{count}",
            "floor, first load",
            median(floor_firsts) * 1000,
            "ms",
            "lower",
            detail=spread(floor_firsts, 1000),
        )
    )
    section.add(
        Figure(
            f"first.n{count}",
            f"first load in a fresh process, {count:,} hooks (nothing cached)",
            median(firsts) * 1000,
            "ms",
            "lower",
            vs=[f"floor.first.n{count}"],
            detail=spread(firsts, 1000),
            headline=True,
        )
    )


def prepare(base: Path, count: int) -> Path:
    state = make_state(base)
    generate_hooks(state / "hooks", count)
    write_config(state)
    return state


def run(scale: Scale) -> Section:
    section = Section("reload", "4. Reload scaling (config + discover + parse + compile + swap)")
    counts = (10, 100, 1000) if not scale.smoke else (3, 10)
    reps = {10: 30, 100: 15, 1000: 7, 3: 2}
    target_1000 = Target("< 500 ms", high=500)
    with tempfile.TemporaryDirectory(prefix="gatewayd-bench-") as tmp:
        for count in counts:
            progress(f"reload: {count} hooks")
            state = prepare(Path(tmp) / f"n{count}", count)
            out = child_json(
                [
                    PYTHON,
                    "-m",
                    "bench.reload",
                    "--child",
                    "time",
                    "--state",
                    str(state),
                    "--reps",
                    str(reps[count]),
                ],
                env=env_for(state),
                timeout=300,
            )
            if out["registered"] != count:
                raise RuntimeError(f"{out['registered']} of {count} generated hooks registered")
            floor = section.add(
                Figure(
                    f"floor.n{count}",
                    "floor",
                    median(out["floor"]) * 1000,
                    "ms",
                    "lower",
                    detail=spread(out["floor"], 1000),
                )
            )
            section.add(
                Figure(
                    f"reload.n{count}",
                    f"full reload, {count:,} hooks",
                    median(out["gatewayd"]) * 1000,
                    "ms",
                    "lower",
                    vs=[floor.key],
                    target=target_1000 if count == 1000 else None,
                    detail={
                        **spread(out["gatewayd"], 1000),
                        "first_ms": round(out["first"] * 1000, 2),
                    },
                )
            )
            if count == max(counts):
                add_cold(section, state, count, out, scale.pick(COLD_STARTS, 1))

        rss_hooks = scale.pick(100, 10)
        rss_reloads = scale.pick(1000, 5)
        state = prepare(Path(tmp) / "rss", rss_hooks)
        # Memory is not timing: both loaders run at once, each in its own interpreter.
        progress(f"reload: RSS over {rss_reloads} reloads of {rss_hooks} hooks")
        impls = ("floor", "gatewayd")
        outs = children_json(
            [
                [
                    PYTHON,
                    "-m",
                    "bench.reload",
                    "--child",
                    "rss",
                    "--state",
                    str(state),
                    "--impl",
                    impl,
                    "--reps",
                    str(rss_reloads),
                ]
                for impl in impls
            ],
            env=env_for(state),
            timeout=600,
        )
        growth = dict(zip(impls, outs, strict=True))
        base = growth["floor"]
        section.add(
            Figure(
                "rss.floor",
                "floor",
                (base["after_kib"] - base["before_kib"]) / 1024,
                "MiB",
                "lower",
                detail={
                    "before_mib": round(base["before_kib"] / 1024, 1),
                    "trend_mib": [round(k / 1024, 1) for k in base["trend_kib"]],
                },
            )
        )
        gw = growth["gatewayd"]
        section.add(
            Figure(
                "rss.gatewayd",
                f"RSS growth over {rss_reloads:,} reloads of {rss_hooks} hooks",
                (gw["after_kib"] - gw["before_kib"]) / 1024,
                "MiB",
                "lower",
                vs=["rss.floor"],
                target=Target("< 5 MiB", high=5),
                detail={
                    "before_mib": round(gw["before_kib"] / 1024, 1),
                    "trend_mib": [round(k / 1024, 1) for k in gw["trend_kib"]],
                },
            )
        )
    section.notes.append(
        "Median of interleaved reloads after a first one; the 4 bundled hooks are disabled "
        "(discovered, not imported) so both loaders see the same files. RSS growth is measured "
        f"after {RSS_WARMUP} warm-up reloads, each loader in a fresh interpreter."
    )
    return section


if __name__ == "__main__":
    if "--child" in sys.argv:
        child_main(sys.argv[1:])
    else:
        main(run)
