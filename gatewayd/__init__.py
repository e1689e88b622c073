"""gatewayd: the Eliza event-hook gateway daemon."""

__version__ = "0.1.0"
