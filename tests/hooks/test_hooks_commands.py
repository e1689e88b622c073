"""Command hooks: real executables with the event on stdin, replies on stdout, exit codes and
timeouts that kill the whole process group."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import structlog

from gatewayd.hooks import HookEvent, create_hook_event
from gatewayd.hooks.handlers import Handler, HandlerKind
from gatewayd.hooks.outcomes import DispatchReport
from gatewayd.hooks.registry import HookRegistry
from gatewayd.hooks.runners import parse_command_output


def command(tmp_path: Path, script: str, *, name: str = "cmd", **kw: object) -> Handler:
    hook_dir = tmp_path / name
    hook_dir.mkdir()
    path = hook_dir / "handler"
    path.write_text(script)
    path.chmod(0o755)
    return Handler(hook=name, kind=HandlerKind.COMMAND, command=path, source="managed", **kw)  # type: ignore[arg-type]


def run(
    handler: Handler, key: str = "command:new", timeout_s: float = 30
) -> tuple[HookEvent, DispatchReport]:
    registry = HookRegistry(default_timeout_s=timeout_s)
    registry.set_file_hooks([(handler, [key])])
    etype, _, action = key.partition(":")
    event = create_hook_event(etype, action, "sess-9", {"who": "tester"})
    event.messages.append("earlier")
    report = anyio.run(registry.dispatch, event)
    return event, report


def test_stdout_lines_become_messages_and_the_event_is_on_stdin(tmp_path: Path) -> None:
    handler = command(
        tmp_path,
        "#!/bin/sh\n"
        'cat > "$PWD/stdin.json"\n'
        'echo "hook=$ELIZA_HOOK_NAME event=$ELIZA_EVENT session=$ELIZA_SESSION_KEY"\n'
        "echo\n"
        'echo "token=$TOKEN"\n',
        env={"TOKEN": "from-entry"},
    )
    event, report = run(handler)
    assert event.messages == [
        "earlier",
        "hook=cmd event=command:new session=sess-9",
        "token=from-entry",
    ]
    assert report[:3] == (1, 0, 0)
    payload = json.loads((tmp_path / "cmd" / "stdin.json").read_text())
    assert payload["type"] == "command"
    assert payload["action"] == "new"
    assert payload["sessionKey"] == "sess-9"
    assert payload["context"] == {"who": "tester"}
    assert payload["messages"] == ["earlier"]
    assert payload["timestamp"].endswith("Z")


def test_one_json_object_with_messages(tmp_path: Path) -> None:
    handler = command(tmp_path, '#!/bin/sh\necho \'{"messages": ["one", "two words"]}\'\n')
    event, _ = run(handler)
    assert event.messages == ["earlier", "one", "two words"]


def test_output_parsing_rules() -> None:
    assert parse_command_output('{"messages": ["a", 2]}') == (["a", "2"], None)
    assert parse_command_output('{"other": 1}') == (['{"other": 1}'], None)
    assert parse_command_output("{not json\nline\n\n") == (["{not json", "line"], None)
    assert parse_command_output("") == ([], None)
    assert parse_command_output('{"result": {"block": true}}') == ([], {"block": True})
    # Deeper than json decodes (RecursionError, once the end of the event's dispatch): lines.
    deep = '{"result": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    assert parse_command_output(deep) == ([deep], None)


def test_a_command_that_ignores_stdin_is_fine(tmp_path: Path) -> None:
    event, report = run(command(tmp_path, "#!/bin/sh\necho ok\n"))
    assert event.messages == ["earlier", "ok"]
    assert report[:3] == (1, 0, 0)


def test_non_zero_exit_is_a_logged_failure(tmp_path: Path) -> None:
    handler = command(tmp_path, "#!/bin/sh\necho partial\necho 'it broke' >&2\nexit 3\n")
    with structlog.testing.capture_logs() as logs:
        event, report = run(handler)
    assert event.messages == ["earlier"]  # a failed command's stdout is not a reply
    assert report[:3] == (1, 1, 0)
    assert report.outcomes[0][:4] == ("cmd", "exited with code 3: it broke", "error", "command")
    (line,) = [entry for entry in logs if entry["event"] == "hook.command_failed"]
    assert (line["hook"], line["exit_code"], line["event_key"]) == ("cmd", 3, "command:new")
    assert "it broke" in line["stderr"]


def test_a_command_that_cannot_start_is_a_failure(tmp_path: Path) -> None:
    handler = command(tmp_path, "#!/nonexistent/interpreter\n")
    _, report = run(handler)
    assert report[:3] == (1, 1, 0)


def _dead(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie is dead
    except FileNotFoundError:
        return True


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    handler = command(
        tmp_path,
        f'#!/bin/sh\nsleep 300 &\necho "$$ $!" > {pids}\nwait\n',
        timeout_s=0.5,
    )
    event, report = run(handler)
    assert report[:3] == (1, 0, 1)
    assert report.outcomes[0][:3] == ("cmd", "timed out after 500 ms", "timeout")
    assert event.messages == ["earlier"]
    shell, child = (int(p) for p in pids.read_text().split())
    deadline = time.monotonic() + 10
    while not (_dead(shell) and _dead(child)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _dead(shell), "the hook process survived its timeout"
    assert _dead(child), "the hook's child process survived: the group was not killed"
