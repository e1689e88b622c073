"""The journal's context encoder (gatewayd/journal/records.py) writes text that decodes to what
``json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), default=str).encode`` writes, for
any value a context may hold, and a failed encode leaves it working."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gatewayd.journal.records import context_json, make_encoder, reference_encoder


class Opaque:
    """A value JSON has no form for: written as its str()."""

    def __str__(self) -> str:
        return "opaque!"


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF)),
    st.builds(Opaque),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(), st.integers(), st.booleans()), inner, max_size=4),
    ),
    max_leaves=20,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(), values, max_size=6))
def test_the_fast_encoder_writes_what_the_reference_writes(context: dict[str, Any]) -> None:
    # One value, written one way: the two write some floats differently (1e-07, 1e-7).
    def canonical(text: str) -> str:
        return json.dumps(json.loads(text))

    assert canonical(make_encoder()(context)) == canonical(reference_encoder()(context))


def test_a_cycle_raises_and_the_encoder_keeps_working() -> None:
    encode = make_encoder()
    looped: dict[str, Any] = {"a": [1, 2]}
    looped["self"] = looped
    with pytest.raises(ValueError, match="Circular reference"):
        encode(looped)
    shared = [1, 2]
    assert encode({"x": shared, "y": shared}) == '{"x":[1,2],"y":[1,2]}'  # not a cycle
    assert encode({"nan": math.nan, "s": "\ud800"}) == '{"nan":NaN,"s":"\\ud800"}'


def test_the_base_keys_the_gateway_owns_are_left_out() -> None:
    cfg = {"token": "x"}
    base = {"cfg": cfg, "workspaceDir": "/w"}
    encode = make_encoder()
    own = {"content": "hi", "cfg": cfg, "workspaceDir": "/w", "gateway": object()}
    assert context_json(own, base, encode) == '{"content":"hi"}'
    # A cfg that is not the gateway's own object (a hook replaced it) is the event's own.
    assert context_json({"cfg": {"a": 1}}, base, encode) == '{"cfg":{"a":1}}'
