"""HOOK.md parsing and validation: frontmatter forms, field types, event keys, warnings."""

from __future__ import annotations

from pathlib import Path

import pytest

from gatewayd.hooks.metadata import ManifestError, parse_manifest, read_manifest

PATH = Path("/srv/hooks/foo/HOOK.md")
SRC = "hooks/foo/HOOK.md"


def parse(text: str) -> object:
    return parse_manifest(text, PATH, source=SRC)


def errors_of(text: str) -> list[str]:
    with pytest.raises(ManifestError) as info:
        parse_manifest(text, PATH, source=SRC)
    return info.value.errors


def test_nested_yaml_metadata() -> None:
    m = parse_manifest(
        "---\n"
        "name: foo\n"
        "description: Says hi\n"
        "homepage: https://example.org/foo\n"
        "metadata:\n"
        "  eliza:\n"
        "    emoji: '👋'\n"
        "    hookKey: foo-key\n"
        "    events: [command:new, session]\n"
        "    export: greet\n"
        "    always: true\n"
        "    os: [linux, darwin]\n"
        "    requires:\n"
        "      bins: [git]\n"
        "      anyBins: [bun, npm]\n"
        "      env: [TOKEN]\n"
        "      config: [hooks.entries.foo-key.apiKey]\n"
        "    install:\n"
        "      - {id: bundled, kind: bundled, label: Bundled}\n"
        "---\n"
        "# Foo\n",
        PATH,
    )
    assert m.name == "foo"
    assert m.hook_key == "foo-key"
    assert m.description == "Says hi"
    assert m.homepage == "https://example.org/foo"
    assert m.emoji == "👋"
    assert m.events == ("command:new", "session")
    assert m.export == "greet"
    assert m.always is True
    assert m.os == ("linux", "darwin")
    assert m.requires.bins == ["git"]
    assert m.requires.any_bins == ["bun", "npm"]
    assert m.requires.env == ["TOKEN"]
    assert m.requires.config == ["hooks.entries.foo-key.apiKey"]
    assert m.install == ({"id": "bundled", "kind": "bundled", "label": "Bundled"},)
    assert m.namespace == "eliza"
    assert m.warnings == ()


def test_inline_json_metadata_and_crlf() -> None:
    text = (
        "---\r\n"
        "name: foo\r\n"
        'metadata: {"openclaw":{"emoji":"💾","events":["command:new"],'
        '"requires":{"config":["workspace.dir"]}}}\r\n'
        "---\r\n"
        "body\r\n"
    )
    m = parse_manifest(text, PATH)
    assert m.events == ("command:new",)
    assert m.emoji == "💾"
    assert m.requires.config == ["workspace.dir"]
    assert m.namespace == "openclaw"


def test_multiline_json_metadata_as_openclaw_writes_it() -> None:
    text = (
        "---\n"
        "name: foo\n"
        "metadata:\n"
        "  {\n"
        '    "milady": { "events": ["agent:bootstrap"], "always": true },\n'
        "  }\n"
        "---\n"
    )
    m = parse_manifest(text, PATH)
    assert (m.namespace, m.events, m.always) == ("milady", ("agent:bootstrap",), True)


def test_metadata_given_as_a_json_string() -> None:
    m = parse_manifest(
        '---\nname: foo\nmetadata: \'{"eliza": {"events": ["message:received"]}}\'\n---\n',
        PATH,
    )
    assert m.events == ("message:received",)


def test_eliza_namespace_wins_over_openclaw() -> None:
    m = parse_manifest(
        "---\nmetadata:\n"
        "  openclaw: {events: [command:new]}\n"
        "  eliza: {events: [command:stop]}\n"
        "---\n",
        PATH,
    )
    assert m.events == ("command:stop",)


def test_defaults_name_from_directory_and_hook_key_from_name() -> None:
    m = parse_manifest("---\nmetadata: {eliza: {events: ['*']}}\n---\n", PATH)
    assert m.name == "foo"
    assert m.hook_key == "foo"
    assert m.description == ""
    assert m.events == ("*",)


def test_no_metadata_means_no_events() -> None:
    m = parse_manifest("---\nname: foo\n---\n", PATH)
    assert m.events == ()
    assert m.namespace is None


def test_a_comma_separated_string_is_a_list_as_in_openclaw() -> None:
    m = parse("---\nname: foo\nmetadata:\n  eliza:\n    events: command:new, command:reset\n---\n")
    assert m.events == ("command:new", "command:reset")  # type: ignore[attr-defined]
    assert m.warnings == ()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("timeoutMs", "5s", "metadata.eliza.timeoutMs must be a positive integer"),
        ("timeoutMs", 0, "metadata.eliza.timeoutMs must be a positive integer"),
        ("timeoutMs", 10**11, "integer (milliseconds, at most 31536000000), got 100000000000"),
        ("priority", "high", "metadata.eliza.priority must be an integer"),
        ("background", "yes", "metadata.eliza.background must be true or false"),
        ("agents", 5, "metadata.eliza.agents must be a list of agent ids"),
    ],
)
def test_gatewayd_field_type_errors_name_file_field_and_expectation(
    field: str, value: object, expected: str
) -> None:
    import json

    errors = errors_of(f"---\nmetadata: {{eliza: {{{field}: {json.dumps(value)}}}}}\n---\n")
    assert len(errors) == 1
    assert errors[0].startswith("hooks/foo/HOOK.md: ")
    assert expected in errors[0]


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("always", "maybe", 'metadata.eliza.always: "maybe" is not true or false: ignored'),
        ("always", "true", 'metadata.eliza.always: "true" is not true or false: ignored'),
        ("always", 2, "metadata.eliza.always: 2 is not true or false: ignored"),
        ("hookKey", 5, "metadata.eliza.hookKey: 5 is not a string: ignored"),
        ("emoji", ["x"], 'metadata.eliza.emoji: ["x"] is not a string: ignored'),
        ("export", False, "metadata.eliza.export: false is not a string: ignored"),
        ("os", 7, "metadata.eliza.os: 7 is not a list of strings: ignored"),
        ("requires", ["git"], 'metadata.eliza.requires: ["git"] is not a mapping with bins'),
        ("install", "npm i", 'metadata.eliza.install: "npm i" is not a list of mappings'),
    ],
)
def test_a_value_openclaw_ignores_is_ignored_with_a_warning(
    field: str, value: object, expected: str
) -> None:
    import json

    m = parse(
        f"---\nmetadata: {{eliza: {{events: [command:new], {field}: {json.dumps(value)}}}}}\n---\n"
    )
    assert m.events == ("command:new",)  # type: ignore[attr-defined]
    (warning,) = m.warnings  # type: ignore[attr-defined]
    assert warning.startswith("hooks/foo/HOOK.md: " + expected), warning
    assert "as OpenClaw ignores it" in warning


@pytest.mark.parametrize("field", ["bins", "anyBins", "env", "config"])
def test_requires_lists_may_be_comma_separated(field: str) -> None:
    m = parse(f"---\nmetadata: {{eliza: {{requires: {{{field}: 'git, jq'}}}}}}\n---\n")
    attr = {"anyBins": "any_bins"}.get(field, field)
    assert getattr(m.requires, attr) == ["git", "jq"]  # type: ignore[attr-defined]


def test_list_entries_are_read_as_openclaw_reads_them() -> None:
    m = parse(
        "---\nmetadata: {openclaw: {events: [' command:new ', 3, ''], requires: {bins: 7}}}\n---\n"
    )
    assert m.events == ("command:new", "3")  # type: ignore[attr-defined]
    assert m.requires.bins == []  # type: ignore[attr-defined]
    text = "\n".join(m.warnings)  # type: ignore[attr-defined]
    assert "metadata.openclaw.events: entries that are not strings are read as their text" in text
    assert "metadata.openclaw.requires.bins: 7 is not a list of strings: ignored" in text


def test_gatewayd_field_errors_are_reported_at_once() -> None:
    errors = errors_of(
        "---\nname: 7\nmetadata: {eliza: {events: [command], priority: x, timeoutMs: -1}}\n---\n"
    )
    text = "\n".join(errors)
    assert "metadata.eliza.priority must be an integer" in text
    assert "metadata.eliza.timeoutMs must be a positive integer" in text


def test_name_is_read_as_openclaw_reads_it() -> None:
    assert parse("---\nname: 7\n---\n").name == "7"  # type: ignore[attr-defined]
    assert parse("---\nname: '  padded '\n---\n").name == "padded"  # type: ignore[attr-defined]
    assert parse("---\nname: ''\n---\n").name == "foo"  # type: ignore[attr-defined]


def test_misspelled_event_type_loads_with_a_warning_and_a_suggestion() -> None:
    m = parse("---\nmetadata: {eliza: {events: [command:new, comand:reset]}}\n---\n")
    assert m.keys == ("command:new",)  # type: ignore[attr-defined]
    (warning,) = m.warnings  # type: ignore[attr-defined]
    assert warning.startswith("hooks/foo/HOOK.md: metadata.eliza.events: 'comand:reset': ")
    assert "unknown event type 'comand'" in warning
    assert "no emitter produces it" in warning
    assert warning.endswith("did you mean command:reset?")


def test_yaml_11_booleans_stay_strings_and_are_unknown_event_names() -> None:
    # `on` would be True in YAML 1.1, giving a confusing "must be a string, got True".
    m = parse("---\nmetadata: {eliza: {events: [on, yes]}}\n---\n")
    text = "\n".join(m.warnings)  # type: ignore[attr-defined]
    assert "'on': unknown event type 'on'" in text
    assert "'yes': unknown event type 'yes'" in text


def test_unknown_platform_is_a_warning_with_a_suggestion() -> None:
    m = parse("---\nmetadata: {eliza: {events: [command], os: [macos]}}\n---\n")
    (warning,) = m.warnings  # type: ignore[attr-defined]
    assert "metadata.eliza.os: unknown platform 'macos'" in warning
    assert "did you mean darwin?" in warning


def test_export_must_be_an_identifier() -> None:
    errors = errors_of("---\nmetadata: {eliza: {events: [command], export: my-fn}}\n---\n")
    assert errors == [
        "hooks/foo/HOOK.md: metadata.eliza.export must be a Python identifier, got 'my-fn'"
    ]


def test_unknown_top_level_keys_are_ignored() -> None:
    m = parse_manifest(
        "---\nname: foo\nversion: 2\nauthor: {name: x}\nmetadata: {eliza: {events: [command]}}\n"
        "---\n",
        PATH,
    )
    assert m.events == ("command",)
    assert m.warnings == ()


def test_unknown_keys_in_the_namespace_are_warnings_not_errors() -> None:
    m = parse_manifest(
        "---\nmetadata: {eliza: {events: [command], evnts: [x], requires: {bin: [git]}}}\n---\n",
        PATH,
        source=SRC,
    )
    assert m.events == ("command",)
    assert m.warnings == (
        "hooks/foo/HOOK.md: metadata.eliza.evnts: unknown key, ignored (check the spelling)",
        "hooks/foo/HOOK.md: metadata.eliza.requires.bin: unknown key, ignored "
        "(expected bins, anyBins, env or config)",
    )


def test_timeout_ms_top_level_or_in_metadata() -> None:
    top = parse_manifest(
        "---\ntimeoutMs: 1500\nmetadata: {eliza: {events: [command]}}\n---\n", PATH
    )
    inner = parse_manifest(
        "---\ntimeoutMs: 1500\nmetadata: {eliza: {events: [command], timeoutMs: 250}}\n---\n", PATH
    )
    assert (top.timeout_ms, inner.timeout_ms) == (1500, 250)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("name: foo\n", "no YAML frontmatter: the file must start with a '---' line"),
        ("# Foo\n---\nname: foo\n---\n", "no YAML frontmatter"),
        ("---\nname: foo\n", "the frontmatter opened on line 1 is never closed by a '---' line"),
    ],
)
def test_no_frontmatter(text: str, expected: str) -> None:
    errors = errors_of(text)
    assert len(errors) == 1
    assert expected in errors[0]
    assert errors[0].startswith("hooks/foo/HOOK.md")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("---\nmetadata: [1]\n---\n", "metadata: '[1]' is no mapping (nested YAML or JSON)"),
        ("---\nmetadata: '{oops'\n---\n", "metadata: '{oops' is no mapping"),
    ],
)
def test_frontmatter_openclaw_cannot_use_is_a_hook_without_events(text: str, expected: str) -> None:
    m = parse(text)
    assert m.events == ()  # type: ignore[attr-defined]
    assert any(expected in w for w in m.warnings), m.warnings  # type: ignore[attr-defined]


def test_broken_yaml_is_read_line_by_line_with_a_warning_naming_the_line() -> None:
    m = parse(
        '---\nname: foo\nbad: [unclosed\nmetadata: {"eliza": {"events": ["command:new"]}}\n---\n'
    )
    assert m.events == ("command:new",)  # type: ignore[attr-defined]
    (warning,) = m.warnings  # type: ignore[attr-defined]
    # Line 4 of the file (the frontmatter starts on line 2): the parser's position is kept.
    assert warning.startswith("hooks/foo/HOOK.md: hooks/foo/HOOK.md:4:")
    assert "invalid YAML" in warning
    assert "read line by line, as OpenClaw reads it" in warning


def test_a_key_written_twice_is_read_line_by_line_the_last_one_kept() -> None:
    m = parse(
        '---\nname: one\nname: two\nmetadata: {"openclaw": {"events": ["command:new"]}}\n---\n'
    )
    assert (m.name, m.events) == ("two", ("command:new",))  # type: ignore[attr-defined]
    assert "duplicate key 'name'" in m.warnings[0]  # type: ignore[attr-defined]


def test_a_yaml_error_that_leaves_no_events_makes_the_hook_invalid() -> None:
    # Read line by line, nested metadata is lost: the hook could never run (in OpenClaw
    # neither), so the YAML error is reported as what to fix.
    errors = errors_of(
        "---\nname: foo\nname: bar\nmetadata:\n  openclaw:\n    events: [command:new]\n---\n"
    )
    assert "duplicate key 'name'" in errors[0]
    assert errors[0].endswith("it subscribes to no event)")
    assert "the frontmatter must be a mapping" in errors_of("---\n- a\n- b\n---\n")[0]


def test_bom_and_empty_frontmatter() -> None:
    m = parse_manifest("\ufeff---\n---\nbody\n", PATH)
    assert (m.name, m.events) == ("foo", ())


def test_read_manifest_reports_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "x" / "HOOK.md"
    path.parent.mkdir()
    path.write_bytes(b"---\nname: \xff\n---\n")
    with pytest.raises(ManifestError) as info:
        read_manifest(path)
    assert info.value.errors[0].startswith(f"{path}: not UTF-8 text")
