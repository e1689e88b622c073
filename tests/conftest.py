"""The suite's fixtures come from :mod:`tests.support.fixtures` (``state_dir``, ``write_hook``,
``run_cli``, ``new_daemon``, ``start_daemon``, ``log_records``); subsystem-specific fixtures live
in each test directory's own ``conftest.py``."""

pytest_plugins = ["tests.support.fixtures"]
