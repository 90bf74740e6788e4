"""ajv 8 and ajv-formats, a second JSON Schema implementation (the editors'), from Python.

``.ci/run`` installs them with npm into ``.ci-node/`` of the checkout (a local prefix,
never global); ``RECONCILER_AJV_PREFIX`` names another prefix. Without node, or
without the packages, ``ajv()`` is None and the tests that need it skip, except under
``CI=true`` when node is on PATH: CI installs them, so there a missing one fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("ajv.js")


class Ajv:
    def __init__(self, node: str, modules: Path) -> None:
        self.node = node
        self.modules = modules

    def _run(self, job: dict[str, Any]) -> Any:
        done = subprocess.run(
            [self.node, str(SCRIPT)],
            input=json.dumps(job),
            capture_output=True,
            text=True,
            env={**os.environ, "NODE_PATH": str(self.modules)},
            timeout=60,
            check=True,
        )
        return json.loads(done.stdout)

    def compile_errors(self, schemas: list[dict[str, Any]]) -> list[str | None]:
        """Each schema compiled in strict mode (the others loaded beside it for its
        references): None, or why ajv refused it."""
        errors: list[str | None] = self._run({"compile": schemas})["errors"]
        return errors

    def verdicts(self, schema: dict[str, Any], values: list[Any]) -> list[bool]:
        """Whether ``schema`` (which may refer to the draft's meta-schema) holds each value."""
        valid: list[bool] = self._run({"schema": schema, "values": values})["valid"]
        return valid


def ajv() -> Ajv | None:
    node = shutil.which("node")
    prefix = Path(os.environ.get("RECONCILER_AJV_PREFIX") or REPO / ".ci-node")
    modules = prefix / "node_modules"
    if node is None or not (modules / "ajv" / "package.json").is_file():
        return None
    if not (modules / "ajv-formats" / "package.json").is_file():
        return None
    return Ajv(node, modules)


def require_ajv() -> Ajv:
    """ajv, or a skip (a failure under CI=true with node there: CI installs ajv)."""
    found = ajv()
    if found is not None:
        return found
    why = "ajv and ajv-formats not installed (npm install --prefix .ci-node ajv-cli ajv-formats)"
    if shutil.which("node") is None:
        pytest.skip("no node on PATH")
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(why)
    pytest.skip(why)
