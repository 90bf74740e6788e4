"""`--verbose`: the tool's own log records on stderr (never a secret or token)."""

from __future__ import annotations

import logging
import sys

from reconciler.safetext import redact_and_escape


class _CleanFormatter(logging.Formatter):
    # Log messages may quote server answers: redact and escape them like all other output.
    def format(self, record: logging.LogRecord) -> str:
        return redact_and_escape(super().format(record))


def setup_logging(verbose: bool) -> None:
    if not verbose or sys.stderr is None:  # stderr closed (2>&-): nowhere to log to
        return
    logger = logging.getLogger("reconciler")
    for old in [h for h in logger.handlers if getattr(h, "_reconciler", False)]:
        logger.removeHandler(old)  # one handler, on this run's stderr, even when run in-process
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_CleanFormatter("%(asctime)s %(name)s: %(message)s", "%H:%M:%S"))
    handler._reconciler = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
