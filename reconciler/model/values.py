"""The values an invite's fields hold, and how a value is shown."""

from __future__ import annotations

import json
from typing import Any

from reconciler.safetext import escape


def show(value: Any) -> str:
    """A value as the user wrote it in YAML terms: strings quoted, lists inline, escaped.

    Not redacted: a plan's records are (``shown``) where the server said them, and a
    value from the files is shown as it will be sent.
    """
    return escape(json.dumps(value, ensure_ascii=False))
