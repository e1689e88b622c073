"""A hook's name is checked in one place (``gatewayd/hooks/names.py``) and shown escaped.

A name with a control character (a newline that forges a table row, an ANSI escape that
reaches the terminal) or a format character (a right-to-left override that reorders what the
operator reads) makes its hook ``invalid`` with the character named, and whatever text a
listing shows (a directory's name for an invalid hook, a reason) is escaped. Names are NFC:
``café`` written in NFC and in NFD is one hook.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from gatewayd.hooks.names import MAX_NAME, name_problem, normalize_name, shown
from tests.support.cli import RunCli
from tests.support.fixtures import StartDaemon
from tests.support.hooks import WriteHook

HOSTILE = {
    "newline": "evil\n  ready      forged-row",
    "ansi": "red\x1b[31mhook",
    "bidi": "safe\u202egnp.exe",
    "zero-width": "pay\u200bpal",
}
UNSAFE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def unsafe(text: str) -> list[str]:
    return [f"U+{ord(c):04X}" for c in text if unicodedata.category(c) in UNSAFE and c != "\n"]


def test_hostile_names_are_invalid_and_listed_escaped(
    write_hook: WriteHook, run_cli: RunCli, state_dir: Path
) -> None:
    hooks = state_dir / "hooks"
    for label, name in HOSTILE.items():
        write_hook(hooks, label, frontmatter={"name": name})
    # A directory name alone (no name in HOOK.md) is the hook's name: checked the same way.
    # (``name: null`` would not do: OpenClaw, and so gatewayd, reads the line as the name "null".)
    write_hook(
        hooks,
        "x",
        dirname="dir\x1b]0;title\x07name",
        hook_md='---\nmetadata: {"eliza": {"events": ["command:new"]}}\n---\n',
    )
    listing = run_cli("hooks", "list", "--local", "--json")
    assert listing.returncode == 0, listing.stderr
    records = {r["path"]: r for r in json.loads(listing.stdout)["hooks"]}
    for label in HOSTILE:
        record = records[str(hooks / label)]
        assert record["status"] == "invalid", record
        assert "U+" in record["reasons"][0] and "rename the hook" in record["reasons"][0], record
        assert unsafe(record["name"]) == [], record["name"]
    odd = next(r for path, r in records.items() if "title" in path)
    assert odd["status"] == "invalid" and unsafe(odd["name"]) == [], odd
    table = run_cli("hooks", "list", "--local")
    assert table.returncode == 0, table.stderr
    assert unsafe(table.stdout) == [], repr(table.stdout)
    assert "forged-row" not in [line.split()[-1] for line in table.stdout.splitlines() if line]
    check = run_cli("hooks", "check")
    assert unsafe(check.stdout + check.stderr) == [], repr(check.stdout)


def test_a_name_in_nfc_and_in_nfd_is_one_hook(
    write_hook: WriteHook, start_daemon: StartDaemon, state_dir: Path
) -> None:
    nfc, nfd = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")
    assert nfc != nfd
    hooks = state_dir / "hooks"
    write_hook(hooks, nfc, dirname="a", events=["command:cafe"])
    write_hook(hooks, nfd, dirname="b", events=["command:cafe"])
    daemon = start_daemon()
    with daemon.control() as ctl:
        reply = ctl.ok("message", sessionKey="agent:main:c", text="/cafe")
        listed = [h for h in ctl.ok("hooks")["hooks"] if h["path"].endswith(("/a", "/b"))]
    assert len(reply["messages"]) == 1, reply
    assert {h["name"] for h in listed} == {nfc}, listed
    assert sorted(h["status"] for h in listed).count("ready") == 1, listed


TEXT = st.text(
    alphabet=st.characters(codec="utf-8", categories=["L", "M", "N", "P", "S", "Z", "C"]),
    max_size=40,
)


@settings(max_examples=500)
@given(text=TEXT)
def test_shown_text_is_safe_and_accepted_names_are_shown_as_they_are(text: str) -> None:
    assert unsafe(shown(text).replace("\n", "")) == []
    assert "\n" not in shown(text)
    name = normalize_name(text)
    assert normalize_name(name) == name
    assert normalize_name(unicodedata.normalize("NFD", text)) == name
    if name_problem(name) is None:
        assert shown(name) == name
        assert 0 < len(name) <= MAX_NAME
        assert unsafe(name) == [] and "\n" not in name


def test_a_console_log_line_escapes_what_would_act_on_the_terminal() -> None:
    import io

    import structlog

    from gatewayd.logging import configure_logging

    stream = io.StringIO()
    configure_logging("info", "console", stream)
    try:
        structlog.get_logger("t").info("hook.console", hook="h", text="a\x1b[2Jb\n{forged}")
    finally:
        configure_logging("warning", "json")
    line = stream.getvalue()
    assert line.count("\n") == 1 and unsafe(line) == [], repr(line)
    assert "a\\x1b[2Jb\\n{forged}" in line
