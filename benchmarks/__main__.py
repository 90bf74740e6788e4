"""``python -m benchmarks``: run every scenario and print each figure beside its target."""

from __future__ import annotations

import sys

from benchmarks.main import main

sys.exit(main())
