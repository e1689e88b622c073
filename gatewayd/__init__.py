"""gatewayd: the Eliza event-hook gateway daemon."""

import time as _time

__version__ = "0.1.0"
STARTED = _time.monotonic()
"""When this process imported gatewayd (its start, less the interpreter's own ~30 ms): a
restart in place is expected to take as long as this run took from here to READY."""
