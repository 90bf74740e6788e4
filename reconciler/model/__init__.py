"""The invite as this tool models it, and what became of a read.

- ``outcome``: ``Done``, ``Failed``, ``NotRun``, and ``ReadError``.

Imported on the loader's path, whose start-up is benchmarked: standard library only.
"""
