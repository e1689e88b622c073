"""``gatewayd hooks list|info|check|enable|disable``: the hooks, as loaded or as they would be.

``list`` and ``info`` show the running daemon's view when a daemon runs (its records and per-hook
counters), else this process's (:mod:`gatewayd.cli.hookview`; ``--daemon`` / ``--local`` choose)
and say which one they show. ``check``, ``enable`` and ``disable`` run the same discovery, checks
and imports as the daemon (``HookLoader.build``) in this process, against the config the daemon
would read, so what they report is what a ``gatewayd run`` started now would load.

Output: a table or text for people; with ``--json`` a stable document on stdout (the same
records the control channel's ``hooks`` op returns). Anything a hook prints or logs while it is
imported goes to stderr so that stdout stays parseable. Exit codes: 0 on success, 1 for a
failed hook (``hooks check``; with ``--strict`` also a warning) or an unknown hook (``hooks
info``, ``enable``, ``disable``), 78 (EX_CONFIG) when the config cannot be read.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import unicodedata
from collections.abc import Iterable
from typing import TextIO

from gatewayd.cli.common import FAILING_STATUSES, dump_json, load_config_or_exit
from gatewayd.cli.hookview import HookView, hook_view, last_error_line, stats_line
from gatewayd.config import Config, ConfigError
from gatewayd.exits import EXIT_CONFIG, EXIT_USAGE, UserError, did_you_mean, print_config_error
from gatewayd.hooks.differences import openclaw_differences
from gatewayd.hooks.events import EventKeyError, parse_event_key
from gatewayd.hooks.loader import HookLoader, HookRecord, LoadResult, serving_records
from gatewayd.hooks.names import shown
from gatewayd.hooks.node.loading import check_node_hooks
from gatewayd.hooks.registry import HookRegistry
from gatewayd.logging import configure_logging


def _build(config: Config) -> LoadResult:
    """Load the hooks as the daemon would; hook output and logs go to stderr."""
    configure_logging("warning", "auto", sys.stderr)
    with contextlib.redirect_stdout(sys.stderr):
        loader = HookLoader()
        try:
            result = loader.build(config.load_spec())
            check_node_hooks(result)  # JS/TS hooks: their imports are tried in a Node worker
            return result
        finally:
            loader.close()


def say(line: str, file: TextIO | None = None) -> None:
    """Print one line for people, every character that would act on the terminal instead of
    showing (a newline in a name, an ANSI escape, a right-to-left override) escaped."""
    print(shown(line), file=file)


def _width(text: str) -> int:
    """Terminal columns of ``text``: wide (emoji, CJK) count 2, combining marks 0."""
    width = 0
    for ch in text:
        if unicodedata.combining(ch) or ch in "\ufe0f\u200d":
            continue
        width += 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1
    return width


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - _width(text))


def _label(record: HookRecord) -> str:
    return f"{record.emoji} {record.name}" if record.emoji else f"   {record.name}"


def _serves(record: HookRecord) -> str:
    """Whose sessions a hook serves, for the SERVES column."""
    owner = record.scope.label()
    if owner is not None:
        return owner if record.agents is None else f"{owner} ({','.join(record.agents)} only)"
    return "all agents" if record.agents is None else ",".join(record.agents)


def _agent_note(agent: str, view: HookView) -> str:
    """What ``--agent`` shows, and when the agent is not configured, whose hooks it gets."""
    if agent in view.agent_ids:
        return (
            f"serving agent {agent!r}: shared hooks (less those its own replace), its own and "
            "its subagents'"
        )
    return (
        f"agent {agent!r} is not in the config's agents ({', '.join(view.agent_ids)}): its "
        f"sessions are served by the default agent {view.default_agent!r}'s hooks, shown here"
    )


def _table(rows: list[list[str]]) -> Iterable[str]:
    rows = [[shown(cell) for cell in row] for row in rows]  # escaped before they are measured
    widths = [max(_width(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [_pad(cell, widths[i]) for i, cell in enumerate(row[:-1])]
        yield "  ".join([*cells, row[-1]]).rstrip()


def _totals(result: LoadResult) -> str:
    return (
        f"{result.discovered} discovered, {result.eligible} eligible, "
        f"{result.registered} registered, {len(result.skipped)} skipped, "
        f"{len(result.failed)} failed, {result.warnings} warnings"
    )


def cli_list(args: argparse.Namespace) -> int:
    """``gatewayd hooks list [--eligible] [--json] [--verbose] [--daemon|--local]``."""
    view = hook_view(args)
    records = [r for r in view.records if r.eligible or not args.eligible]
    agent: str | None = args.agent
    if agent is not None:
        records = serving_records(records, agent, view.serving(agent))
    if args.json:
        dump_json(view.listing(records))
        return 0
    daemon = view.view == "daemon"
    say(f"Hooks ({view.totals()}); {view.header()}")
    if agent is not None:
        say(_agent_note(agent, view))
    scoped = len(view.agent_ids) > 1 or any(
        r.agents is not None or r.subagent is not None for r in view.records
    )
    if not records:
        say("no hooks found" if not args.eligible else "no eligible hooks")
    else:
        rows = [["STATUS", "   HOOK", "EVENTS", "SOURCE"]]
        if scoped:
            rows[0].insert(3, "SERVES")
        if daemon:
            rows[0] += ["CALLS", "ERRORS", "TIMEOUTS", "P99 MS"]
        details: list[list[str]] = [[]]
        for record in records:
            n = len(record.warnings)
            source = f"{record.source}  ({n} warning{'s' * (n != 1)})" if n else record.source
            row = [record.status, _label(record), ", ".join(record.events) or "-", source]
            if scoped:
                row.insert(3, _serves(record))
            stats = view.stats.get(record.name)
            if daemon:
                row += (
                    [str(stats.get(k, 0)) for k in ("calls", "errors", "timeouts", "p99Ms")]
                    if stats
                    else ["-"] * 4
                )
            rows.append(row)
            lines = [f"    - {reason}" for reason in record.reasons]
            lines += [f"    ! {warning}" for warning in record.warnings]
            if daemon and (last := last_error_line(stats)):
                lines.append(f"    last error: {last}")
            details.append(lines)
        for i, line in enumerate(_table(rows)):
            say(line)
            if args.verbose:
                for detail in details[i]:
                    say(detail)
    if args.verbose:
        for problem in view.rejected_roots:
            say(f"rejected root: {problem}")
    return 0


def _find(records: list[HookRecord], name: str) -> HookRecord:
    matches = [r for r in records if name in (r.name, r.hook_key)]
    if not matches:
        known = sorted({r.name for r in records} | {r.hook_key for r in records})
        hint = did_you_mean(name, known)
        raise UserError(
            f'hook "{shown(name)}" not found{hint} (gatewayd hooks list shows them all)'
        )
    # The hook that is in effect (not shadowed) is the one asked about.
    return next((r for r in matches if r.status != "shadowed"), matches[-1])


def cli_info(args: argparse.Namespace) -> int:
    """``gatewayd hooks info NAME [--json] [--daemon|--local]``: one hook by name or hookKey."""
    view = hook_view(args)
    record = _find(view.records, args.name)
    stats = view.stats.get(record.name)
    if args.json:
        data = {"view": view.view, **record.to_json()}
        if view.view == "daemon":
            data["stats"] = stats
        dump_json(data)
        return 0
    say(f"({view.header()})")
    missing = "; ".join(f"{kind}: {', '.join(v)}" for kind, v in record.missing.items() if v)
    say(f"{_label(record).strip()}  [{record.status}]")
    if record.description:
        say(f"  {record.description}")
    fields = [
        ("hookKey", record.hook_key),
        ("source", record.source),
        ("path", record.path),
        ("handler", record.handler or "-"),
        ("events", ", ".join(record.events) or "-"),
        ("serves", _serves(record)),
        ("eligible", "yes" if record.eligible else "no"),
        ("enabled", "yes" if record.enabled else "no"),
        ("missing", missing or "-"),
    ]
    for key, value in fields:
        say(f"  {key + ':':<10} {value}")
    for reason in record.reasons:
        say(f"  reason:    {reason}")
    for warning in record.warnings:
        say(f"  warning:   {warning}")
    for line in _differences(load_config_or_exit(args.config), view.records).get(id(record), []):
        say(f"  openclaw:  {line}")
    if view.view == "daemon":
        say(f"  {'counters:':<10} {stats_line(stats)}")
        if last := last_error_line(stats):
            say(f"  {'last error:':<10} {last}")
    return 0


def cli_order(args: argparse.Namespace) -> int:
    """``gatewayd hooks order TYPE:ACTION [--session KEY] [--json]``: the file hooks an event
    of that session's agent runs, in order (priority, then specific -> type -> ``*``, then load
    order), and its background hooks."""
    key: str = args.event
    try:
        etype, action = parse_event_key(key)
    except EventKeyError as exc:
        raise UserError(str(exc), EXIT_USAGE) from None
    if action is None:
        raise UserError(
            f"name one event as type:action (e.g. {etype}:new), not {key!r}", EXIT_USAGE
        )
    config = load_config_or_exit(args.config)
    result = _build(config)
    registry = HookRegistry()
    registry.agents = config.agents
    registry.set_file_hooks(result.handlers)
    session: str | None = args.session  # None: the default agent's plan
    rows = [(h, False) for h in registry.plan(etype, key, session)]
    rows += [(h, True) for h in registry.background_plan(etype, key, session)]
    if args.json:
        dump_json(
            {
                "event": key,
                "handlers": [
                    {
                        "hook": h.hook,
                        "hookKey": h.hook_key,
                        "priority": h.priority,
                        "kind": h.kind.value,
                        "source": h.source,
                        "background": background,
                    }
                    for h, background in rows
                ],
            }
        )
        return 0
    if not rows:
        say(f"{key}: no hook runs (gatewayd hooks list shows what is loaded and why)")
        return 0
    table = [["#", "HOOK", "PRIORITY", "KIND", "SOURCE", ""]]
    for i, (h, background) in enumerate(rows, 1):
        table.append(
            [
                str(i),
                h.hook,
                str(h.priority),
                h.kind.value,
                h.source,
                "background" if background else "",
            ]
        )
    for line in _table(table):
        say(line.rstrip())
    return 0


def cli_check(args: argparse.Namespace) -> int:
    """``gatewayd hooks check [--strict] [--json]``: totals and every hook that is not ready or
    has warnings; exit 1 when a hook failed to load (or its HOOK.md is invalid), and with
    ``--strict`` also when any hook has a warning."""
    config = load_config_or_exit(args.config)
    result = _build(config)
    differences = _differences(config, result.records)
    attention = [
        r for r in result.records if r.status != "ready" or r.warnings or id(r) in differences
    ]
    ok = not any(r.status in FAILING_STATUSES for r in result.records)
    if args.strict and result.warnings:
        ok = False
    if args.json:
        dump_json(
            {
                "ok": ok,
                "summary": result.summary(),
                "rejectedRoots": list(result.rejected_roots),
                "notHooks": list(result.not_hooks),
                "hooks": [
                    {**r.to_json(), "differences": differences.get(id(r), [])} for r in attention
                ],
            }
        )
        return 0 if ok else 1
    say(f"Hooks: {_totals(result)}")
    for problem in result.rejected_roots:
        say(f"rejected root: {problem}")
    for record in attention:
        say(f"{record.status:<10}  {record.name} ({record.source}, {record.path})")
        for reason in record.reasons:
            say(f"    - {reason}")
        for warning in record.warnings:
            say(f"    ! {warning}")
        for line in differences.get(id(record), []):
            say(f"    ~ {line}")
    for note in result.not_hooks:
        say(f"not a hook  {note}")
    if not attention:
        say("all hooks ready")
    return 0 if ok else 1


def _differences(config: Config, records: list[HookRecord]) -> dict[int, list[str]]:
    """Where OpenClaw would treat each hook otherwise, on purpose (``hooks/differences.py``)."""
    entries = config.settings.hooks.entries

    def explicitly_enabled(hook_key: str) -> bool:
        entry = entries.get(hook_key)
        return entry is not None and entry.enabled and "enabled" in entry.model_fields_set

    return dict(openclaw_differences(records, explicitly_enabled))


def _set_enabled(args: argparse.Namespace, enabled: bool) -> int:
    """``gatewayd hooks enable|disable NAME``: write ``hooks.entries.<hookKey>.enabled``."""
    from gatewayd.config_edit import set_hook_enabled

    config = load_config_or_exit(args.config)
    record = _find(_build(config).records, args.name)
    path = config.paths.config_file
    verb = "enabled" if enabled else "disabled"
    try:
        changed = set_hook_enabled(
            path, record.hook_key, enabled, explicit=enabled and record.status == "disabled"
        )
    except ConfigError as exc:
        print_config_error(exc)
        raise UserError(
            f"{path} was left unchanged; fix the errors above first", EXIT_CONFIG
        ) from None
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc}") from None
    warnings = []
    env_name = f"GATEWAYD_HOOKS__ENTRIES__{record.hook_key}__ENABLED".upper()
    if any(name.upper() == env_name for name in os.environ):
        warnings.append(f"${env_name} is set and beats the file")
    if enabled and not record.eligible:
        missing = "; ".join(r for r in record.reasons if r != "disabled in config")
        warnings.append(f"{record.name} is enabled but cannot run here: {missing}")
    if args.json:
        dump_json(
            {
                "hook": record.name,
                "hookKey": record.hook_key,
                "enabled": enabled,
                "changed": changed,
                "file": str(path),
                "warnings": warnings,
            }
        )
    elif changed:
        say(f"{verb} hook {record.name} (hooks.entries.{record.hook_key}.enabled) in {path}")
        say("a running gatewayd picks this up on its own (or run: gatewayd reload)")
    else:
        say(f"hook {record.name} is already {verb} in {path}")
    for warning in warnings:
        say(f"warning: {warning}", file=sys.stderr)
    return 0


def cli_enable(args: argparse.Namespace) -> int:
    """``gatewayd hooks enable NAME``: enable a hook (by name or hookKey) in the config file."""
    return _set_enabled(args, True)


def cli_disable(args: argparse.Namespace) -> int:
    """``gatewayd hooks disable NAME``: disable a hook (by name or hookKey) in the config file."""
    return _set_enabled(args, False)
