"""What YAML 1.1 makes of a plain scalar: what PyYAML's resolver makes of it."""

from __future__ import annotations

import pytest
import yaml

from reconciler.yamlload.scalars import resolve_plain

TEXTS = [
    "name",
    "no",
    "No",
    "null",
    "~",
    "",
    "12",
    "1_000",
    "0x1f",
    "1.5",
    "2026-11-26",
    "nfc",
    "on",
]


@pytest.mark.parametrize("text", TEXTS)
def test_a_plain_scalar_resolves_as_pyyaml_resolves_it(text: str) -> None:
    expected = yaml.resolver.Resolver().resolve(yaml.ScalarNode, text, (True, False))
    assert resolve_plain(text) == expected
