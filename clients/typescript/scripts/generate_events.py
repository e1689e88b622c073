"""Write ``src/events.ts``: gatewayd's event schema as TypeScript, from ``gatewayd.hooks.schema``.

Every event name, its context interface (fields as the wire carries them), the fields a decision
event's handlers may return (their merged result) and the OpenClaw plugin-hook name of each event
come from the Python schema the daemon itself builds events from, so the TypeScript client cannot
drift from it: ``tests/clients/test_typescript_events.py`` fails when the committed file differs
from what this script writes now.

    .venv/bin/python clients/typescript/scripts/generate_events.py          # rewrite the file
    .venv/bin/python clients/typescript/scripts/generate_events.py --check  # exit 1 if stale

The types follow the wire: a context is JSON, so a value that is no JSON (the gateway handle)
arrives as a string; every field is optional (a ``trigger`` carries only what its caller sent).
A result field has its context field's type when the context has one (``content``, ``params``),
is ``boolean`` when it is the event's stop field (``block``, ``cancel``), else ``string``
(``reason``, ``systemPrompt``).
"""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

from gatewayd.hooks.schema import BASE_FIELDS, EVENTS, EventSpec
from gatewayd.hooks.vocabulary import PLUGIN_HOOKS

OUT = Path(__file__).resolve().parent.parent / "src" / "events.ts"
HEADER = (
    "// Generated from gatewayd/hooks/schema.py by clients/typescript/scripts/generate_events.py:\n"
    "// do not edit. Regenerate after changing the schema (a test fails while the two differ).\n"
)


class Renderer:
    """Turns the schema's TypedDicts into TypeScript interfaces, each declared once."""

    def __init__(self) -> None:
        self.declared: dict[str, str] = {}  # interface name -> its TypeScript, in first-use order

    def ts_type(self, hint: Any) -> str:
        if hint is Any or hint is object:
            return "unknown"
        if hint is str:
            return "string"
        if hint is bool:
            return "boolean"
        if hint in (int, float):
            return "number"
        if hint is type(None):
            return "null"
        if is_typeddict(hint):
            self.interface(hint)
            return str(hint.__name__)
        if isinstance(hint, type) and getattr(hint, "_is_protocol", False):
            return "string"  # a handle that is no JSON: the wire carries its text
        origin, args = get_origin(hint), get_args(hint)
        if origin is Literal:
            return " | ".join(_literal(a) for a in args)
        if origin in (Union, types.UnionType):
            return " | ".join(self.ts_type(a) for a in args)
        if origin is list:
            inner = self.ts_type(args[0]) if args else "unknown"
            return f"({inner})[]" if "|" in inner else f"{inner}[]"
        if origin is dict:
            value = self.ts_type(args[1]) if len(args) == 2 else "unknown"
            return f"Record<string, {value}>"
        raise TypeError(f"no TypeScript type for {hint!r}: teach generate_events.py this type")

    def interface(self, typed: Any, name: str | None = None) -> str:
        name = name or typed.__name__
        if name in self.declared:
            return name
        self.declared[name] = ""  # reserve the name (and the order) before the fields recurse
        hints = get_type_hints(typed)
        lines = [_doc(typed.__doc__), f"export interface {name} {{"]
        for field, hint in hints.items():
            lines.append(f"  {_prop(field)}?: {self.ts_type(hint)};")
        lines.append("}")
        self.declared[name] = "\n".join(line for line in lines if line)
        return name

    def result(self, spec: EventSpec, name: str) -> str:
        hints = get_type_hints(spec.context)
        lines = [f"/** What `{spec.key}` handlers returned, merged in priority order. */"]
        lines.append(f"export interface {name} {{")
        for field, merge in spec.results.items():
            if field in hints:
                ts = self.ts_type(hints[field])
            elif field == spec.stop:
                ts = "boolean"
            else:
                ts = "string"
            lines.append(f"  /** merged: {merge.value} */")
            lines.append(f"  {_prop(field)}?: {ts};")
        lines.append("}")
        self.declared[name] = "\n".join(lines)
        return name


def _literal(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value).lower()


def _prop(field: str) -> str:
    return field if field.isidentifier() else f'"{field}"'


def _doc(text: str | None) -> str:
    if not text:
        return ""
    body = " ".join(text.split()).replace("*/", "*\\/")
    return f"/** {body} */"


def _pascal(key: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in key.replace(":", "_").split("_"))


def render() -> str:
    """The whole ``events.ts``."""
    r = Renderer()
    contexts: list[tuple[str, str]] = []
    results: list[tuple[str, str]] = []
    for key, spec in EVENTS.items():
        contexts.append((key, r.interface(spec.context)))
        if spec.results:
            results.append((key, r.result(spec, f"{_pascal(key)}Result")))
    openclaw = {event: name for name, event in PLUGIN_HOOKS.items()}
    out = [HEADER]
    out.extend(f"{body}\n" for body in r.declared.values())
    out.append(
        "/** The context type of each event the schema declares (`command`: every command). */"
    )
    out.append("export interface EventContexts {")
    out.extend(f'  "{key}": {name};' for key, name in contexts)
    out.append("}\n")
    out.append(
        "/** The merged result of each decision event (the `result` of a waited `trigger`). */"
    )
    out.append("export interface DecisionResults {")
    out.extend(f'  "{key}": {name};' for key, name in results)
    out.append("}\n")
    out.append("/** Every event key the schema declares. */")
    out.append("export type EventKey = keyof EventContexts;")
    out.append("/** The events whose handlers return a result the caller obeys. */")
    out.append("export type DecisionEventKey = keyof DecisionResults;\n")
    out.append("/** How the gateway treats each event: the schema's contract, as data. */")
    out.append("export const EVENTS = {")
    for key, spec in EVENTS.items():
        fields = ", ".join(f'"{f}"' for f in spec.fields if f not in BASE_FIELDS)
        mutable = ", ".join(f'"{f}"' for f in sorted(spec.mutable))
        merged = ", ".join(f'{_prop(f)}: "{m.value}"' for f, m in spec.results.items())
        merged = f"{{ {merged} }}" if merged else "{}"
        stop = f'"{spec.stop}"' if spec.stop else "null"
        name = f'"{openclaw[key]}"' if key in openclaw else "null"
        out.append(
            f'  "{key}": {{ fired: {str(spec.fired).lower()}, reply: "{spec.reply}", '
            f"fields: [{fields}], mutable: [{mutable}], results: {merged}, "
            f"stop: {stop}, openclaw: {name} }},"
        )
    out.append("} as const;\n")
    decisions = ", ".join(f'"{key}"' for key, _ in results)
    out.append("/** The decision events, in schema order. */")
    out.append(f"export const DECISION_EVENTS: readonly DecisionEventKey[] = [{decisions}];")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != text:
            print(
                f"{OUT} differs from gatewayd/hooks/schema.py: run "
                ".venv/bin/python clients/typescript/scripts/generate_events.py and commit it",
                file=sys.stderr,
            )
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
