"""Typed invite values from JSON-like ones, as the borders make them (the loader, the API
reading, the plan file), for tests that build records directly."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.model.invite import Fields, FieldValue, HeldFields, kind_of


def value(field: str, raw: Any) -> FieldValue:
    """``raw`` as the value of ``field``; a value its kind cannot hold is a test's mistake."""
    typed = kind_of(field).from_json(raw)
    if typed is None:
        raise ValueError(f"{raw!r} is not a value of {field}")
    return typed


def typed(raw: Mapping[str, Any]) -> Fields:
    """Fields from JSON-like values."""
    return {field: value(field, item) for field, item in raw.items()}


def held(raw: Mapping[str, Any]) -> HeldFields:
    """A server's values from JSON-like ones, None where it holds none."""
    return {field: None if item is None else value(field, item) for field, item in raw.items()}
