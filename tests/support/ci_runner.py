"""Just enough of a GitHub Actions runner to run the recipe's jobs and the composite action.

Steps run in order with bash as the runner starts it; `${{ }}` expressions are
evaluated (contexts, literals, ==, !=, &&, ||, !, status functions); `uses:` of
the repository's own action (OWNER/invite-reconciler@TAG or ./) runs the steps
of action.yml with its inputs and outputs; other actions (checkout, setup-python,
github-script, upload-artifact) are skipped: the tests prepare what they would.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
ACTION = REPO / "action.yml"
OWN_ACTION = re.compile(r"^(\./?|[\w.-]+/invite-reconciler@[\w.-]+)$")
GITHUB_BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
STATUS_FUNCTIONS = ("success()", "failure()", "always()", "cancelled()")
_TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||!|\(|\))|(?P<num>\d+)"
    r"|(?P<fn>\w+\(\))|(?P<ctx>[A-Za-z_][\w-]*(?:\.[\w-]+)*))"
)


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def lookup(ctx: dict[str, Any], path: str) -> Any:
    value: Any = ctx
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else value


def evaluate(expr: str, ctx: dict[str, Any], failed: bool = False) -> Any:
    """A GitHub expression, translated token by token into Python and evaluated."""
    python, pos = [], 0
    functions = {"success()": not failed, "failure()": failed, "always()": True}
    functions["cancelled()"] = False
    while pos < len(expr.rstrip()):
        match = _TOKEN.match(expr, pos)
        assert match and match.end() > pos, f"cannot read expression {expr!r} at {pos}"
        pos = match.end()
        if match["str"] is not None:
            python.append(repr(match["str"][1:-1].replace("''", "'")))
        elif match["op"]:
            python.append({"&&": " and ", "||": " or ", "!": " not "}.get(match["op"], match["op"]))
        elif match["num"]:
            python.append(match["num"])
        elif match["fn"]:
            python.append(repr(functions[match["fn"]]))
        elif match["ctx"] in ("true", "false"):
            python.append(str(match["ctx"] == "true"))
        else:
            python.append(repr(lookup(ctx, match["ctx"])))
    return eval("".join(python), {"__builtins__": {}})


def interpolate(value: Any, ctx: dict[str, Any]) -> str:
    if isinstance(value, bool):  # YAML's true, as the runner passes it on: "true"
        return "true" if value else "false"

    def one(match: re.Match[str]) -> str:
        result = evaluate(match[1], ctx)
        return "true" if result is True else "false" if result is False else str(result)

    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", one, str(value))


def should_run(condition: Any, ctx: dict[str, Any], failed: bool) -> bool:
    if condition is None:
        return not failed
    text = str(condition).strip()
    inner = re.fullmatch(r"\$\{\{\s*(.*?)\s*\}\}", text, re.DOTALL)
    text = inner[1] if inner else text
    if not any(fn in text for fn in STATUS_FUNCTIONS):
        text = f"success() && ({text})"
    return bool(evaluate(text, ctx, failed))


@dataclass
class StepResult:
    name: str
    returncode: int | None  # None: skipped
    stdout: str = ""
    stderr: str = ""
    outputs: dict[str, str] = field(default_factory=dict)
    foreign: bool = False  # another's action (checkout, upload...): would have run, not run here


@dataclass
class Runner:
    """One job's worth of runner state: environment, temp dir, contexts."""

    work: Path
    runner_temp: Path
    env: dict[str, str]
    github: dict[str, Any]
    vars: dict[str, str] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    results: list[StepResult] = field(default_factory=list)

    def context(self, steps: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
        return {
            "github": self.github,
            "vars": self.vars,
            "secrets": self.secrets,
            "inputs": inputs,
            "steps": steps,
            "runner": {"temp": str(self.runner_temp)},
            "env": self.env,
        }

    def run_job(self, workflow: dict[str, Any], job_name: str) -> list[StepResult]:
        job = workflow["jobs"][job_name]
        ctx = self.context({}, self.inputs)
        env = {k: interpolate(v, ctx) for k, v in (workflow.get("env") or {}).items()}
        env |= {k: interpolate(v, ctx) for k, v in (job.get("env") or {}).items()}
        self.run_steps(job["steps"], ctx, env)
        return self.results

    def run_steps(
        self, steps: list[dict[str, Any]], ctx: dict[str, Any], env: dict[str, str]
    ) -> bool:
        failed = False
        for step in steps:
            name = str(step.get("name") or step.get("uses") or step.get("run", "")[:30])
            if not should_run(step.get("if"), ctx, failed):
                self.results.append(StepResult(name, None))
                if step.get("id"):
                    ctx["steps"][step["id"]] = {"outputs": {}, "outcome": "skipped"}
                continue
            step_env = env | {k: interpolate(v, ctx) for k, v in (step.get("env") or {}).items()}
            if "run" in step:
                result = self.run_script(name, step, ctx, step_env)
            elif OWN_ACTION.match(step["uses"]):
                result = self.run_action(name, step, ctx, step_env)
            else:
                result = StepResult(name, 0, foreign=True)  # the test prepares what it does
            self.results.append(result)
            if step.get("id"):
                outcome = "failure" if result.returncode else "success"
                ctx["steps"][step["id"]] = {"outputs": result.outputs, "outcome": outcome}
            failed = failed or (bool(result.returncode) and not step.get("continue-on-error"))
        return not failed

    def run_script(
        self, name: str, step: dict[str, Any], ctx: dict[str, Any], env: dict[str, str]
    ) -> StepResult:
        assert step.get("shell", "bash") == "bash", step.get("shell")
        index = len(self.results)
        script = self.runner_temp / f"step-{index}.sh"
        script.write_text(step["run"], encoding="utf-8")
        output = self.runner_temp / f"output-{index}"
        output.write_text("", encoding="utf-8")
        cwd = self.work / interpolate(step.get("working-directory", "."), ctx)
        done = subprocess.run(
            [*GITHUB_BASH, str(script)],
            cwd=cwd,
            env={**self.env, **env, "GITHUB_OUTPUT": str(output), **ctx.get("extra_env", {})},
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        lines = output.read_text(encoding="utf-8").splitlines()
        outputs = dict(line.split("=", 1) for line in lines if "=" in line)
        return StepResult(name, done.returncode, done.stdout, done.stderr, outputs)

    def run_action(
        self, name: str, step: dict[str, Any], ctx: dict[str, Any], env: dict[str, str]
    ) -> StepResult:
        action = load(ACTION)
        given = {k: interpolate(v, ctx) for k, v in (step.get("with") or {}).items()}
        unknown = set(given) - set(action["inputs"])
        assert not unknown, f"step {name}: the action has no input {unknown}"
        defaults = {k: spec.get("default", "") for k, spec in action["inputs"].items()}
        inputs = {k: interpolate(v, ctx) for k, v in defaults.items()} | given
        missing = [
            k for k, spec in action["inputs"].items() if spec.get("required") and not inputs[k]
        ]
        assert not missing, f"step {name}: required inputs missing: {missing}"
        inner = self.context({}, inputs)
        inner["github"] = {**self.github, "action_path": str(REPO)}
        inner["extra_env"] = {"GITHUB_ACTION_PATH": str(REPO)}
        start = len(self.results)
        ok = self.run_steps(action["runs"]["steps"], inner, env)
        ran = self.results[start:]
        del self.results[start:]
        outputs = {k: interpolate(spec["value"], inner) for k, spec in action["outputs"].items()}
        return StepResult(
            name,
            0 if ok else 1,
            "".join(r.stdout for r in ran),
            "".join(r.stderr for r in ran),
            outputs,
        )


def base_env(tmp_path: Path, *path_dirs: Path | str) -> dict[str, str]:
    (tmp_path / "step_summary").touch()
    return {
        "PATH": os.pathsep.join([*map(str, path_dirs), "/usr/bin", "/bin"]),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary"),
    }
