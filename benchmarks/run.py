"""``python benchmarks/run.py [options]``: the same as ``python -m benchmarks``.

Run as a script, Python puts only this folder on the path; the repository root
(this file's parent's parent) goes there too, so ``benchmarks`` imports as a package
(whose ``__init__`` puts ``tests/`` there for ``support``, as with ``-m``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.main import main

if __name__ == "__main__":
    sys.exit(main())
