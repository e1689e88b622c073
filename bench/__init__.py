"""gatewayd's benchmarks (``make bench``; not tests): each figure measured beside its baseline.

One module per benchmark; each runs in a fresh subprocess (``python -m bench.<module>``) and
prints one :class:`bench.harness.Section` as JSON. ``python -m bench`` runs them all, adds the
machine they ran on, and writes ``bench/results/latest.json`` and ``latest.md``.
"""
