"""JavaScript and TypeScript hooks, run by Node: finding a Node, its workers, their generations.

``resolve.py`` picks the Node (``hooks.node.path``, ``PATH``, the ``gatewayd[node]`` wheel);
``worker.mjs`` is the Node side; ``worker.py`` one worker process and its channel, ``output.py``
what reaches its stdout and stderr; ``imports.py`` importing hooks into a worker;
``generation.py`` the hooks of one load and their calls; ``runtime.py`` the generations and the
workers' supervision.
"""

from gatewayd.hooks.node.resolve import JS_SUFFIXES, NodeBinary, NodeChoice, choose
from gatewayd.hooks.node.runtime import Generation, NodeHook, NodeRuntime
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
