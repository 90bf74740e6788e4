from __future__ import annotations

from reconciler.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
