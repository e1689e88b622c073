"""gatewayd/jsonenc.py: :func:`dumps` (orjson) writes text that decodes to what
``json.JSONEncoder(default=str).encode`` writes, for any value (lone surrogates, integers past
64 bits, NaN and the infinities, keys that are not strings, values JSON has no form for, deep
nesting included), raises where json raises, and keeps working after a failed encode (control
replies, transcript lines, journal contexts and Redis entries go through it)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gatewayd.jsonenc import dumps, loads
from tests.journal.test_journal_records import values


def reference(value: Any, allow_nan: bool = True) -> str:
    return json.JSONEncoder(default=str, allow_nan=allow_nan).encode(value)


def canonical(text: str | bytes) -> str:
    """The text's value written one way (json's), so that two texts of one value compare equal:
    orjson and json write some floats differently (``1e-07``/``1e-7``) and space differently."""
    return json.dumps(loads(text), ensure_ascii=True)


@pytest.mark.slow
@pytest.mark.parametrize("allow_nan", [True, False])
@settings(max_examples=100, deadline=None)
@given(value=st.dictionaries(st.text(), values, max_size=6))
def test_it_writes_what_json_writes(allow_nan: bool, value: dict[str, Any]) -> None:
    try:
        expected = reference(value, allow_nan)
    except ValueError as exc:  # NaN or infinity with allow_nan=False
        with pytest.raises(ValueError, match=str(exc)):
            dumps(value, allow_nan=allow_nan)
        return
    text = dumps(value, allow_nan=allow_nan)
    assert canonical(text) == canonical(expected)
    text.decode("utf-8")  # strict: a lone surrogate is escaped, never written raw
    assert dumps(value, allow_nan=allow_nan, newline=True) == text + b"\n"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"s": "é\ud800"}, b'{"s":"\\u00e9\\ud800"}'),  # a lone surrogate: the line escaped
        ({"n": 2**70}, b'{"n":1180591620717411303424}'),  # past 64 bits: every digit kept
        ({"x": [math.nan, -math.inf]}, b'{"x":[NaN,-Infinity]}'),  # not null
        (
            {"k": {2: "a", None: "b", True: "c", 1.5: "d"}},
            b'{"k":{"2":"a","null":"b","true":"c","1.5":"d"}}',
        ),
        ({math.inf: 1}, b'{"Infinity":1}'),
        ({"é": "ü"}, '{"é":"ü"}'.encode()),  # raw UTF-8 when UTF-8 can carry it
    ],
)
def test_what_orjson_alone_writes_otherwise_is_written_as_json_writes_it(
    value: Any, text: bytes
) -> None:
    assert dumps(value) == text


def test_values_json_has_no_form_for_are_written_as_their_str() -> None:
    @dataclass
    class Point:
        x: int

    class Ratio(float):
        pass

    moment = datetime(2025, 1, 31, 9, 15, 2, tzinfo=UTC)
    value = {"p": Point(1), "t": moment, "set": {1}, "r": Ratio(0.5), "o": (1, "a")}
    assert loads(dumps(value)) == {
        "p": "test_values_json_has_no_form_for_are_written_as_their_str.<locals>.Point(x=1)",
        "t": "2025-01-31 09:15:02+00:00",
        "set": "{1}",
        "r": 0.5,
        "o": [1, "a"],
    }
    assert canonical(dumps(value)) == canonical(reference(value))


def test_deep_nesting_is_written_as_json_writes_it() -> None:
    deep: list[Any] = []
    inner = deep
    for _ in range(600):  # orjson stops at 254 levels
        inner.append([])
        inner = inner[0]
    assert dumps(deep) == reference(deep).encode()


def test_a_failed_encode_raises_what_json_raises_and_leaves_it_working() -> None:
    looped: dict[str, Any] = {"a": [1]}
    looped["self"] = looped
    with pytest.raises(ValueError, match="Circular reference"):
        dumps(looped)
    with pytest.raises(ValueError, match="not JSON compliant"):
        dumps({"x": [math.inf]}, allow_nan=False)

    class Broken:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    with pytest.raises(RuntimeError, match="no text"):
        dumps({"b": Broken()})
    with pytest.raises(TypeError, match="keys must be"):
        dumps({(1, 2): "a tuple key"})
    shared = [1, "é"]
    assert dumps({"x": shared, "y": shared}) == '{"x":[1,"é"],"y":[1,"é"]}'.encode()


def test_loads_makes_nesting_past_the_stack_a_value_error() -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        loads("[" * 100_000 + "]" * 100_000)
