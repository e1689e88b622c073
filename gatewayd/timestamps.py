"""The one way gatewayd writes a point in time: ISO 8601, UTC, milliseconds, ``Z``.

``2025-01-31T09:15:02.347Z`` in session files, install records, ``status`` replies and the
bundled hooks' logs alike, so that every timestamp a user meets sorts and parses the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime


def iso_utc(when: datetime | float | None = None) -> str:
    """``when`` (an aware datetime, or seconds since the epoch; default now) as
    ``2025-01-31T09:15:02.347Z``."""
    if when is None:
        moment = datetime.now(UTC)
    elif isinstance(when, datetime):
        moment = when.astimezone(UTC)
    else:
        moment = datetime.fromtimestamp(when, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso_now() -> str:
    """Now as ``2025-01-31T09:15:02.347Z``."""
    return iso_utc()
