"""The ``cfg`` an event carries, as each hook sees it: its own entry, nobody else's.

Every event's context carries ``cfg``, the effective config. Other hooks' settings and ``env``
(tokens, API keys) do not belong in it, yet hooks written for OpenClaw read their own entry from
``cfg["hooks"]["internal"]["entries"][<own key>]`` (or ``cfg["hooks"]["entries"][...]``). So:

* :func:`public_cfg` is the config every event is built with: each ``hooks.entries.<key>`` cut
  down to ``enabled`` and ``timeoutMs`` (no ``env``, none of the hook's own settings);
* :func:`hook_cfg` is what one hook's handler sees while it runs: the public config with that
  hook's own entry whole, at ``hooks.entries.<key>`` and ``hooks.internal.entries.<key>``.

The dispatcher puts the running handler's view into ``event.context["cfg"]`` before each call
(``Handler.cfg``); handlers registered in code see the public one. Views share every unchanged
part with the public config, so a view costs a few small dicts, built once per load.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PUBLIC_ENTRY_KEYS = ("enabled", "timeoutMs")


def public_cfg(effective: Mapping[str, Any]) -> dict[str, Any]:
    """``effective`` with every ``hooks.entries`` entry cut to ``enabled`` and ``timeoutMs``."""
    hooks = effective.get("hooks")
    if not isinstance(hooks, Mapping) or not isinstance(hooks.get("entries"), Mapping):
        return dict(effective)
    entries = {
        key: {k: entry[k] for k in PUBLIC_ENTRY_KEYS if k in entry}
        if isinstance(entry, Mapping)
        else entry
        for key, entry in hooks["entries"].items()
    }
    return {**effective, "hooks": {**hooks, "entries": entries}}


def hook_cfg(
    public: Mapping[str, Any], effective: Mapping[str, Any], hook_key: str
) -> dict[str, Any]:
    """What hook ``hook_key`` sees as ``cfg``: ``public`` plus its own whole entry."""
    hooks = effective.get("hooks")
    entries = hooks.get("entries") if isinstance(hooks, Mapping) else None
    own = entries.get(hook_key) if isinstance(entries, Mapping) else None
    if own is None:
        return dict(public)
    shown = public["hooks"]
    return {
        **public,
        "hooks": {
            **shown,
            "entries": {**shown["entries"], hook_key: own},
            "internal": {"entries": {hook_key: own}},
        },
    }
