"""What a typed wire model (shared/podgroup.py, shared/queue.py) says about each of its fields:
its name in the API, its bounds and its meaning. deploy/crdgen.py generates the CRD schemas from
these, so the schema and the code that reads and writes the objects cannot drift apart. Pure."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True, slots=True)
class SpecField:
    """What the CRD schema says about one field."""

    wire: str  # the field's name in the API (camelCase)
    description: str
    minimum: int | None = None
    date_time: bool = False  # a string holding an RFC 3339 time
    written: bool = True  # (status) Phalanx writes it; one it does not write is left as it is
    quantity: bool = False  # a resource.Quantity ("8", "64Gi")
    enum: tuple[str, ...] = ()  # the only values allowed (a string field), in the order documented


def about(
    wire: str,
    description: str,
    minimum: int | None = None,
    date_time: bool = False,
    written: bool = True,
    quantity: bool = False,
    enum: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A dataclass field's metadata: ``field(default=..., metadata=about("wireName", "meaning"))``."""
    return {"about": SpecField(wire, description, minimum, date_time, written, quantity, enum)}


def described(model: Any) -> list[tuple[SpecField, str]]:
    """Every field of a dataclass model: its schema facts and its Python type, in declaration order."""
    return [(f.metadata["about"], str(f.type)) for f in fields(model)]
