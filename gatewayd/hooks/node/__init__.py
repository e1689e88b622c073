"""JavaScript and TypeScript hooks, run by Node: finding a Node, its workers, their generations.

``resolve.py`` picks the Node (``hooks.node.path``, ``PATH``, the ``gatewayd[node]`` wheel);
``worker.mjs`` is the Node side; ``worker.py`` one worker process, ``channel.py`` the channel to
it, ``output.py`` what reaches its stdout and stderr; ``pool.py`` the workers of the daemon
(started, a spare, checked for a hang); ``hook.py`` one JS/TS hook and what its reply does;
``imports.py`` importing hooks into a worker; ``generation.py`` the hooks of one load and their
calls; ``runtime.py`` the generations: loaded, activated, retired, restarted.
"""

from gatewayd.hooks.node.generation import Generation
from gatewayd.hooks.node.hook import NodeHook
from gatewayd.hooks.node.resolve import JS_SUFFIXES, NodeBinary, NodeChoice, choose
from gatewayd.hooks.node.runtime import NodeRuntime
from gatewayd.hooks.node.worker import NodeWorker, WorkerGone

__all__ = [
    "JS_SUFFIXES",
    "Generation",
    "NodeBinary",
    "NodeChoice",
    "NodeHook",
    "NodeRuntime",
    "NodeWorker",
    "WorkerGone",
    "choose",
]
