"""One conversion for each numeric setting, whether it comes from an option, the
environment or reconciler.yaml: the same bounds and the same wording everywhere."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

import click

from reconciler.errors import ConfigError


class NumberSetting(NamedTuple):
    """A whole number or a number of seconds, with the bounds every source must respect."""

    kind: type  # int or float
    minimum: float
    maximum: float | None = None
    above_minimum: bool = False  # True: the minimum itself is not allowed

    def describe(self) -> str:
        low = f"more than {self.minimum:g}" if self.above_minimum else f"at least {self.minimum:g}"
        return low if self.maximum is None else f"{low} and at most {self.maximum:g}"

    def convert(self, raw: Any, where: str) -> int | float:
        """``raw`` as this setting's type; ``where`` names the source, as in `--parallelism`."""
        value = _parse(self.kind, raw, where)
        too_low = value <= self.minimum if self.above_minimum else value < self.minimum
        if too_low or (self.maximum is not None and value > self.maximum):
            raise ConfigError(f"{where}: {raw!r} must be {self.describe()}")
        return value


def _parse(kind: type, raw: Any, where: str) -> int | float:
    if isinstance(raw, bool):  # YAML `true` is not a number of anything
        raise ConfigError(f"{where}: {raw!r} is not a number")
    if kind is int:
        if isinstance(raw, int):
            return raw
        try:
            return int(str(raw).strip())
        except ValueError:
            raise ConfigError(f"{where}: {raw!r} is not a whole number") from None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: {raw!r} is not a number of seconds") from None
    if not math.isfinite(value):  # nan or inf: no wait could ever be bounded by it
        raise ConfigError(f"{where}: {raw!r} is not a finite number of seconds")
    return value


NUMBER_SETTINGS: dict[str, NumberSetting] = {
    "parallelism": NumberSetting(int, 1, 256),
    "max_parallelism": NumberSetting(int, 1, 256),
    "max_changes": NumberSetting(int, 0),
    "max_resends": NumberSetting(int, 0),
    "max_attempts": NumberSetting(int, 1, 20),
    # Bounded above as well: a wait of 1e10 s is no bound, and overflows the clock's
    # arithmetic (OverflowError) long before it would end.
    "timeout": NumberSetting(float, 0, 3600, above_minimum=True),
    "retry_max_seconds": NumberSetting(float, 0, 86400),
    "max_response_bytes": NumberSetting(int, 1024),
}


if TYPE_CHECKING:  # generic from click 8.2; at run time the plain class, for click 8.1
    _ParamType = click.ParamType[float, Any]
else:
    _ParamType = click.ParamType


class SettingType(_ParamType):
    """A click type that converts an option exactly as the environment and file are."""

    def __init__(self, setting: str) -> None:
        self.setting = setting
        self.rule = NUMBER_SETTINGS[setting]
        self.name = "integer" if self.rule.kind is int else "seconds"

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "N" if self.rule.kind is int else "SECONDS"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        where = param.opts[-1] if param is not None and param.opts else self.setting
        try:
            return self.rule.convert(value, where)
        except ConfigError as exc:
            self.fail(str(exc).split(": ", 1)[1], param, ctx)
