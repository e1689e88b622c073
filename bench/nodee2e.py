"""End to end with three JS hooks against three Python hooks: the ``message`` op, 32 clients.

Two ``gatewayd run`` daemons (uvloop, ``gateway.queue.journal: memory``, bundled hooks off), each
with three workspace hooks on ``message:received`` that each add one reply line: ``handler.py``
(``async def handler(event)``) in one, ``handler.js`` (``export default async (event) => ...``)
in the other. The load generator of ``endtoend`` (``bench/loadgen.py``, 32 closed-loop clients,
a session each) runs against them in turn, round by round. Each round also reads the daemon's CPU
(``/proc``): its event loop's and its process tree's (the Node worker included) a message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.endtoend import load
from bench.harness import progress
from bench.process import Daemon, gatewayd
from bench.workload import env_for, hook_md, make_state, write_config

HOOKS = 3
MEMORY_JOURNAL = {"gateway": {"queue": {"journal": "memory"}}}
PY_HOOK = '''"""Benchmark hook: adds one reply line."""


async def handler(event):
    event.messages.append({reply!r})
'''
JS_HOOK = "export default async (event) => {{ event.messages.push({reply!r}); }};\n"


def prepare(base: Path, language: str) -> Path:
    """A state dir with the three hooks in ``language`` (``py`` or ``js``)."""
    state = make_state(base)
    root = state / "workspace" / "hooks"
    for i in range(HOOKS):
        directory = root / f"e2e-{i}"
        directory.mkdir(parents=True)
        (directory / "HOOK.md").write_text(hook_md(f"e2e-{i}", ["message:received"]), "utf-8")
        source = PY_HOOK if language == "py" else JS_HOOK
        filename = "handler.py" if language == "py" else "handler.js"
        (directory / filename).write_text(source.format(reply=f"reply-{i}"), "utf-8")
    write_config(state, settings=MEMORY_JOURNAL)
    return state


def _check(daemon: Daemon) -> None:
    reply = daemon.request({"id": 1, "op": "message", "sessionKey": "probe", "text": "hi"})
    expected = [f"reply-{i}" for i in range(HOOKS)]
    if reply.get("messages") != expected:
        raise RuntimeError(f"the benchmark hooks did not answer as expected: {reply}")


def e2e_rounds(
    base: Path, rounds: int, seconds: float, warmup: float
) -> dict[str, list[dict[str, Any]]]:
    """``rounds`` load runs against each daemon, interleaved; ``py3`` and ``js3``: each run's
    loadgen figures plus ``loop_us`` and ``process_us``."""
    py_state, js_state = prepare(base / "py", "py"), prepare(base / "js", "js")
    out: dict[str, list[dict[str, Any]]] = {"py3": [], "js3": []}
    with (
        gatewayd(py_state, env_for(py_state)) as py,
        gatewayd(js_state, env_for(js_state)) as js,
    ):
        _check(py)
        _check(js)
        for i in range(rounds):
            progress(f"nodehooks: end to end round {i + 1}/{rounds}")
            out["py3"].append(load(py, seconds, warmup))
            out["js3"].append(load(js, seconds, warmup))
        py.stop()
        js.stop()
    return out
