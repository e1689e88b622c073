"""``gatewayd hooks new|install|uninstall``: the command line of authoring and installing hooks.

The work is done by :mod:`gatewayd.authoring` (scaffolding) and :mod:`gatewayd.install`
(installing and uninstalling); this module loads the config, calls them and prints what
happened. None of these commands talks to a running daemon: it notices the new files (or the
edited config) and reloads by itself.

Exit codes: 0 done, 1 refused (``error: ...`` on stderr, with one indented line per problem when
there are several; nothing was written), 78 when the config cannot be read.
"""

from __future__ import annotations

import argparse
import os
import sys

from gatewayd.authoring import GUIDE, AuthoringError, parse_events, scaffold
from gatewayd.cli.common import dump_json, load_config_or_exit
from gatewayd.config import Config, ConfigError
from gatewayd.exits import EXIT_CONFIG, UserError, print_config_error
from gatewayd.hookpack import InstallError
from gatewayd.hooks.eligibility import EligibilityChecker
from gatewayd.install import Installed, InstallPlan, install, uninstall


def _refused(what: str, problems: list[str], nothing: str) -> int:
    """Print why: one problem as ``error: <problem>``, several as a summary line and one
    indented line each. Returns the exit code, 1."""
    if len(problems) == 1:
        print(f"error: {problems[0]} ({nothing})", file=sys.stderr)
        return 1
    print(f"error: {what}: {len(problems)} problems ({nothing}):", file=sys.stderr)
    for problem in problems:
        print(f"  - {problem}", file=sys.stderr)
    return 1


_HANDLER_LINES = {
    "py": "handler.py  async def handler(event, ctx): the code",
    "ts": "handler.ts  export default async function handler(event): the code, run by Node",
    "js": "handler.js  export default async function handler(event): the code, run by Node",
}


def cli_new(args: argparse.Namespace) -> int:
    """``gatewayd hooks new NAME [--lang py|ts|js] [--events KEYS] [--command] [--description
    TEXT]``."""
    config = load_config_or_exit(args.config)
    try:
        events = parse_events(args.events or [])
        made = scaffold(
            config,
            args.name,
            events,
            command=args.command_hook,
            description=args.description,
            lang=args.lang,
        )
    except AuthoringError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        target = config.paths.managed_hooks / args.name
        raise UserError(f"cannot write {target}: {exc.strerror or exc}") from None
    if args.json:
        dump_json(
            {
                "name": made.name,
                "path": str(made.path),
                "files": list(made.files),
                "events": list(made.events),
                "command": made.command,
                "lang": made.lang,
            }
        )
        return 0
    handler = (
        "handler     an executable script: the event JSON on stdin, reply lines on stdout"
        if made.command
        else _HANDLER_LINES[made.lang]
    )
    print(f"created hook {made.name} in {made.path}")
    print(f"  HOOK.md     its name, description and events ({', '.join(made.events)})")
    print(f"  {handler}")
    print("a running gatewayd loads it as soon as it appears; try it:")
    first = made.events[0]
    if first.startswith("command:"):
        print(f"  gatewayd send /{first.partition(':')[2]} --session test")
    elif first not in ("*",) and ":" in first:
        print(f"  gatewayd trigger {first} --session test")
    print(f"  gatewayd hooks info {made.name}")
    print(f"guide: {GUIDE}")
    return 0


def _eligibility_notes(config: Config, plan: InstallPlan) -> list[str]:
    spec = config.load_spec()
    checker = EligibilityChecker(spec.effective_config)
    notes = []
    for hook in plan.source.hooks:
        check = checker.check(hook.manifest, spec.entry(hook.manifest.hook_key))
        if not check.eligible:
            notes.append(
                f"{hook.name} cannot run here yet: {'; '.join(check.reasons)} "
                f"(gatewayd hooks info {hook.name})"
            )
    return notes


def _installed_line(item: Installed, config: Config) -> str:
    if item.kind == "link":
        line = f"linked {item.name}: {item.path} (through hooks.load.extraDirs in "
        line += f"{config.paths.config_file})"
    else:
        line = f"installed {item.name}: {item.path}"
    line += f" sha256:{item.sha256[:12]}"
    if item.replaced:
        line += f"; replaced {item.replaced}"
    return line


def cli_install(args: argparse.Namespace) -> int:
    """``gatewayd hooks install PATH|ARCHIVE [--link] [--force]``."""
    config = load_config_or_exit(args.config)
    try:
        plan, installed = install(config, args.source, link=args.link, force=args.force)
    except InstallError as exc:
        return _refused(f"cannot install {args.source}", exc.problems, "nothing was installed")
    except ConfigError as exc:
        print_config_error(exc)
        raise UserError(
            f"{config.paths.config_file} was left unchanged and nothing was installed; "
            "fix it first",
            EXIT_CONFIG,
        ) from None
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        raise UserError(
            f"cannot install {args.source}:{where} {exc.strerror or exc} (rolled back)"
        ) from None
    notes = [*plan.notes, *_eligibility_notes(config, plan)]
    if args.json:
        records = [
            {
                "name": item.name,
                "kind": item.kind,
                "path": str(item.path),
                "sha256": item.sha256,
                "replaced": item.replaced,
            }
            for item in installed
        ]
        dump_json({"installed": records, "notes": notes})
    for item in [] if args.json else installed:
        print(_installed_line(item, config))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    overridden = [n for n in os.environ if n.upper() == "GATEWAYD_HOOKS__LOAD__EXTRA_DIRS"]
    if args.link and overridden:
        print(
            f"warning: ${overridden[0]} is set and beats the config file: the link takes "
            "effect once it is unset (or lists the directory too)",
            file=sys.stderr,
        )
    if not args.json:
        it, it_is = ("it", "it is") if len(installed) == 1 else ("them", "they are")
        print(
            f"a running gatewayd loads {it} by itself; gatewayd hooks check shows if {it_is} ready"
        )
    return 0


def cli_uninstall(args: argparse.Namespace) -> int:
    """``gatewayd hooks uninstall NAME... [--force]``."""
    config = load_config_or_exit(args.config)
    try:
        removed = uninstall(config, list(args.names), force=args.force)
    except InstallError as exc:
        return _refused("cannot uninstall", exc.problems, "nothing was removed")
    except ConfigError as exc:
        print_config_error(exc)
        raise UserError(
            f"{config.paths.config_file} could not be edited; fix it first", EXIT_CONFIG
        ) from None
    except OSError as exc:
        raise UserError(f"cannot uninstall: {exc.filename or ''} {exc.strerror or exc}") from None
    if args.json:
        dump_json(
            {
                "uninstalled": [
                    {"name": item.name, "kind": item.kind, "removed": item.removed}
                    for item in removed
                ]
            }
        )
        return 0
    for item in removed:
        print(f"uninstalled {item.name} ({item.kind}): {item.removed}")
    return 0
