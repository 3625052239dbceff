"""Benchmarks for soothe-planner: each prints ratios against a baseline measured in the same run.

Run one with ``python -m bench <name> [--quick]``; each also writes ``bench/results/<name>.json``,
with what produced it (``bench/provenance.py``).
"""
