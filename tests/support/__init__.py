"""The test suite's one harness: real gateways, the real CLI, a real control-socket client.

* :mod:`tests.support.inprocess`: :class:`~tests.support.inprocess.InProcess`, a real
  :class:`~gatewayd.server.Gateway` serving in the test's own event loop (the ``start_gateway``
  fixture): the default for what a daemon does between its start and its stop.
* :mod:`tests.support.state`: a test's state dir, the clean environment that points a child
  process at it, its config file, and ``wait_until`` (a generous bound, never a threshold).
* :mod:`tests.support.daemon`: :class:`~tests.support.daemon.Daemon`, a ``gatewayd run``
  subprocess with a test ``NOTIFY_SOCKET`` and its JSON log records: for what only a process
  shows (signals, exit codes, ``sd_notify``, fork guards, ``kill -9``, resource limits).
* :mod:`tests.support.control`: :class:`~tests.support.control.Control`, a JSON-lines client of
  the control socket, and :class:`~tests.support.control.AsyncControl`, the same awaited.
* :mod:`tests.support.cli`: :func:`~tests.support.cli.gatewayd`, ``python -m gatewayd ARGS`` as a
  subprocess, and the ``ok``/``refused`` outcome checks.
* :mod:`tests.support.hooks`: hook directories on disk, a recording handler, and bundled hooks
  loaded through the daemon's own importer.
* :mod:`tests.support.archives`: real ``.tar.gz``/``.zip`` archives and directory snapshots.
* :mod:`tests.support.fixtures`: the pytest fixtures built on these (registered suite-wide by
  ``tests/conftest.py``).
"""
