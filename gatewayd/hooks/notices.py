"""What the loader tells a user about a hook that will not run, in words that say what to do.

Three cases that used to be silent, each worded here once:

* a hook that subscribes to nothing (``skipped``): the reason says where events are read from,
  so a HOOK.md with its metadata under a namespace gatewayd does not read is not a mystery;
* an opt-in hook (``enabled: false`` in its HOOK.md, as OpenClaw hook packs ship some) stays
  ``disabled`` until the config enables it: the reason names the command and the key;
* a bundled hook shadowed by a same-name hook that cannot run (its HOOK.md is broken, or it has
  no handler): neither runs, so the winner carries a warning naming both paths.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from gatewayd.hooks.discovery import FoundHook
    from gatewayd.hooks.metadata import HookManifest


class _Record(Protocol):
    name: str
    status: str
    reasons: list[str]


R = TypeVar("R", bound=_Record)


def no_events_reason(manifest: HookManifest) -> str:
    """Why a hook with an empty ``events`` list is skipped, and where to put them."""
    where = f"metadata.{manifest.namespace or 'eliza'}.events"
    if manifest.hermes:
        where = "events"
    return f"no events: it subscribes to nothing, so its code is never loaded (add {where})"


def opt_in_reason(hook_key: str) -> str:
    """Why an opt-in hook is off, and how to turn it on."""
    return (
        "off by default (enabled: false in its HOOK.md): turn it on with "
        f"`gatewayd hooks enable {hook_key}` (hooks.entries.{hook_key}.enabled: true)"
    )


def shadowing_warnings(hooks: Sequence[FoundHook], records: Sequence[R]) -> list[tuple[R, str]]:
    """``(record, warning)`` for every hook that shadows a bundled hook but cannot run itself.

    ``records`` are the loader's records of ``hooks``, in the same order.
    """
    bundled = {
        hook.name: hook
        for hook in hooks
        if hook.root.source == "bundled" and hook.shadowed_by and hook.manifest is not None
    }
    found: list[tuple[R, str]] = []
    for hook, record in zip(hooks, records, strict=False):
        original = bundled.get(hook.name)
        if original is None or hook.shadowed_by or hook.root.source == "bundled":
            continue
        if hook.manifest is None:
            why = "its HOOK.md is invalid (" + "; ".join(hook.errors[:1]) + ")"
        elif hook.handler is None:
            why = "it has no handler"
        elif record.status == "failed":
            why = "it failed to load (" + "; ".join(record.reasons[:1]) + ")"
        else:
            continue
        found.append(
            (
                record,
                f"shadows the bundled hook {hook.name!r} at {original.path}, but {why}: neither "
                f"runs. Fix or remove {hook.path} to get the bundled hook back",
            )
        )
    return found
