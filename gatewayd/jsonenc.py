"""JSON encoders built once, for text encoded on every message (transcript lines, replies), and
:func:`loads` for JSON read back from files and Redis.

``json.JSONEncoder.encode`` builds a new C encoder on every call, about half the cost of
encoding a transcript line or a reply (timeit: 1.7 -> 0.8 us a line; five a ``message``, issue
18). :func:`encoder` builds it once, with the same output.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any

Encode = Callable[[Any], str]


def encoder(
    *, ensure_ascii: bool, allow_nan: bool = True, separators: tuple[str, str] = (", ", ": ")
) -> Encode:
    """``json.JSONEncoder(ensure_ascii=..., allow_nan=..., separators=..., default=str).encode``,
    with its C encoder made once. Values JSON has no form for are written as their ``str()``; a
    value that contains itself raises ``ValueError``. Use one per thread: the encoder's
    cycle-detection table is not to be shared between threads."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator (another Python implementation)
        return json.JSONEncoder(
            ensure_ascii=ensure_ascii, allow_nan=allow_nan, separators=separators, default=str
        ).encode
    item_separator, key_separator = separators
    strings = (
        json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    )
    markers: dict[int, Any] = {}
    c_encoder = make(
        markers, str, strings, None, key_separator, item_separator, False, False, allow_nan
    )

    def encode(value: Any) -> str:
        try:
            return "".join(c_encoder(value, 0))
        except BaseException:
            markers.clear()  # what the failed call left, so the next one starts clean
            raise

    return encode


def loads(data: bytes | str) -> Any:
    """``json.loads``, with JSON nested past the stack (1,000 lists deep) a ``ValueError`` like
    any other text that is not what was written: its ``RecursionError`` once stopped every start
    (``sessions.json``) and ended the task reading a Redis stream (an entry written by hand)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
