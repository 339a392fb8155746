"""The PodGroup on the wire: one typed model of its spec and its status, for the CRD generator
(deploy/crdgen.py), the controller that reads PodGroups and writes their status, and the PodGroups
Phalanx makes.

Each field says its wire name, its bounds and what it means; the CRD schema is generated from
that, the controller reads the same fields through ``PodGroupSpec.from_json`` and
``PodGroupStatus.from_json`` and writes a status through ``PodGroupStatus.to_json``. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

from shared.jsonread import obj, text, whole_number
from shared.wirefield import SpecField, about, described

# spec.disruptionMode: what preemption may evict of the running gang.
DISRUPTION_ALL = "All"  # the whole gang (the default)
DISRUPTION_SINGLE = "Single"  # single pods, as many as needed; the rest keeps running
DISRUPTION_MODES = (DISRUPTION_ALL, DISRUPTION_SINGLE)


@dataclass(frozen=True, slots=True)
class PodGroupSpec:
    """``spec`` of a PodGroup, of any of the kinds Phalanx serves (they share these fields)."""

    min_member: int | None = field(
        default=None, metadata=about("minMember", "Pods that must fit together before any starts.", 1)
    )
    max_member: int | None = field(
        default=None, metadata=about("maxMember", "Upper bound of an elastic gang (KAI).", 1)
    )
    # Quantities as written ("8", "64Gi"); the controller parses them into its units.
    min_resources: Mapping[str, str] = field(
        default_factory=dict,
        metadata=about("minResources", "Resources the whole gang needs (Coscheduling).", quantity=True),
    )
    schedule_timeout_seconds: int | None = field(
        default=None,
        metadata=about(
            "scheduleTimeoutSeconds", "How long the gang may wait for a placement before it is given up.", 1
        ),
    )
    priority_class_name: str | None = field(
        default=None, metadata=about("priorityClassName", "PriorityClass whose value orders gangs.")
    )
    priority: int | None = field(default=None, metadata=about("priority", "Explicit priority (KAI style)."))
    queue: str | None = field(default=None, metadata=about("queue", "Queue name (KAI style)."))
    parent_pod_group: str | None = field(
        default=None,
        metadata=about("parentPodGroup", "Parent group of a hierarchical gang (KAI style)."),
    )
    topology_required: str | None = field(
        default=None,
        metadata=about(
            "topologyRequired",
            "A node label key (e.g. topology.kubernetes.io/rack): every member runs inside one domain "
            "of it (nodes sharing one value), or the gang waits; nodes without the label are not used.",
        ),
    )
    topology: str | None = field(
        default=None,
        metadata=about(
            "topology",
            "The cluster topology (the controller's --topologies) whose levels the gang is kept in; "
            "unset: the first.",
        ),
    )
    topology_preferred: str | None = field(
        default=None,
        metadata=about(
            "topologyPreferred",
            "A node label key whose domains the gang is tried inside first, then those of each wider "
            "level of its topology, then anywhere.",
        ),
    )
    topology_slice_required: str | None = field(
        default=None,
        metadata=about(
            "topologySliceRequired",
            "A node label key: every topologySliceSize members (in index order) run inside one domain of it.",
        ),
    )
    topology_slice_size: int | None = field(
        default=None,
        metadata=about("topologySliceSize", "Members per slice (see topologySliceRequired).", 1),
    )
    disruption_mode: str | None = field(
        default=None,
        metadata=about(
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
            min_member=whole_number(spec.get("minMember")),
            max_member=whole_number(spec.get("maxMember")),
            min_resources={k: str(v) for k, v in resources.items() if isinstance(v, str | int | float)},
            schedule_timeout_seconds=whole_number(spec.get("scheduleTimeoutSeconds")),
            priority_class_name=text(spec.get("priorityClassName")) or None,
            priority=whole_number(spec.get("priority")),
            queue=text(spec.get("queue")) or None,
            parent_pod_group=text(spec.get("parentPodGroup")) or None,
            topology_required=text(spec.get("topologyRequired")) or None,
            topology=text(spec.get("topology")) or None,
            topology_preferred=text(spec.get("topologyPreferred")) or None,
            topology_slice_required=text(spec.get("topologySliceRequired")) or None,
            topology_slice_size=whole_number(spec.get("topologySliceSize")),
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
        name, minimum = text(group.get("name")), whole_number(group.get("minMember"))
        if name and name not in parents and minimum is not None and minimum >= 1:
            out[name] = minimum
    return out


def spec_fields() -> list[tuple[SpecField, str]]:
    """Every field's schema facts and its Python type, in declaration order (for crdgen)."""
    return described(PodGroupSpec)


# The rules the API server checks beside the schema (CEL), with the message a user sees.
CROSS_FIELD_RULES: tuple[tuple[str, str], ...] = (
    (
        "!has(self.maxMember) || self.maxMember >= self.minMember",
        "maxMember must be greater than or equal to minMember",
    ),
)


# ---- status ----------------------------------------------------------------------------------------


class Phase(StrEnum):
    """``status.phase``: where the gang is, as a person reads it."""

    PENDING = "Pending"  # not admitted: waiting for members, room, its queue or siblings
    SCHEDULING = "Scheduling"  # admitted: gates lifted, members binding
    SCHEDULED = "Scheduled"  # admitted: at least minMember members bound to nodes
    RUNNING = "Running"  # admitted: at least minMember members running (or done)
    FINISHED = "Finished"  # at least minMember members succeeded and none runs
    FAILED = "Failed"  # an invalid spec, a passed schedule timeout, or members failed beyond repair
    UNKNOWN = "Unknown"  # never written by Phalanx; the CRD accepts it from other tools


# Phases in which a gang holds an admission: losing it starts a new wait.
ADMITTED_PHASES = frozenset({Phase.SCHEDULING, Phase.SCHEDULED, Phase.RUNNING})


class ConditionType(StrEnum):
    """The condition types Phalanx writes. Others on a PodGroup (a user's, another controller's)
    are left as they are."""

    ADMITTED = "Admitted"  # True while the gang holds an admission
    DEGRADED = "Degraded"  # True while an admitted gang runs below minMember
    # True while a ProvisioningRequest asks the cluster-autoscaler for the gang's nodes (reason: where it
    # stands); False while the gang waits for capacity with --provisioning-requests off.
    CAPACITY_REQUESTED = "CapacityRequested"


@dataclass(frozen=True, slots=True)
class Condition:
    """A metav1.Condition Phalanx writes."""

    type: ConditionType
    status: bool
    reason: str
    message: str
    last_transition_time: str  # RFC 3339
    observed_generation: int

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type.value,
            "status": "True" if self.status else "False",
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": self.last_transition_time,
            "observedGeneration": self.observed_generation,
        }


_PHASES = {phase.value: phase for phase in Phase}


def _count_of(value: Any) -> int:
    number = whole_number(value)
    return number if number is not None and number > 0 else 0


def _count(wire: str, description: str) -> Any:
    return field(default=0, metadata=about(wire, description, 0))


@dataclass(frozen=True, slots=True)
class PodGroupStatus:
    """``status`` of a PodGroup, of any of the kinds Phalanx serves."""

    phase: Phase | None = field(default=None, metadata=about("phase", "Where the gang is."))
    members: int = _count("members", "Member pods that exist and are not terminating.")
    gated: int = _count("gated", "Of those, members still waiting at the gate.")
    scheduled: int = _count("scheduled", "Of those, members bound to a node and not finished.")
    running: int = _count("running", "Of those, members running.")
    succeeded: int = _count("succeeded", "Members that succeeded.")
    failed: int = _count("failed", "Members that failed.")
    schedule_start_time: str | None = field(
        default=None,
        metadata=about(
            "scheduleStartTime",
            "Start of the gang's current wait (its oldest member's creation, or when it "
            "lost its admission); schedule timeouts count from here.",
            date_time=True,
        ),
    )
    admitted_time: str | None = field(
        default=None,
        metadata=about("admittedTime", "When the gang's gates were lifted.", date_time=True),
    )
    occupied_by: str | None = field(
        default=None,
        metadata=about("occupiedBy", "Owner of the pods (Coscheduling compatibility).", written=False),
    )
    reason: str | None = field(
        default=None, metadata=about("reason", "Reason of the condition that explains the phase.")
    )
    message: str | None = field(
        default=None, metadata=about("message", "Message of that condition: what is missing.")
    )
    # Phalanx's own conditions and everyone else's, each as it is on the wire.
    conditions: tuple[Mapping[str, Any], ...] = field(
        default=(), metadata=about("conditions", "The gang's conditions (Admitted, Degraded) and others'.")
    )

    @classmethod
    def from_json(cls, raw: Any) -> PodGroupStatus:
        """The status as stored; a value of the wrong type reads as absent. (Read for every gang on
        every pass: written out, not by reflection.)"""
        status = obj(raw)
        get = status.get
        return cls(
            phase=_PHASES.get(get("phase")),  # type: ignore[arg-type]
            members=_count_of(get("members")),
            gated=_count_of(get("gated")),
            scheduled=_count_of(get("scheduled")),
            running=_count_of(get("running")),
            succeeded=_count_of(get("succeeded")),
            failed=_count_of(get("failed")),
            schedule_start_time=text(get("scheduleStartTime")) or None,
            admitted_time=text(get("admittedTime")) or None,
            occupied_by=text(get("occupiedBy")) or None,
            reason=text(get("reason")) or None,
            message=text(get("message")) or None,
            conditions=tuple(c for c in get("conditions") or () if isinstance(c, Mapping)),
        )

    def to_json(self) -> dict[str, Any]:
        """Every field Phalanx writes, by its wire name. None is kept on purpose: written as a merge
        patch, it removes a stale value (an admittedTime after a rollback)."""
        out: dict[str, Any] = {}
        for name, wire in _WRITTEN:
            value = getattr(self, name)
            if isinstance(value, Phase):
                value = value.value
            elif isinstance(value, tuple):
                value = [dict(c) for c in value]
            out[wire] = value
        return out

    def condition(self, kind: ConditionType) -> Mapping[str, Any] | None:
        return next((c for c in self.conditions if c.get("type") == kind.value), None)


# (attribute, wire name) of every status field Phalanx writes, in declaration order.
_WRITTEN = tuple(
    (f.name, f.metadata["about"].wire) for f in fields(PodGroupStatus) if f.metadata["about"].written
)


def status_fields() -> list[tuple[SpecField, str]]:
    """Every status field's schema facts and its Python type, in declaration order (for crdgen)."""
    return described(PodGroupStatus)
