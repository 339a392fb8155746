"""Kubernetes resource quantities as exact integers.

CPU is counted in milli-cores, every other resource in its base unit (bytes, GPUs, pods), rounded
up as the API server does when it canonicalises a quantity. No floats: 0.1 + 0.2 must equal 0.3.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$")

# Resources whose amounts are counted in thousandths (the scheduler's MilliValue()).
MILLI_RESOURCES = frozenset({"cpu"})


MAX_QUANTITY_CHARS = 64
MAX_EXPONENT = 64  # far beyond any real quantity (an exabyte is 1e18)


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_fraction(value: str | int | float) -> Fraction:
    """Parse a quantity ("500m", "1.5Gi", "2e3", 4) into an exact fraction of its base unit."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(Decimal(repr(value)))
    text = value.strip()
    # Bounded like the API server's own quantities: a tenant's CEL selector can hold any string,
    # and 10 ** 999999999 would stall the planning pass for minutes.
    if len(text) > MAX_QUANTITY_CHARS:
        raise QuantityError(f"quantity longer than {MAX_QUANTITY_CHARS} characters")
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(f"not a Kubernetes quantity: {value!r}")
    number, exponent, suffix = match.groups()
    try:
        amount = Fraction(Decimal(number))
    except InvalidOperation as err:  # pragma: no cover - the regex admits only decimals
        raise QuantityError(f"not a Kubernetes quantity: {value!r}") from err
    if exponent:
        power = int(exponent[1:])
        if abs(power) > MAX_EXPONENT:
            raise QuantityError(f"quantity exponent out of range: {value!r}")
        return amount * Fraction(10) ** power
    if suffix in _BINARY:
        return amount * _BINARY[suffix]
    return amount * _DECIMAL[suffix or ""]


def _ceil(value: Fraction) -> int:
    return -(-value.numerator // value.denominator)


def to_int(resource: str, value: str | int | float) -> int:
    """The exact integer amount of ``resource``: milli-units for CPU, base units otherwise."""
    amount = parse_fraction(value)
    if resource in MILLI_RESOURCES:
        amount *= 1000
    return _ceil(amount)


def base_units(resource: str, amount: float) -> float:
    """An amount counted as ``to_int`` counts it, in the resource's base unit (cpu: cores)."""
    return amount / 1000 if resource in MILLI_RESOURCES else amount


def parse_resources(resources: dict[str, object] | None) -> dict[str, int]:
    """A ResourceList (name -> quantity) as exact integers; raises QuantityError on bad input."""
    if not resources:
        return {}
    result: dict[str, int] = {}
    for name, value in resources.items():
        if not isinstance(value, (str, int, float)):
            raise QuantityError(f"{name}: not a quantity: {value!r}")
        result[name] = to_int(name, value)
    return result


def format_amount(resource: str, amount: int) -> str:
    """A human-readable amount for messages: '1500m' cpu, '2Gi' memory, '8' GPUs."""
    if resource in MILLI_RESOURCES:
        return f"{amount // 1000}" if amount % 1000 == 0 else f"{amount}m"
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount >= size and amount % size == 0:
                return f"{amount // size}{suffix}"
    return str(amount)
