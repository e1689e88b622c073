# ruff: noqa: E501 (the cases are HOOK.md texts, each kept on the line it reads best on)
"""The differential test's cases: hook directories, a config and an environment, as files.

A :class:`Case` is a small tree under one directory:

* ``state/`` is the state dir (gatewayd's ``ELIZA_STATE_DIR``, OpenClaw's
  ``OPENCLAW_STATE_DIR``); ``state/hooks`` is the managed root of both; extra dirs live under
  ``state/`` too (gatewayd loads extra dirs only there);
* ``workspace/`` is the workspace (its hooks in ``workspace/hooks``);
* ``bundled/`` stands for the bundled root of both.

``config`` is OpenClaw's config (``openclaw.json``), with ``$CASE`` replaced by the case's
directory; gatewayd reads its ``hooks`` section as its own config's and the rest through
``agent.configFile``, as an OpenClaw user moving over would set it up. Every hook directory
gets a ``handler.ts`` that tags its function with its own URL (``oracle.mjs`` reads which
handlers OpenClaw registered by that tag) unless the case writes a handler of its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

TAGGED_HANDLER: Final = (
    "const handler = async (event) => {};\n"
    "handler.oracleHook = import.meta.url;\n"
    "export default handler;\n"
)
"""A handler OpenClaw's loader can import, that says which file it is."""

OPEN: Final[dict[str, Any]] = {"hooks": {"internal": {"enabled": True}}}
"""OpenClaw's open-ended discovery: every eligible hook is selected (no named entries)."""

HANDLER_NAMES: Final = ("handler.ts", "handler.js", "index.ts", "index.js")


@dataclass
class Case:
    """One set of hook directories with the config and environment they are judged in."""

    id: str
    files: dict[str, str]
    """Path under the case directory -> text. A ``HOOK.md`` without a handler beside it gets
    :data:`TAGGED_HANDLER` as ``handler.ts``."""
    config: dict[str, Any] = field(default_factory=lambda: json.loads(json.dumps(OPEN)))
    env: dict[str, str] = field(default_factory=dict)
    deliberate: tuple[str, ...] = ()
    """The ids (docs/design.md, "Deliberate differences from OpenClaw") of the differences
    this case shows on purpose. A case that declares one and agrees fully fails as stale."""
    no_handler: frozenset[str] = frozenset()
    """Hook directories that are to have no handler at all."""

    def write(self, root: Path) -> None:
        """Write the case's files under ``root``."""
        for sub in ("state/hooks", "workspace/hooks", "bundled"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        for rel, text in self.files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text.replace("$CASE", str(root)), encoding="utf-8")
        for rel in self.files:
            hook_dir = (root / rel).parent
            if Path(rel).name != "HOOK.md" or str(Path(rel).parent) in self.no_handler:
                continue
            if not any((hook_dir / name).exists() for name in HANDLER_NAMES):
                (hook_dir / "handler.ts").write_text(TAGGED_HANDLER, encoding="utf-8")

    def openclaw_config(self, root: Path) -> dict[str, Any]:
        """The config with ``$CASE`` replaced."""
        loaded: dict[str, Any] = json.loads(json.dumps(self.config).replace("$CASE", str(root)))
        return loaded


def hook_md(frontmatter: str, body: str = "# hook\n") -> str:
    """A HOOK.md with ``frontmatter`` (YAML, no ``---`` lines) and a Markdown body."""
    return f"---\n{frontmatter.strip(chr(10))}\n---\n\n{body}"


def meta(events: str = '["command:new"]', extra: str = "", name: str = "h") -> str:
    """A HOOK.md whose OpenClaw metadata is inline JSON: ``{"openclaw": {"events": ...}}``."""
    inner = f'"events": {events}' + (f", {extra}" if extra else "")
    return hook_md(f'name: {name}\nmetadata: {{"openclaw": {{{inner}}}}}')


M: Final = "state/hooks"
"""The managed root, relative to a case."""
W: Final = "workspace/hooks"


def one(case_id: str, text: str, **kw: Any) -> Case:
    """A case of one managed hook ``h`` whose HOOK.md is ``text``."""
    return Case(case_id, {f"{M}/h/HOOK.md": text}, **kw)


def _entries(entries: dict[str, Any], **internal: Any) -> dict[str, Any]:
    return {"hooks": {"internal": {"enabled": True, "entries": entries, **internal}}}


CASES: Final[list[Case]] = [
    # -- always: only a real boolean true bypasses requires --------------------------------
    one("always-true", meta(extra='"always": true, "requires": {"env": ["OC_NOPE"]}')),
    one("always-string-true", meta(extra='"always": "true", "requires": {"env": ["OC_NOPE"]}')),
    one(
        "always-yes-yaml",
        hook_md(
            "name: h\nmetadata:\n  openclaw:\n    events: [command:new]\n    always: yes\n"
            "    requires:\n      env: [OC_NOPE]"
        ),
    ),
    one(
        "always-on-yaml",
        hook_md(
            "name: h\nmetadata:\n  openclaw:\n    events: [command:new]\n    always: on\n"
            "    requires:\n      bins: [oc-no-such-bin]"
        ),
    ),
    one("always-one", meta(extra='"always": 1, "requires": {"env": ["OC_NOPE"]}')),
    one("always-false", meta(extra='"always": false, "requires": {"env": ["OC_NOPE"]}')),
    one("always-true-wrong-os", meta(extra='"always": true, "os": ["win32"]')),
    one(
        "always-True-yaml",
        hook_md(
            "name: h\nmetadata:\n  openclaw:\n    events: [command:new]\n    always: True\n"
            "    requires:\n      env: [OC_NOPE]"
        ),
    ),
    # -- requires.config: JavaScript truthiness, OpenClaw's defaults, odd paths ---------
    one(
        "config-empty-object",
        meta(extra='"requires": {"config": ["tools.opts"]}'),
        config={**OPEN, "tools": {"opts": {}}},
    ),
    one(
        "config-empty-list",
        meta(extra='"requires": {"config": ["tools.list"]}'),
        config={**OPEN, "tools": {"list": []}},
    ),
    one(
        "config-zero",
        meta(extra='"requires": {"config": ["tools.n"]}'),
        config={**OPEN, "tools": {"n": 0}},
    ),
    one(
        "config-string-zero",
        meta(extra='"requires": {"config": ["tools.n"]}'),
        config={**OPEN, "tools": {"n": "0"}},
    ),
    one(
        "config-string-false",
        meta(extra='"requires": {"config": ["tools.flag"]}'),
        config={**OPEN, "tools": {"flag": "false"}},
    ),
    one(
        "config-spaces",
        meta(extra='"requires": {"config": ["tools.name"]}'),
        config={**OPEN, "tools": {"name": "   "}},
    ),
    one(
        "config-false",
        meta(extra='"requires": {"config": ["tools.flag"]}'),
        config={**OPEN, "tools": {"flag": False}},
    ),
    one("config-missing", meta(extra='"requires": {"config": ["tools.absent"]}')),
    one("config-browser-default", meta(extra='"requires": {"config": ["browser.enabled"]}')),
    one(
        "config-browser-evaluate-default",
        meta(extra='"requires": {"config": ["browser.evaluateEnabled"]}'),
    ),
    one(
        "config-browser-off",
        meta(extra='"requires": {"config": ["browser.enabled"]}'),
        config={**OPEN, "browser": {"enabled": False}},
    ),
    one(
        "config-browser-empty-section",
        meta(extra='"requires": {"config": ["browser.enabled"]}'),
        config={**OPEN, "browser": {}},
    ),
    one("config-workspace-dir-default", meta(extra='"requires": {"config": ["workspace.dir"]}')),
    one(
        "config-empty-segments",
        meta(extra='"requires": {"config": ["tools..flag."]}'),
        config={**OPEN, "tools": {"flag": True}},
    ),
    one(
        "config-leading-dot",
        meta(extra='"requires": {"config": [".tools.flag"]}'),
        config={**OPEN, "tools": {"flag": True}},
    ),
    one(
        "config-proto",
        meta(extra='"requires": {"config": ["tools.constructor"]}'),
        config={**OPEN, "tools": {"flag": True}},
    ),
    one(
        "config-entry-setting",
        meta(extra='"requires": {"config": ["hooks.internal.entries.h.target"]}'),
        config=_entries({"h": {"target": "prod"}}),
    ),
    one(
        "config-entry-setting-missing",
        meta(extra='"requires": {"config": ["hooks.internal.entries.h.target"]}'),
        config=_entries({"h": {"enabled": True}}),
    ),
    one(
        "config-number",
        meta(extra='"requires": {"config": ["tools.n"]}'),
        config={**OPEN, "tools": {"n": 2}},
    ),
    one(
        "config-through-list",
        meta(extra='"requires": {"config": ["tools.list.0"]}'),
        config={**OPEN, "tools": {"list": ["x"]}},
    ),
    # -- values and names trimmed ------------------------------------------------------
    one("env-spaces", meta(extra='"requires": {"env": ["OC_SPACES"]}'), env={"OC_SPACES": "  "}),
    one("env-set", meta(extra='"requires": {"env": ["OC_SET"]}'), env={"OC_SET": "x"}),
    one("env-name-padded", meta(extra='"requires": {"env": [" OC_SET "]}'), env={"OC_SET": "x"}),
    one(
        "env-entry-spaces",
        meta(extra='"requires": {"env": ["OC_ENTRY"]}'),
        config=_entries({"h": {"env": {"OC_ENTRY": "   "}}}),
    ),
    one(
        "env-entry-set",
        meta(extra='"requires": {"env": ["OC_ENTRY"]}'),
        config=_entries({"h": {"env": {"OC_ENTRY": "token"}}}),
    ),
    one("events-padded", meta(events='[" command:new ", "  session:compact:before"]')),
    one("events-empty-strings", meta(events='["", "command:new", "  "]')),
    one("events-csv", meta(events='"command:new, command:reset"')),
    one(
        "events-csv-yaml",
        hook_md("name: h\nmetadata:\n  openclaw:\n    events: command:new, command:stop"),
    ),
    one("bins-csv", meta(extra='"requires": {"bins": "sh, oc-no-such-bin"}')),
    one("bins-padded", meta(extra='"requires": {"bins": [" sh "]}')),
    one("anybins", meta(extra='"requires": {"anyBins": ["oc-no-such-bin", "sh"]}')),
    one("anybins-none", meta(extra='"requires": {"anyBins": ["oc-no-such-bin", "oc-nor-this"]}')),
    one(
        "name-padded",
        hook_md('name: "  padded  "\nmetadata: {"openclaw": {"events": ["command:new"]}}'),
    ),
    one("name-empty", hook_md('name: ""\nmetadata: {"openclaw": {"events": ["command:new"]}}')),
    one("name-number", hook_md('name: 123\nmetadata: {"openclaw": {"events": ["command:new"]}}')),
    one("name-missing", hook_md('metadata: {"openclaw": {"events": ["command:new"]}}')),
    # -- a key written twice: OpenClaw reads the lines instead of refusing the hook ---------
    one(
        "dup-description",
        hook_md(
            "name: h\ndescription: one\ndescription: two\n"
            'metadata: {"openclaw": {"events": ["command:new"]}}'
        ),
    ),
    one(
        "dup-name",
        hook_md('name: first\nname: second\nmetadata: {"openclaw": {"events": ["command:new"]}}'),
    ),
    one(
        "dup-in-nested-metadata",
        hook_md(
            "name: h\nmetadata:\n  openclaw:\n    events: [command:new]\n    events: [command:reset]"
        ),
    ),
    one(
        "dup-in-inline-metadata",
        hook_md(
            'name: h\nmetadata: {"openclaw": {"events": ["command:new"], "events": ["command:reset"]}}'
        ),
    ),
    one(
        "yaml-error-inline-metadata",
        hook_md('name: h\nbad: [unclosed\nmetadata: {"openclaw": {"events": ["command:new"]}}'),
    ),
    one(
        "yaml-error-nested-metadata",
        hook_md("name: h\nbad: [unclosed\nmetadata:\n  openclaw:\n    events: [command:new]"),
    ),
    one(
        "description-colon",
        hook_md(
            'name: h\ndescription: Runs at: startup\nmetadata: {"openclaw": {"events": ["command:new"]}}'
        ),
    ),
    # -- where the metadata is, and how it is written --------------------------------------
    one(
        "flow-metadata-unquoted", hook_md("name: h\nmetadata: {openclaw: {events: [command:new]}}")
    ),
    one("flow-metadata-json5", hook_md("name: h\nmetadata: {openclaw: {events: ['command:new']}}")),
    one(
        "flow-metadata-below-key",
        hook_md("name: h\nmetadata:\n  openclaw: {events: [command:new], emoji: x}"),
    ),
    one(
        "multiline-json-metadata",
        hook_md(
            'name: h\nmetadata:\n  {\n    "openclaw": { "events": ["command:new"], "always": true },\n  }'
        ),
    ),
    one(
        "top-level-events-beside-openclaw",
        hook_md('name: h\nevents: [command:new]\nmetadata: {"openclaw": {"emoji": "x"}}'),
    ),
    one(
        "eliza-namespace",
        hook_md('name: h\nmetadata: {"eliza": {"events": ["command:new"]}}'),
        deliberate=("eliza-metadata",),
    ),
    one(
        "events-under-metadata",
        hook_md('name: h\nmetadata: {"events": ["command:new"]}'),
        deliberate=("eliza-metadata",),
    ),
    one(
        "events-at-top-level",
        hook_md("name: h\nevents: [command:new]"),
        deliberate=("eliza-metadata",),
    ),
    one(
        "gatewayd-field-wrong-type",
        meta(extra='"priority": "high"'),
        deliberate=("gatewayd-fields-checked",),
    ),
    one("gatewayd-fields", meta(extra='"priority": 5, "timeoutMs": 100, "background": true')),
    Case(
        "extra-beats-bundled",
        {
            "bundled/x/HOOK.md": meta(name="twin"),
            "state/extra1/x/HOOK.md": meta(name="twin", events='["command:reset"]'),
        },
        config={
            "hooks": {"internal": {"enabled": True, "load": {"extraDirs": ["$CASE/state/extra1"]}}}
        },
    ),
    # -- two hook directories with one name in one root -------------------------------------
    Case(
        "same-name-managed",
        {
            f"{M}/a-first/HOOK.md": meta(name="twin"),
            f"{M}/b-second/HOOK.md": meta(name="twin", events='["command:reset"]'),
        },
    ),
    Case(
        "same-name-workspace",
        {
            f"{W}/a-first/HOOK.md": meta(name="twin"),
            f"{W}/b-second/HOOK.md": meta(name="twin", events='["command:reset"]'),
        },
        config=_entries({"twin": {"enabled": True}}),
        deliberate=(),
    ),
    Case(
        "same-name-bundled",
        {
            "bundled/a-first/HOOK.md": meta(name="twin"),
            "bundled/b-second/HOOK.md": meta(name="twin", events='["command:reset"]'),
        },
    ),
    Case(
        "same-name-three-managed",
        {
            f"{M}/a/HOOK.md": meta(name="twin"),
            f"{M}/b/HOOK.md": meta(name="twin", events='["command:reset"]'),
            f"{M}/c/HOOK.md": meta(name="twin", events='["command:stop"]'),
        },
    ),
    Case(
        "same-name-extra-dirs",
        {
            "state/extra1/x/HOOK.md": meta(name="twin"),
            "state/extra2/x/HOOK.md": meta(name="twin", events='["command:reset"]'),
        },
        config={
            "hooks": {
                "internal": {
                    "enabled": True,
                    "load": {"extraDirs": ["$CASE/state/extra1", "$CASE/state/extra2"]},
                }
            }
        },
    ),
    Case(
        "managed-beats-extra",
        {
            "state/extra1/x/HOOK.md": meta(name="twin"),
            f"{M}/x/HOOK.md": meta(name="twin", events='["command:reset"]'),
        },
        config={
            "hooks": {"internal": {"enabled": True, "load": {"extraDirs": ["$CASE/state/extra1"]}}}
        },
    ),
    Case(
        "managed-beats-bundled",
        {
            "bundled/x/HOOK.md": meta(name="twin"),
            f"{M}/x/HOOK.md": meta(name="twin", events='["command:reset"]'),
        },
    ),
    Case(
        "same-name-by-dir-and-frontmatter",
        {
            f"{M}/twin/HOOK.md": meta(name="twin"),
            f"{M}/zz/HOOK.md": meta(name="twin", events='["command:reset"]'),
        },
    ),
    # -- requires / the openclaw block of the wrong type ----------------------------------
    one("requires-string", meta(extra='"requires": "OC_NOPE"')),
    one("requires-list", meta(extra='"requires": ["OC_NOPE"]')),
    one("requires-null", meta(extra='"requires": null')),
    one("requires-bins-number", meta(extra='"requires": {"bins": 5}')),
    one(
        "openclaw-string-clawdbot-object",
        hook_md('name: h\nmetadata: {"openclaw": "x", "clawdbot": {"events": ["command:new"]}}'),
    ),
    one(
        "openclaw-null-clawdbot-object",
        hook_md('name: h\nmetadata: {"openclaw": null, "clawdbot": {"events": ["command:new"]}}'),
    ),
    one(
        "openclaw-list-clawdbot-object",
        hook_md('name: h\nmetadata: {"openclaw": [], "clawdbot": {"events": ["command:new"]}}'),
    ),
    one("clawdbot-only", hook_md('name: h\nmetadata: {"clawdbot": {"events": ["command:new"]}}')),
    one(
        "openclaw-before-clawdbot",
        hook_md(
            'name: h\nmetadata: {"clawdbot": {"events": ["command:reset"]}, '
            '"openclaw": {"events": ["command:new"]}}'
        ),
    ),
    one(
        "metadata-json5-string",
        hook_md("name: h\nmetadata: \"{openclaw: {events: ['command:new'],},}\""),
    ),
    one("metadata-bad-json-string", hook_md('name: h\nmetadata: "{openclaw: nope"')),
    one("events-number", meta(events="5")),
    one("events-object", meta(events='{"a": "command:new"}')),
    one("events-mixed-types", meta(events='["command:new", 5, null]')),
    one("os-string", meta(extra='"os": "linux"')),
    one("os-other", meta(extra='"os": ["darwin", "win32"]')),
    one("os-list-linux", meta(extra='"os": ["darwin", "linux"]')),
    one(
        "hookkey-disabled", meta(extra='"hookKey": "k"'), config=_entries({"k": {"enabled": False}})
    ),
    one(
        "hookkey-env",
        meta(extra='"hookKey": "k", "requires": {"env": ["OC_K"]}'),
        config=_entries({"k": {"env": {"OC_K": "v"}}}),
    ),
    one("entry-disabled", meta(), config=_entries({"h": {"enabled": False}})),
    one("internal-off", meta(), config={"hooks": {"internal": {"enabled": False}}}),
    one("no-events", meta(events="[]")),
    one("no-frontmatter", "# just markdown\n"),
    one(
        "unterminated-frontmatter",
        '---\nname: h\nmetadata: {"openclaw": {"events": ["command:new"]}}\n',
    ),
    one("crlf", meta().replace("\n", "\r\n")),
    one("bom", "\ufeff" + meta()),
    one("unknown-event", meta(events='["command:nwe"]')),
    one("plugin-event-name", meta(events='["message_sending"]')),
    one("family-event", meta(events='["session"]')),
    # -- hook packs: package.json's openclaw.hooks names the hook directories -----------------
    Case(
        "pack-managed",
        {
            f"{M}/pack/package.json": '{"name": "p", "openclaw": {"hooks": ["./hooks/a", "hooks/b"]}}',
            f"{M}/pack/hooks/a/HOOK.md": meta(name="pa"),
            f"{M}/pack/hooks/b/HOOK.md": meta(name="pb", events='["command:reset"]'),
            f"{M}/pack/hooks/c/HOOK.md": meta(name="pc-unlisted"),
        },
    ),
    Case(
        "pack-outside-path",
        {
            f"{M}/pack/package.json": '{"openclaw": {"hooks": ["../other", "hooks/a"]}}',
            f"{M}/pack/hooks/a/HOOK.md": meta(name="pa"),
            f"{M}/other/HOOK.md": meta(name="other"),
        },
    ),
    Case(
        "pack-with-own-hook-md",
        {
            f"{M}/pack/package.json": '{"openclaw": {"hooks": ["hooks/a"]}}',
            f"{M}/pack/HOOK.md": meta(name="top"),
            f"{M}/pack/hooks/a/HOOK.md": meta(name="pa"),
        },
    ),
    Case(
        "pack-empty-hooks-list",
        {
            f"{M}/pack/package.json": '{"openclaw": {"hooks": []}}',
            f"{M}/pack/HOOK.md": meta(name="top"),
        },
    ),
    Case(
        "pack-hooks-string",
        {
            f"{M}/pack/package.json": '{"openclaw": {"hooks": "hooks/a"}}',
            f"{M}/pack/HOOK.md": meta(name="top"),
            f"{M}/pack/hooks/a/HOOK.md": meta(name="pa"),
        },
    ),
    Case(
        "pack-bad-json",
        {
            f"{M}/pack/package.json": '{"openclaw": ',
            f"{M}/pack/HOOK.md": meta(name="top"),
        },
    ),
    Case(
        "pack-no-openclaw-key",
        {
            f"{M}/pack/package.json": '{"name": "plain"}',
            f"{M}/pack/HOOK.md": meta(name="top"),
        },
    ),
    Case(
        "pack-missing-dir",
        {
            f"{M}/pack/package.json": '{"openclaw": {"hooks": ["hooks/gone", "hooks/a"]}}',
            f"{M}/pack/hooks/a/HOOK.md": meta(name="pa"),
        },
    ),
    Case(
        "pack-nested-pack-not-followed",
        {
            f"{M}/pack/package.json": '{"openclaw": {"hooks": ["inner"]}}',
            f"{M}/pack/inner/package.json": '{"openclaw": {"hooks": ["x"]}}',
            f"{M}/pack/inner/x/HOOK.md": meta(name="deep"),
        },
    ),
    Case(
        "pack-same-name-later-wins",
        {
            f"{M}/pack/package.json": '{"openclaw": {"hooks": ["hooks/b", "hooks/a"]}}',
            f"{M}/pack/hooks/a/HOOK.md": meta(name="twin"),
            f"{M}/pack/hooks/b/HOOK.md": meta(name="twin", events='["command:reset"]'),
        },
    ),
    Case(
        "extra-dir-is-a-hook",
        {
            "state/extra1/HOOK.md": meta(name="single"),
        },
        config={
            "hooks": {"internal": {"enabled": True, "load": {"extraDirs": ["$CASE/state/extra1"]}}}
        },
    ),
    Case(
        "extra-dir-is-a-pack",
        {
            "state/extra1/package.json": '{"openclaw": {"hooks": ["hooks/a"]}}',
            "state/extra1/hooks/a/HOOK.md": meta(name="pa"),
            "state/extra1/b/HOOK.md": meta(name="unlisted"),
        },
        config={
            "hooks": {"internal": {"enabled": True, "load": {"extraDirs": ["$CASE/state/extra1"]}}}
        },
    ),
    Case(
        "extra-dir-collection",
        {
            "state/extra1/a/HOOK.md": meta(name="ea"),
            "state/extra1/b/HOOK.md": meta(name="eb"),
        },
        config={
            "hooks": {"internal": {"enabled": True, "load": {"extraDirs": ["$CASE/state/extra1"]}}}
        },
    ),
    # -- handlers -------------------------------------------------------------------------
    Case(
        "handler-throws",
        {
            f"{M}/h/HOOK.md": meta(),
            f"{M}/h/handler.ts": 'throw new Error("boom at import");\n',
        },
    ),
    Case(
        "handler-syntax-error",
        {
            f"{M}/h/HOOK.md": meta(),
            f"{M}/h/handler.js": "export default function (\n",
        },
    ),
    Case(
        "handler-not-a-function",
        {
            f"{M}/h/HOOK.md": meta(),
            f"{M}/h/handler.ts": "export default 42;\n",
        },
    ),
    Case(
        "handler-named-export",
        {
            f"{M}/h/HOOK.md": meta(extra='"export": "run"'),
            f"{M}/h/handler.ts": TAGGED_HANDLER.replace(
                "export default handler", "export const run = handler"
            ),
        },
    ),
    Case(
        "handler-named-export-missing",
        {
            f"{M}/h/HOOK.md": meta(extra='"export": "run"'),
            f"{M}/h/handler.ts": TAGGED_HANDLER,
        },
    ),
    Case(
        "handler-index-js",
        {
            f"{M}/h/HOOK.md": meta(),
            f"{M}/h/index.js": TAGGED_HANDLER,
        },
    ),
    Case(
        "handler-js-imports-ts-sibling",
        {
            f"{M}/h/HOOK.md": meta(),
            f"{M}/h/handler.ts": 'import { tag } from "./src/config.js";\n'
            + TAGGED_HANDLER.replace(
                "const handler = async (event) => {};", "const handler = async (event) => tag;"
            ),
            f"{M}/h/src/config.ts": 'export const tag: string = "x";\n',
        },
    ),
    Case(
        "handler-missing-bundled-fallback",
        {
            "bundled/x/HOOK.md": meta(name="twin"),
            f"{M}/x/HOOK.md": meta(name="twin", events='["command:reset"]'),
        },
        no_handler=frozenset({f"{M}/x"}),
        deliberate=("broken-override-claims-name",),
    ),
    # -- the workspace root ---------------------------------------------------------------
    Case(
        "workspace-enabled-entry",
        {f"{W}/h/HOOK.md": meta()},
        config=_entries({"h": {"enabled": True}}),
    ),
    Case("workspace-no-entry", {f"{W}/h/HOOK.md": meta()}, deliberate=("workspace-hooks-run",)),
    Case(
        "workspace-cannot-replace-managed",
        {
            f"{M}/x/HOOK.md": meta(name="twin"),
            f"{W}/x/HOOK.md": meta(name="twin", events='["command:reset"]'),
        },
        config=_entries({"twin": {"enabled": True}}),
        deliberate=("workspace-wins-names",),
    ),
    # -- selection ------------------------------------------------------------------------
    Case(
        "selection-named-entries",
        {
            f"{M}/a/HOOK.md": meta(name="a"),
            f"{M}/b/HOOK.md": meta(name="b"),
        },
        config={"hooks": {"internal": {"entries": {"a": {"enabled": True}}}}},
        deliberate=("hooks-on-by-default",),
    ),
    Case(
        "selection-unconfigured",
        {f"{M}/a/HOOK.md": meta(name="a")},
        config={},
        deliberate=("hooks-on-by-default",),
    ),
]
