"""``previousSessionMemory``: the ended session's last messages, rendered as OpenClaw's gateway
hands them to ``/new`` and ``/reset`` hooks (its session-memory hook writes ``content`` as is)."""

from __future__ import annotations

import json
from pathlib import Path

from gatewayd.session_memory import TAIL_BYTES, previous_session_memory


def entry(role: str, text: str) -> str:
    message = {"role": role, "content": [{"type": "text", "text": text}]}
    return json.dumps({"type": "message", "message": message})


def test_the_last_messages_one_json_quoted_line_each(tmp_path: Path) -> None:
    transcript = tmp_path / "s.jsonl"
    lines = [json.dumps({"type": "session", "version": 4, "id": "s"})]
    lines += [entry("user", f"question {i}") for i in range(20)]
    lines += [
        entry("user", "/status"),
        entry("assistant", 'a "quoted"\nanswer\u2028here'),
        json.dumps({"role": "user", "content": "the earlier form"}),
        entry("system", "not a turn"),
    ]
    transcript.write_text("\n".join(lines) + "\n", encoding="utf-8")
    memory = previous_session_memory(transcript, 3)
    assert memory == {
        "status": "available",
        "content": 'user: "question 19"\n'
        'assistant: "a \\"quoted\\"\\nanswer\\u2028here"\n'
        'user: "the earlier form"',
        "originClass": "untrusted",
    }
    assert len(previous_session_memory(transcript)["content"].splitlines()) == 15


def test_no_messages_none_and_unreadable_unavailable(tmp_path: Path) -> None:
    assert previous_session_memory(tmp_path / "missing.jsonl")["content"] is None
    (tmp_path / "dir.jsonl").mkdir()
    unreadable = previous_session_memory(tmp_path / "dir.jsonl")
    assert unreadable["status"] == "unavailable"
    assert "dir.jsonl" in unreadable["reason"]


def test_a_transcript_past_the_tail_read_gives_its_last_messages(tmp_path: Path) -> None:
    transcript = tmp_path / "long.jsonl"
    filler = entry("user", "x" * 1000)
    with transcript.open("w", encoding="utf-8") as file:
        file.write(entry("user", "the very first") + "\n")
        for _ in range(TAIL_BYTES // len(filler) + 10):
            file.write(filler + "\n")
        file.write(entry("assistant", "the last") + "\n")
    assert transcript.stat().st_size > TAIL_BYTES
    content = previous_session_memory(transcript)["content"]
    assert content.endswith('assistant: "the last"')
    assert len(content.splitlines()) == 15
