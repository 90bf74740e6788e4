"""Benchmarks of the real `reconcile` CLI against the in-process sandbox.

Run ``python -m benchmarks`` (or ``python benchmarks/run.py``) from the repository
root with the project's environment; see README.md for the scenarios and figures.
"""
