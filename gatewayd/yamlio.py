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


_INT_LIMIT = 10**1000
"""Integers from this size on are refused: no setting takes one, and from 4,300 digits on
Python can neither read one (``ValueError``) nor print one (a hex literal reads fine)."""


def _construct_int(loader: Any, node: yaml.ScalarNode) -> int:
    """PyYAML's int, refused with its position past 1,000 digits."""
    try:
        value: int = yaml.constructor.SafeConstructor.construct_yaml_int(loader, node)
    except ValueError:  # more digits than int() reads, or no integer at all (!!int x)
        if len(node.value) < 1000:
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value!r} is not an integer", node.start_mark
            ) from None
        value = _INT_LIMIT
    if -_INT_LIMIT < value < _INT_LIMIT:
        return value
    raise yaml.constructor.ConstructorError(
        None, None, "an integer of more than 1000 digits: write a smaller number", node.start_mark
    )


def _construct_timestamp(loader: Any, node: yaml.ScalarNode) -> Any:
    """PyYAML's date or datetime, refused with its position when no such day or time exists
    (``2024-02-30``: PyYAML's own ``ValueError`` carries no position)."""
    try:
        return yaml.constructor.SafeConstructor.construct_yaml_timestamp(loader, node)
    except ValueError as exc:
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"{node.value!r} is not a valid date or time ({exc}); quote it to keep it as text",
            node.start_mark,
        ) from None


def _duplicate(key_node: yaml.Node, first: yaml.Node) -> yaml.constructor.ConstructorError:
    return yaml.constructor.ConstructorError(
        None,
        None,
        f"duplicate key {key_node.value!r} (first on line {first.start_mark.line + 1}): the "
        "later one would silently replace the earlier; keep one (merge the two)",
        key_node.start_mark,
    )


def _construct_mapping(loader: Any, node: yaml.MappingNode, deep: bool = False) -> Any:
    """PyYAML's mapping, refused with its position when a key is written twice. PyYAML keeps
    the last one without a word: a second ``hooks:`` section would drop the first (js-yaml,
    which reads OpenClaw's HOOK.md files, refuses it too). Keys a merge (``<<``) brings in may
    still be overridden: only the keys written in the mapping itself are compared."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag not in _SPECIAL_KEYS:
                key = (key_node.tag, key_node.value)
                if key in seen:
                    raise _duplicate(key_node, seen[key])
                seen[key] = key_node
    return yaml.constructor.SafeConstructor.construct_mapping(loader, node, deep)


Yaml12Loader.construct_mapping = _construct_mapping
Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
Yaml12Loader.add_constructor("tag:yaml.org,2002:timestamp", _construct_timestamp)


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


_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_SPECIAL_KEYS = frozenset({"tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})
_SCALARS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float", "binary", "timestamp")
)
"""Scalar tags whose safe constructor is a plain function of the node (not a generator)."""


class _NotPlain(Exception):
    """A node the plain construction leaves to PyYAML's constructor."""


def _plain(loader: Any, node: yaml.Node) -> Any:
    """What PyYAML's safe constructor builds from ``node``, for a plain document: maps, lists
    and scalars of the standard tags, no merge (``<<``) or value (``=``) keys. Anything else
    raises :class:`_NotPlain`.

    PyYAML's constructor spends ~17 us on a typical HOOK.md frontmatter (15 nodes: a generator
    per collection, a memo, the deep/shallow bookkeeping aliases need); this walk takes ~4 us,
    ~13 ms of a cold load of 1,000 hooks. Scalars other
    than strings go through PyYAML's own constructor functions, so ints, floats and timestamps
    read exactly as before.
    """
    kind = node.__class__
    tag = node.tag
    if kind is yaml.ScalarNode:
        if tag == _STR:
            return node.value
        if tag not in _SCALARS:
            raise _NotPlain
        return loader.yaml_constructors[tag](loader, node)
    if kind is yaml.MappingNode and tag == _MAP:
        mapping = {}
        keys: dict[Any, yaml.Node] = {}
        for key_node, value_node in node.value:
            if key_node.__class__ is not yaml.ScalarNode or key_node.tag in _SPECIAL_KEYS:
                raise _NotPlain
            key = _plain(loader, key_node)
            if key in keys:  # as _construct_mapping refuses it
                raise _duplicate(key_node, keys[key])
            keys[key] = key_node
            mapping[key] = _plain(loader, value_node)
        return mapping
    if kind is yaml.SequenceNode and tag == _SEQ:
        return [_plain(loader, item) for item in node.value]
    raise _NotPlain


def _load(text: str) -> Any:
    """``yaml.load(text, Loader=Yaml12Loader)``, built by :func:`_plain` when the document is
    plain and has no alias (``*``: an aliased node is one object in PyYAML's result, and may
    contain itself)."""
    loader = Yaml12Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if "*" not in text:
            try:
                return _plain(loader, node)
            except _NotPlain:
                pass
        return loader.construct_document(node)
    finally:
        loader.dispose()


def load_yaml(text: str, source: str) -> Any:
    """Parse one YAML document; raise :class:`YamlError` naming ``source`` and the position.

    A document whose aliases (``*name``) expand past :data:`MAX_EXPANDED_NODES` nodes, or refer
    to themselves, is refused: what reads it afterwards (validation, ``config show``, a hook's
    ``cfg``) would expand every alias. So is one nested deeper than Python's recursion limit
    lets it be built (libyaml itself stops at 1,000 levels; a few hundred already reach it).
    """
    try:
        data = _load(text)
    except RecursionError:
        raise YamlError(
            f"{source}: refused: its lists and mappings are nested too deeply to read; "
            "write flatter YAML (a few levels deep)"
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = exc.problem or str(exc)
        context = f" ({exc.context})" if exc.context else ""
        raise YamlError(f"{where}: invalid YAML: {problem}{context}") from None
    except yaml.YAMLError as exc:
        raise YamlError(f"{source}: invalid YAML: {exc}") from None
    except (ValueError, KeyError, AttributeError, TypeError) as exc:
        # An explicit tag on a value it cannot build (!!float x, !!bool x, !!timestamp x):
        # PyYAML's constructors raise these, without a position.
        raise YamlError(
            f"{source}: invalid YAML: a value its !!tag cannot build "
            f"({type(exc).__name__}: {exc}); drop the tag or fix the value"
        ) from None
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
