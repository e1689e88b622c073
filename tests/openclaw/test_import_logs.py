"""What a Python hook logs or prints while it is imported is tagged with the hook, as what it
logs from its handler is."""

from __future__ import annotations

from pathlib import Path

from tests.support.fixtures import StartDaemon
from tests.support.hooks import write_hook_dir

NOISY = """
import logging

logging.getLogger("noisy.setup").warning("configured at import")
print("printed at import")


async def handler(event):
    event.messages.append("ok")
"""


def test_import_time_log_lines_carry_the_hook(state_dir: Path, start_daemon: StartDaemon) -> None:
    write_hook_dir(state_dir / "hooks", "noisy", events=["command:noisy"], handler=NOISY)
    daemon = start_daemon()
    logged = daemon.wait_log("hook.log", message="configured at import")
    assert logged["hook"] == "noisy", logged
    printed = daemon.wait_log("hook.output", line="printed at import")
    assert printed["hook"] == "noisy", printed
    assert daemon.stop() == 0
