from __future__ import annotations

import pytest

from reconciler.safetext import plural, seconds


@pytest.mark.parametrize(("count", "said"), [(0, "0 invites"), (1, "1 invite"), (2, "2 invites")])
def test_plural_counts_in_words(count: int, said: str) -> None:
    assert plural(count, "invite") == said


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (0.0, "0.0 s"),
        (0.04, "0.04 s"),
        (0.0456, "0.05 s"),
        (0.3, "0.3 s"),
        (4.5, "4.5 s"),
        (60, "60 s"),
    ],
)
def test_a_wait_in_words_is_never_a_real_wait_shown_as_none(value: float, said: str) -> None:
    assert seconds(value) == said
