"""The ``gatewayd`` command line, on top of everything else (``gatewayd.cli:main``).

Nothing outside this package imports it; it imports the rest of gatewayd, each command's module
only when that command runs:

* :mod:`~gatewayd.cli.app`: ``main`` and the table from command to handler;
* :mod:`~gatewayd.cli.parser`: the argparse tree (every command, flag and help text);
* :mod:`~gatewayd.cli.run`: ``run`` (the daemon, :mod:`gatewayd.server`);
* :mod:`~gatewayd.cli.remote`: ``send``, ``trigger``, ``status``, ``reload``, ``bootstrap``
  (over the control socket, :mod:`gatewayd.client`);
* :mod:`~gatewayd.cli.hooks`: ``hooks list|info|check|enable|disable``;
* :mod:`~gatewayd.cli.authoring`: ``hooks new|install|uninstall``;
* :mod:`~gatewayd.cli.config`: ``config show|check``;
* :mod:`~gatewayd.cli.events`: ``events list|show|retry|purge`` (the trigger journal);
* :mod:`~gatewayd.cli.service`: ``install-service``;
* :mod:`~gatewayd.cli.completion`: ``completion bash|zsh``, generated from the parser;
* :mod:`~gatewayd.cli.tracing`: printing the ``--trace`` report of ``send`` and ``trigger``;
* :mod:`~gatewayd.cli.common`: config loading (exit 78) and JSON output they share.
"""

from gatewayd.cli.app import main

__all__ = ["main"]
