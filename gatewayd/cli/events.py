"""``gatewayd events list|show|retry|purge``: the trigger queue's journal, inspected and replayed.

With a daemon running, each command is one ``events`` request over the control socket (the
daemon owns the journal: a retried event is dispatched at once). With none, the commands open
``<state>/journal/events.db`` themselves (:mod:`gatewayd.journal.store`, the same queries): a
retried event is then made pending again and dispatched when gatewayd next starts.
"""

from __future__ import annotations

import argparse
import socket
import sqlite3
from typing import Any

from gatewayd.cli.common import dump_json
from gatewayd.client import QUICK_TIMEOUT_S, request, socket_path
from gatewayd.exits import UserError
from gatewayd.journal import inspection, requests, store
from gatewayd.paths import state_dir


def _daemon_socket(args: argparse.Namespace) -> str | None:
    """The control socket if a daemon listens on it, else None (work on the file)."""
    path = socket_path(getattr(args, "socket", None), getattr(args, "config", None))
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(2)
        probe.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        return None
    except OSError as exc:
        raise UserError(f"cannot connect to {path}: {exc.strerror or exc}") from None
    finally:
        probe.close()
    return path


def _offline(req: dict[str, Any]) -> dict[str, Any]:
    """Serve ``req`` from the journal file (no daemon running)."""
    action, args = requests.parse_request(req)
    path = store.journal_path(state_dir())
    if not path.exists():
        raise UserError(
            f"no journal at {path} and no gatewayd running: nothing to show "
            "(the journal is made by `gatewayd run` with gateway.queue.journal: sqlite)"
        )
    try:
        conn, epoch = store.connect(path, "full")
    except store.Damaged as exc:
        raise UserError(
            f"the journal {path} is damaged ({exc}); gatewayd run sets it aside"
        ) from None
    except sqlite3.Error as exc:
        raise UserError(f"cannot open the journal {path}: {exc}") from None
    try:
        if action == "list":
            return {
                "events": inspection.list_events(conn, epoch, **args),
                "journal": {"path": str(path)},
            }
        if action == "show":
            event = inspection.show_event(conn, epoch, args["id"])
            if event is None:
                raise ValueError(f"no event {args['id']} in the journal (done and compacted?)")
            return {"event": event}
        if action == "retry":
            rows = inspection.retry_dead(conn, epoch, args["ids"])
            return {"retried": [f"{epoch}-{row[0]}" for row in rows], "when": "next start"}
        return {"purged": inspection.purge(conn, epoch, args["ids"])}
    finally:
        conn.close()


def _run(args: argparse.Namespace, req: dict[str, Any]) -> dict[str, Any]:
    try:
        path = _daemon_socket(args)
        if path is None:
            return _offline(req)
        return request(path, {"op": "events", **req}, QUICK_TIMEOUT_S)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _letters(record: dict[str, Any]) -> str:
    return "; ".join(
        f"{d['hook']} failed {d['attempts']}x: {d['error']}"
        for d in record.get("deadLetters") or []
    )


def cli_list(args: argparse.Namespace) -> int:
    """``gatewayd events list [--state S] [--session KEY] [--limit N] [--json]``."""
    req: dict[str, Any] = {"action": "list", "state": args.state, "limit": args.limit}
    if args.session:
        req["sessionKey"] = args.session
    reply = _run(args, req)
    if args.json:
        dump_json(reply)
        return 0
    events = reply.get("events") or []
    for record in events:
        line = (
            f"{record['id']:<16} {record['state']:<8} {record['event']:<24} "
            f"{record['sessionKey']:<24} {record['timestamp']}"
        )
        print(f"{line}  {_letters(record)}".rstrip())
    print(f"{len(events)} event{'s' * (len(events) != 1)} ({args.state})")
    return 0


def cli_show(args: argparse.Namespace) -> int:
    """``gatewayd events show ID [--json]``."""
    event = _run(args, {"action": "show", "eventId": args.id})["event"]
    if args.json:
        dump_json(event)
        return 0
    for key in ("id", "event", "sessionKey", "timestamp", "state", "doneAt", "only"):
        if event.get(key) is not None:
            print(f"{key + ':':<11} {event[key]}")
    for letter in event.get("deadLetters") or []:
        print(
            f"dead:       {letter['hook']} after {letter['attempts']} attempts "
            f"({letter['at']}): {letter['error']}"
        )
    print("context:")
    dump_json(event.get("context") or {})
    return 0


def _ids_request(args: argparse.Namespace, action: str) -> dict[str, Any]:
    if args.all and args.ids:
        raise UserError(f"events {action}: give event ids or --all, not both")
    if not args.all and not args.ids:
        raise UserError(f"events {action}: give event ids, or --all for every dead letter")
    return {"action": action, "all": True} if args.all else {"action": action, "ids": args.ids}


def cli_retry(args: argparse.Namespace) -> int:
    """``gatewayd events retry ID... | --all``: dispatch dead letters again (failed hooks only)."""
    reply = _run(args, _ids_request(args, "retry"))
    if args.json:
        dump_json(reply)
        return 0
    retried = reply.get("retried") or []
    when = "when gatewayd next starts" if reply.get("when") else "now"
    print(f"retried {len(retried)} event{'s' * (len(retried) != 1)} ({when}): {' '.join(retried)}")
    return 0


def cli_purge(args: argparse.Namespace) -> int:
    """``gatewayd events purge ID... | --all``: delete dead-lettered and done events."""
    reply = _run(args, _ids_request(args, "purge"))
    if args.json:
        dump_json(reply)
        return 0
    purged = int(reply.get("purged") or 0)
    print(f"purged {purged} event{'s' * (purged != 1)}")
    return 0
