"""Phalanx's Queue (scheduling.phalanx.io) on the wire: one typed model of its spec and its status,
for the CRD generator (deploy/crdgen.py) and the controller that reads Queues
(controller/api/queue_records.py) and writes their status (controller/pipeline/queue_status.py).

KAI's Queue gets the same status; its spec is KAI's own (read in controller/api/queue_records.py).
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from shared.jsonread import obj, text
from shared.wirefield import SpecField, about, described


@dataclass(frozen=True, slots=True)
class QueueResourceSpec:
    """One resource of a queue, as written: quantities as given ("8", "64Gi")."""

    quota: str | None = field(
        default=None,
        metadata=about("quota", "Guaranteed: reclaimed from other queues when needed.", quantity=True),
    )
    limit: str | None = field(
        default=None, metadata=about("limit", "Never exceeded (absent: unlimited).", quantity=True)
    )
    over_quota_weight: float | None = field(
        default=None,
        metadata=about(
            "overQuotaWeight",
            "Share of the room beyond the quotas, relative to other queues (default 1).",
            minimum=0,
        ),
    )

    @classmethod
    def from_json(cls, raw: Any) -> QueueResourceSpec:
        body = obj(raw)
        weight = body.get("overQuotaWeight")
        return cls(
            quota=_quantity(body.get("quota")),
            limit=_quantity(body.get("limit")),
            over_quota_weight=_number(weight),
        )


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """``spec`` of a Phalanx Queue."""

    parent: str | None = field(
        default=None, metadata=about("parent", "Parent queue (a department above teams).")
    )
    resources: Mapping[str, QueueResourceSpec] = field(
        default_factory=dict,
        metadata=about("resources", "Per resource (nvidia.com/gpu, cpu, memory, ...): quota, limit, weight."),
    )

    @classmethod
    def from_json(cls, raw: Any) -> QueueSpec:
        """The spec as stored; a value of the wrong type reads as absent."""
        spec = obj(raw)
        resources = obj(spec.get("resources"))
        return cls(
            parent=text(spec.get("parent")) or None,
            resources={str(k): QueueResourceSpec.from_json(v) for k, v in resources.items()},
        )


def _amounts(wire: str, description: str) -> Any:
    return field(default_factory=dict, metadata=about(wire, description))


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """``status`` of a queue (Phalanx's or KAI's): amounts as quantities, by resource."""

    allocated: Mapping[str, str] = _amounts(
        "allocated", "What admitted gangs of this queue and its children hold."
    )
    requested: Mapping[str, str] = _amounts("requested", "Allocated plus what their waiting gangs ask for.")
    fair_share: Mapping[str, str] = _amounts("fairShare", "This queue's current fair share per resource.")
    outside_phalanx: Mapping[str, str] = _amounts(
        "outsidePhalanx",
        "Of allocated: what pods outside Phalanx's gangs hold in the namespaces bound "
        "to this queue (skipped, bound at creation, not in a gang).",
    )
    admitted_gangs: int = field(default=0, metadata=about("admittedGangs", "Admitted gangs of the queue.", 0))
    waiting_gangs: int = field(default=0, metadata=about("waitingGangs", "Waiting gangs of the queue.", 0))
    summary: str | None = field(
        default=None, metadata=about("summary", "GPUs allocated / fair share / quota, for kubectl get.")
    )
    message: str | None = field(
        default=None, metadata=about("message", "Why gangs cannot use this queue, if so.")
    )

    def to_json(self) -> dict[str, Any]:
        """Every field by its wire name. None is kept on purpose: written as a merge patch, it
        removes a stale message."""
        out: dict[str, Any] = {}
        for status_field in fields(self):
            value = getattr(self, status_field.name)
            out[status_field.metadata["about"].wire] = dict(value) if isinstance(value, Mapping) else value
        return out


def queue_spec_fields() -> list[tuple[SpecField, str]]:
    return described(QueueSpec)


def queue_resource_fields() -> list[tuple[SpecField, str]]:
    return described(QueueResourceSpec)


def queue_status_fields() -> list[tuple[SpecField, str]]:
    return described(QueueStatus)


def _quantity(value: Any) -> str | None:
    """A quantity as written (a string or a number), else None."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return None
    return str(value)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        return float(str(value)) if value is not None else None
    except ValueError:
        return None
