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


def load_yaml(text: str, source: str) -> Any:
    """Parse one YAML document; raise :class:`YamlError` naming ``source`` and the position."""
    try:
        return yaml.load(text, Loader=Yaml12Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = exc.problem or str(exc)
        context = f" ({exc.context})" if exc.context else ""
        raise YamlError(f"{where}: invalid YAML: {problem}{context}") from None
    except yaml.YAMLError as exc:
        raise YamlError(f"{source}: invalid YAML: {exc}") from None
