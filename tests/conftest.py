"""The suite's fixtures come from :mod:`tests.support.fixtures` (``state_dir``, ``write_hook``,
``run_cli``, ``new_daemon``, ``start_daemon``, ``log_records``); subsystem-specific fixtures live
in each test directory's own ``conftest.py``. :mod:`tests.support.bytecode` byte-compiles the
package once before the run, so the daemons and CLI runs the tests start do not each compile it."""

pytest_plugins = ["tests.support.bytecode", "tests.support.fixtures"]
