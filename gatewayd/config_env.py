"""``GATEWAYD_*`` variables: which config key each one sets, and errors that name the variable.

A variable is ``GATEWAYD_`` plus the key path with ``__`` between levels, each name in snake
case or run together, in any case: ``GATEWAYD_GATEWAY__QUEUE__CAPACITY`` and
``GATEWAYD_gateway__queue__capacity`` both set ``gateway.queue.capacity``. Lists, maps and whole
sections are JSON. pydantic-settings reads them; this module only explains what went wrong in
terms of the variable the user set: ``GATEWAYD_GATEWAY__QUEUE__CAPACITY='abc':
gateway.queue.capacity: ... (expected an integer, e.g. GATEWAYD_GATEWAY__QUEUE__CAPACITY=1024)``.
"""

from __future__ import annotations

import difflib
import json
import os
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel

from gatewayd.redact import is_secret_key

ENV_PREFIX = "GATEWAYD_"
NOT_KEYS = frozenset({"GATEWAYD_CONFIG"})
"""``GATEWAYD_`` variables that are not config keys."""


def may_be_secret(path: Sequence[Any]) -> bool:
    """True when the key at ``path`` may hold a secret (an ``env`` map or a secret-looking
    name): errors then never echo its value."""
    return any(_norm(str(part)) == "env" or is_secret_key(part) for part in path)


def _norm(name: str) -> str:
    return name.replace("_", "").replace("-", "").lower()


def env_vars(environ: Mapping[str, str] | None = None) -> dict[str, tuple[str, ...]]:
    """Every ``GATEWAYD_`` variable that may set a config key -> its key path as written."""
    env = os.environ if environ is None else environ
    found = {}
    for name in env:
        if name.upper().startswith(ENV_PREFIX) and name.upper() not in NOT_KEYS:
            parts = tuple(name[len(ENV_PREFIX) :].split("__"))
            if all(parts):
                found[name] = parts
    return found


def _unwrap(annotation: Any) -> tuple[Any, bool]:
    """``(annotation without None or validators, whether None is allowed)``."""
    nullable = False
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        nullable = len(args) < len(typing.get_args(annotation))
        annotation = args[0] if len(args) == 1 else annotation
    if typing.get_origin(annotation) is Annotated:  # ConfigPath: a Path with a check
        annotation = typing.get_args(annotation)[0]
    return annotation, nullable


def field_at(model: type[BaseModel], path: Sequence[Any]) -> tuple[Any, list[str]] | None:
    """The annotation of the key at ``path`` (names matched as variables match them) and the
    path spelled as in the config file; None when no key is there."""
    annotation: Any = model
    spelled: list[str] = []
    for part in path:
        annotation, _ = _unwrap(annotation)
        origin = typing.get_origin(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            for name, info in annotation.model_fields.items():
                if _norm(str(part)) in (_norm(name), _norm(info.alias or name)):
                    annotation = info.annotation
                    spelled.append(info.alias or name)
                    break
            else:
                return None
        elif origin is dict:
            annotation = typing.get_args(annotation)[1]
            spelled.append(str(part))
        elif origin is list and isinstance(part, int):
            annotation = typing.get_args(annotation)[0]
            spelled[-1] += f"[{part}]"
        else:
            return None
    return annotation, spelled


def _is_complex(annotation: Any) -> bool:
    inner, _ = _unwrap(annotation)
    origin = typing.get_origin(inner) or inner
    return origin in (list, dict, tuple) or (
        isinstance(inner, type) and issubclass(inner, BaseModel)
    )


def expected_form(annotation: Any, var: str) -> str:
    """What the variable should hold, with an example: ``an integer, e.g. VAR=1024``."""
    inner, nullable = _unwrap(annotation)
    origin = typing.get_origin(inner) or inner
    if inner is bool:
        form = f"true or false, e.g. {var}=false"
    elif inner is int:
        form = f"an integer, e.g. {var}=1024"
    elif origin is Literal:
        choices = [str(c) for c in typing.get_args(inner)]
        form = f"one of {', '.join(choices)}, e.g. {var}={choices[0]}"
    elif inner is Path:
        form = f"a path, e.g. {var}=/srv/gatewayd"
    elif origin in (list, tuple):
        form = f"""a JSON list, e.g. {var}='["one", "two"]'"""
    elif origin is dict or (isinstance(inner, type) and issubclass(inner, BaseModel)):
        form = f"""a JSON object, e.g. {var}='{{"key": "value"}}'"""
    else:
        form = f"text, e.g. {var}=value"
    return form + (f" (or {var}=null for the default)" if nullable else "")


def unknown_sections(model: type[BaseModel], environ: Mapping[str, str] | None = None) -> list[str]:
    """``GATEWAYD_<SECTION>__...`` variables whose section is none of the config's.

    pydantic-settings reads a variable only for a section it has, so a misspelt section
    (``GATEWAYD_HOOK__TIMEOUT_MS``) would be ignored without a word, where an unknown key inside
    a known section is refused. A variable without ``__`` is left alone: it may be another
    program's (``GATEWAYD_REDIS_PASSWORD`` is gatewayd's own, read where it is used)."""
    sections = {_norm(name): name for name in model.model_fields}
    problems = []
    for var, parts in sorted(env_vars(environ).items()):
        if len(parts) < 2 or _norm(parts[0]) in sections:
            continue
        close = difflib.get_close_matches(_norm(parts[0]), list(sections), n=1)
        hint = f"; did you mean GATEWAYD_{sections[close[0]].upper()}__...?" if close else ""
        problems.append(
            f"{var}: {parts[0]!r} is no config section (the sections: "
            f"{', '.join(sorted(sections.values()))}){hint}"
        )
    return problems


def json_problems(model: type[BaseModel], environ: Mapping[str, str] | None = None) -> list[str]:
    """The variables for lists, maps and sections whose value is not JSON of that shape."""
    env = os.environ if environ is None else environ
    problems = []
    for var, parts in sorted(env_vars(env).items()):
        found = field_at(model, parts)
        if found is None or not _is_complex(found[0]):
            continue
        value = env[var]
        shown = "(value not shown)" if may_be_secret(parts) else repr(value)
        try:
            data = json.loads(value)
        except ValueError:
            data = _INVALID
        except RecursionError:  # json.loads on 1000 nested lists: past the stack, not a value
            problems.append(
                f"{var}: {'.'.join(found[1])} is JSON nested too deeply to read; write it "
                "flatter (a few levels deep)"
            )
            continue
        inner, nullable = _unwrap(found[0])
        origin = typing.get_origin(inner) or inner
        want: tuple[type, ...] = (list,) if origin in (list, tuple) else (dict,)
        if not isinstance(data, want) and not (data is None and nullable):
            problems.append(
                f"{var}={shown}: {'.'.join(found[1])} takes {expected_form(found[0], var)}"
            )
    return problems


_INVALID = object()


def variable_for(
    loc: Sequence[Any], environ: Mapping[str, str] | None = None
) -> tuple[str, int] | None:
    """The variable that set the key at ``loc`` (or a section holding it), and how many parts
    of ``loc`` it names; the most specific one when several match."""
    best: tuple[str, int] | None = None
    for var, parts in env_vars(environ).items():
        matches = len(parts) <= len(loc) and all(
            _norm(p) == _norm(str(loc[i])) for i, p in enumerate(parts)
        )
        if matches and (best is None or len(parts) > best[1]):
            best = (var, len(parts))
    return best
