"""Kubernetes quantities as exact fractions, and the bounds that keep a tenant's string cheap."""

from __future__ import annotations

from fractions import Fraction

import pytest

from shared.quantities import QuantityError, parse_fraction


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("2e3", Fraction(2000)),
        ("1e-3", Fraction(1, 1000)),
    ],
)
def test_quantities_parse_exactly(text: str, value: Fraction) -> None:
    assert parse_fraction(text) == value


@pytest.mark.parametrize("text", ["1e999999999", "1e-999999999", "1" * 65, "1e65"])
def test_quantities_beyond_any_real_one_are_refused_at_once(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_fraction(text)
