"""gatewayd/jsonenc.py: an encoder built once writes exactly what ``json.JSONEncoder(...,
default=str).encode`` writes with the same options, raises where it raises, and keeps working
after a failed encode (transcript lines, control replies and journal contexts go through it)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gatewayd.jsonenc import encoder
from tests.journal.test_journal_records import values

OPTIONS: list[dict[str, Any]] = [
    {"ensure_ascii": False},  # transcript lines
    {"ensure_ascii": True},  # transcript lines UTF-8 cannot carry
    {"ensure_ascii": False, "allow_nan": False},  # control replies
    {"ensure_ascii": True, "separators": (",", ":")},  # journal contexts
]


def reference(options: dict[str, Any]) -> Any:
    return json.JSONEncoder(default=str, **options).encode


@pytest.mark.slow
@pytest.mark.parametrize("options", OPTIONS)
@settings(max_examples=150, deadline=None)
@given(value=st.dictionaries(st.text(), values, max_size=6))
def test_it_writes_what_json_writes(options: dict[str, Any], value: dict[str, Any]) -> None:
    try:
        expected = reference(options)(value)
    except ValueError as exc:  # NaN or infinity with allow_nan=False
        with pytest.raises(ValueError, match=str(exc)):
            encoder(**options)(value)
        return
    assert encoder(**options)(value) == expected


def test_a_failed_encode_leaves_it_working() -> None:
    encode = encoder(ensure_ascii=False, allow_nan=False)
    looped: dict[str, Any] = {"a": [1]}
    looped["self"] = looped
    with pytest.raises(ValueError, match="Circular reference"):
        encode(looped)
    with pytest.raises(ValueError, match="not JSON compliant"):
        encode({"x": [math.inf]})
    shared = [1, "é"]
    assert encode({"x": shared, "y": shared}) == '{"x": [1, "é"], "y": [1, "é"]}'
