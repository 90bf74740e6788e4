"""Imports follow the data flow: no stage imports a later one, and the plan knows no API.

Stages, in the order data flows through them (docs/code-layout.md):
the top-level modules and the model first, then yamlload < schema < desired <
settings < api and plan (neither imports the other) < apply < output < service <
commands < cli.
Every ``import`` of every module is read with ``ast`` (inside functions and under
TYPE_CHECKING too: a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import reconciler

PACKAGE = Path(reconciler.__file__).parent

# Each stage's rank: a module may import its own stage and any of lower rank. api and
# plan share a rank and are kept apart below: the plan is pure over the model, and the
# API reads invites without knowing what a plan does with them.
RANK = {
    "top": 0,  # errors, safetext, files, git, applied
    "model": 0,
    "yamlload": 1,
    "schema": 2,
    "desired": 3,
    # settings reads desired.state.DEFAULT_PATH (where invites are when no path is
    # given), a fact about desired state: desired comes first, as the data does.
    "settings": 4,
    "api": 5,
    "plan": 5,
    "apply": 6,
    "output": 7,
    "service": 8,  # what the commands and the Ansible collection call
    "commands": 9,
    "cli": 10,
}
APART = {("plan", "api"), ("api", "plan")}
# The sandbox stands in for the platform: the model's fields, top-level helpers, settings,
# and the invite schema, by which it refuses a PATCH body as the platform would. It is
# started by the service (`--sandbox`) and commands (`reconcile sandbox`), never earlier.
SANDBOX_MAY_IMPORT = {"top", "model", "settings", "schema", "sandbox"}
TOP_LEVEL_LATE = {"cli": "cli", "__main__": "cli"}  # the entry points come last


def stage_of(module: str) -> str:
    """``reconciler.plan.make`` -> ``plan``; ``reconciler.safetext`` -> ``top``."""
    parts = module.split(".")
    if len(parts) == 1:
        return "top"
    path = PACKAGE.joinpath(*parts[1:])
    if path.is_dir():
        return parts[1]
    if len(parts) == 2:
        return TOP_LEVEL_LATE.get(parts[1], "top")
    return parts[1]


def modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path


def imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every ``reconciler`` module ``module`` imports, with the line it does so on."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            # `from reconciler.plan import saved` imports reconciler.plan.saved.
            names = [f"{base}.{alias.name}" for alias in node.names] or [base]
            names = list(dict.fromkeys(n if _exists(n) else base for n in names))
        else:
            continue
        for name in names:
            if name == "reconciler" or name.startswith("reconciler."):
                yield name, node.lineno


def _exists(module: str) -> bool:
    relative = Path(*module.split(".")[1:])
    return (PACKAGE / relative).with_suffix(".py").exists() or (PACKAGE / relative).is_dir()


def why_not(here: str, there: str) -> str | None:
    """Why stage ``here`` may not import stage ``there``; None when it may."""
    if there == here:
        return None
    if here == "sandbox":
        return None if there in SANDBOX_MAY_IMPORT else "the sandbox's place: SANDBOX_MAY_IMPORT"
    if there == "sandbox":
        return (
            None
            if here in ("service", "commands")
            else "only the service and commands start the sandbox"
        )
    if (here, there) in APART:
        return f"{here} and {there} never import each other"
    if RANK[there] > RANK[here]:
        return f"a later stage: {there} comes after {here}"
    return None


def violations() -> list[str]:
    found = []
    for module, path in modules():
        for imported, line in imports(module, path):
            why = why_not(stage_of(module), stage_of(imported))
            if why is not None:
                found.append(
                    f"{path.relative_to(PACKAGE.parent)}:{line} imports {imported} ({why})"
                )
    return found


def test_no_stage_imports_a_later_one() -> None:
    assert violations() == []


def test_every_stage_has_its_place() -> None:
    stages = {stage_of(module) for module, _ in modules()}
    assert stages <= {*RANK, "sandbox"}, stages - {*RANK, "sandbox"}


def test_the_plan_may_import_neither_the_api_nor_output_and_nothing_goes_back() -> None:
    assert why_not("plan", "api") and why_not("plan", "output") and why_not("api", "plan")
    assert why_not("api", "output") and why_not("desired", "settings")
    assert why_not("model", "yamlload") and why_not("output", "commands")
    assert why_not("settings", "sandbox") and why_not("sandbox", "plan")
    assert not why_not("settings", "desired") and not why_not("apply", "plan")
    assert not why_not("plan", "model") and not why_not("commands", "sandbox")


def test_lazy_and_type_only_imports_count(tmp_path: Path) -> None:
    module = tmp_path / "make.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from reconciler.api.client import ApiClient\n"
        "def read():\n"
        "    import reconciler.output.console\n"
        "    from reconciler.plan import saved\n",
        encoding="utf-8",
    )
    assert list(imports("reconciler.plan.make", module)) == [
        ("reconciler.api.client", 3),
        ("reconciler.output.console", 5),
        ("reconciler.plan.saved", 6),
    ]
