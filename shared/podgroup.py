"""The PodGroup spec: one typed model for the CRD generator (deploy/crdgen.py), the controller that
reads PodGroups and the PodGroups Phalanx makes.

Each field says its wire name, its bounds and what it means; the CRD schema is generated from
that, and the controller reads the same fields through ``PodGroupSpec.from_json``. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from shared.jsonread import obj, text


@dataclass(frozen=True, slots=True)
class SpecField:
    """What the CRD schema says about one field."""

    wire: str  # the field's name in the API (camelCase)
    description: str
    minimum: int | None = None
    enum: tuple[str, ...] = ()  # the only values allowed (a string field), in the order documented


def _about(
    wire: str, description: str, minimum: int | None = None, enum: tuple[str, ...] = ()
) -> dict[str, SpecField]:
    return {"about": SpecField(wire, description, minimum, enum)}


# spec.disruptionMode: what preemption may evict of the running gang.
DISRUPTION_ALL = "All"  # the whole gang (the default)
DISRUPTION_SINGLE = "Single"  # single pods, as many as needed; the rest keeps running
DISRUPTION_MODES = (DISRUPTION_ALL, DISRUPTION_SINGLE)


@dataclass(frozen=True, slots=True)
class PodGroupSpec:
    """``spec`` of a PodGroup, of any of the kinds Phalanx serves (they share these fields)."""

    min_member: int | None = field(
        default=None, metadata=_about("minMember", "Pods that must fit together before any starts.", 1)
    )
    max_member: int | None = field(
        default=None, metadata=_about("maxMember", "Upper bound of an elastic gang (KAI).", 1)
    )
    # Quantities as written ("8", "64Gi"); the controller parses them into its units.
    min_resources: Mapping[str, str] = field(
        default_factory=dict,
        metadata=_about("minResources", "Resources the whole gang needs (Coscheduling)."),
    )
    schedule_timeout_seconds: int | None = field(
        default=None,
        metadata=_about(
            "scheduleTimeoutSeconds", "How long the gang may wait for a placement before it is given up.", 1
        ),
    )
    priority_class_name: str | None = field(
        default=None, metadata=_about("priorityClassName", "PriorityClass whose value orders gangs.")
    )
    priority: int | None = field(default=None, metadata=_about("priority", "Explicit priority (KAI style)."))
    queue: str | None = field(default=None, metadata=_about("queue", "Queue name (KAI style)."))
    parent_pod_group: str | None = field(
        default=None,
        metadata=_about("parentPodGroup", "Parent group of a hierarchical gang (KAI style)."),
    )
    topology_required: str | None = field(
        default=None,
        metadata=_about(
            "topologyRequired",
            "A node label key (e.g. topology.kubernetes.io/rack): every member runs inside one domain "
            "of it (nodes sharing one value), or the gang waits; nodes without the label are not used.",
        ),
    )
    disruption_mode: str | None = field(
        default=None,
        metadata=_about(
            "disruptionMode",
            "What preemption may evict of the running gang: All (the default) the whole gang, Single "
            "single pods, as many as needed, while the rest keeps running.",
            enum=DISRUPTION_MODES,
        ),
    )

    @classmethod
    def from_json(cls, raw: Any) -> PodGroupSpec:
        """The spec as stored. A value of the wrong type reads as absent (the CRD schemas refuse
        such values, so only a hand-edited object or a foreign CRD gets here)."""
        spec = obj(raw)
        resources = obj(spec.get("minResources"))
        return cls(
            min_member=_int(spec.get("minMember")),
            max_member=_int(spec.get("maxMember")),
            min_resources={k: str(v) for k, v in resources.items() if isinstance(v, str | int | float)},
            schedule_timeout_seconds=_int(spec.get("scheduleTimeoutSeconds")),
            priority_class_name=text(spec.get("priorityClassName")) or None,
            priority=_int(spec.get("priority")),
            queue=text(spec.get("queue")) or None,
            parent_pod_group=text(spec.get("parentPodGroup")) or None,
            topology_required=text(spec.get("topologyRequired")) or None,
            disruption_mode=mode if (mode := text(spec.get("disruptionMode"))) in DISRUPTION_MODES else None,
        )

    def to_json(self) -> dict[str, Any]:
        """The fields that are set, by their wire names (what Phalanx writes when it makes one)."""
        out: dict[str, Any] = {}
        for spec_field in fields(self):
            value = getattr(self, spec_field.name)
            if value is not None and value != {}:
                out[spec_field.metadata["about"].wire] = dict(value) if isinstance(value, Mapping) else value
        return out


def subgroup_minimums(raw: Any) -> dict[str, int]:
    """KAI's ``spec.subGroups`` as {leaf subgroup: its minMember}. Only leaves hold pods (a subgroup
    that is another's ``parent`` only groups them), so only theirs count; one without a minMember
    asks for nothing."""
    groups = [g for g in obj(raw).get("subGroups") or () if isinstance(g, Mapping)]
    parents = {text(g.get("parent")) for g in groups}
    out: dict[str, int] = {}
    for group in groups:
        name, minimum = text(group.get("name")), _int(group.get("minMember"))
        if name and name not in parents and minimum is not None and minimum >= 1:
            out[name] = minimum
    return out


def spec_fields() -> list[tuple[SpecField, Any]]:
    """Every field's schema facts and its Python type, in declaration order (for crdgen)."""
    return [(f.metadata["about"], f.type) for f in fields(PodGroupSpec)]


# The rules the API server checks beside the schema (CEL), with the message a user sees.
CROSS_FIELD_RULES: tuple[tuple[str, str], ...] = (
    (
        "!has(self.maxMember) || self.maxMember >= self.minMember",
        "maxMember must be greater than or equal to minMember",
    ),
)


def _int(value: Any) -> int | None:
    """An integer field; a whole float (YAML "3.0") or a digit string counts, a bool does not."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().removeprefix("-").isdigit():
        return int(value)
    return None
