"""YAML reading with YAML 1.2 booleans, shared by the config loader and the HOOK.md parser.

PyYAML implements YAML 1.1, where ``on``, ``off``, ``yes``, ``no``, ``y`` and ``n`` are booleans:
``events: [on]`` or an env value ``FLAG: yes`` would silently turn into ``True``. The loader here
keeps only ``true``/``false`` as booleans (as YAML 1.2 and JSON do) and reads the rest as strings.
It is the C loader when libyaml is available (about 8x faster on a HOOK.md).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_Base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Yaml12Loader(_Base):  # type: ignore[valid-type,misc]
    """SafeLoader whose implicit booleans are only ``true`` and ``false``."""


Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in _Base.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    list("tTfF"),
)


class YamlError(ValueError):
    """A YAML document that does not parse; ``str()`` names the source, line and column."""


MAX_EXPANDED_NODES = 100_000
"""A document whose aliases expand to more nodes than this is refused (a "billion laughs")."""


def expanded_size(root: Any, limit: int) -> int | None:
    """How many nodes ``root`` holds with every alias expanded, counting shared sub-trees once
    per reference without expanding them; stops early past ``limit``. ``None`` for a
    structure that contains itself (a recursive alias), which has no finite expansion."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if not isinstance(node, dict | list):
            continue
        key = id(node)
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        if done:
            on_path.discard(key)
            total = 1 + sum(sizes.get(id(c), 1) for c in children)
            sizes[key] = min(total, limit + 1)
            continue
        if key in on_path:
            return None
        if key in sizes:
            continue
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children if isinstance(c, dict | list))
    return sizes.get(id(root), 1)


def load_yaml(text: str, source: str) -> Any:
    """Parse one YAML document; raise :class:`YamlError` naming ``source`` and the position.

    A document whose aliases (``*name``) expand past :data:`MAX_EXPANDED_NODES` nodes, or refer
    to themselves, is refused: what reads it afterwards (validation, ``config show``, a hook's
    ``cfg``) would expand every alias.
    """
    try:
        data = yaml.load(text, Loader=Yaml12Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = exc.problem or str(exc)
        context = f" ({exc.context})" if exc.context else ""
        raise YamlError(f"{where}: invalid YAML: {problem}{context}") from None
    except yaml.YAMLError as exc:
        raise YamlError(f"{source}: invalid YAML: {exc}") from None
    if "*" in text:  # no alias, no expansion to bound
        size = expanded_size(data, MAX_EXPANDED_NODES)
        if size is None:
            raise YamlError(
                f"{source}: refused: an alias refers to the node that contains it (a recursive "
                "structure); write the value out instead"
            )
        if size > MAX_EXPANDED_NODES:
            raise YamlError(
                f"{source}: refused: its aliases (*name) expand to more than "
                f"{MAX_EXPANDED_NODES} nodes; write the values out instead of nesting aliases"
            )
    return data
