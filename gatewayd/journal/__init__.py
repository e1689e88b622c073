"""The trigger queue's journal: the record of accepted events until all their handlers finished.

The :class:`gatewayd.triggers.TriggerQueue` hands every event it accepts to a journal
(:class:`gatewayd.journal.base.Journal`). The journal makes the event durable and then
*delivers* it back to the queue's lanes, in append order, through the ``deliver`` callback it
was bound to; the poster is told "accepted" only then.
When every handler of an event has finished, the dispatcher reports it ``done`` (or ``dead``, with
the handlers that exhausted their retries) and the journal forgets it (keeping the newest
``gateway.queue.retainDone`` done events for inspection, and dead letters until purged).
On start, :meth:`Journal.open` returns what was accepted and never finished, in order: the
queue dispatches it before anything new.

Backends (``gateway.queue.journal``):

``sqlite``  (default) ``<state>/journal/events.db``, SQLite in WAL mode with group commit
            (:mod:`gatewayd.journal.sqlite`);
``memory``  today's in-memory queue, nothing survives the process
            (:mod:`gatewayd.journal.memory`).

``redis``   (``gateway.queue.backend: redis``) Redis Streams shared by many instances
            (:mod:`gatewayd.journal.redis_queue`).

Every backend implements the same class: ``append`` returns
a :class:`Commit` the poster awaits, ``deliver`` is called with committed items in order (for a
shared stream: the items this instance owns), ``done``/``dead`` acknowledge, ``open`` recovers,
``query`` serves ``gatewayd events``. Items carry a backend-defined ``seq`` (an int; 0 means
"not journaled", as for ``gateway:*`` lifecycle events, which are never replayed).

Modules: :mod:`~gatewayd.journal.base` (the interface), :mod:`~gatewayd.journal.backends`
(:func:`~gatewayd.journal.backends.make_journal`: the backend the config names),
:mod:`~gatewayd.journal.sqlite` and :mod:`~gatewayd.journal.memory` (the backends); the SQLite
journal's parts: :mod:`~gatewayd.journal.group` (its group commit on the event loop),
:mod:`~gatewayd.journal.writer` and :mod:`~gatewayd.journal.writes` (the writer process that
commits, and what one of its writes is), :mod:`~gatewayd.journal.thread` (the thread that opens,
queries, checkpoints and closes the file), :mod:`~gatewayd.journal.store` (the file: schema,
opening, writing, recovery; stdlib only) and :mod:`~gatewayd.journal.inspection` (its
``gatewayd events`` queries, also run without a daemon); :mod:`~gatewayd.journal.requests` (the
``events`` request). This package module itself imports nothing, so the command line stays light.
"""
