"""What YAML 1.1 makes of a plain scalar: the same the first time and every time after."""

from __future__ import annotations

import pytest
import yaml

from reconciler.yamlload import scalars
from reconciler.yamlload.scalars import STR_TAG, YAML_TAG, resolve_plain

TEXTS = ["name", "no", "No", "null", "~", "12", "1_000", "0x1f", "1.5", "2026-11-26", "nfc", "on"]


@pytest.mark.parametrize("text", TEXTS)
def test_a_plain_scalar_resolves_as_pyyaml_resolves_it_every_time(text: str) -> None:
    expected = yaml.resolver.Resolver().resolve(yaml.ScalarNode, text, (True, False))
    assert [resolve_plain(text) for _ in range(3)] == [expected] * 3


def test_what_resolve_plain_remembers_is_bounded() -> None:
    for n in range(5000):
        assert resolve_plain(f"n{n}") == STR_TAG
    assert resolve_plain("1" * 100) == YAML_TAG + "int"
    assert len(scalars._RESOLVED) == scalars._REMEMBERED
    assert "1" * 100 not in scalars._RESOLVED
