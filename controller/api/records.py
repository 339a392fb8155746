"""Raw API objects -> slim, immutable records: every object the controller watches is parsed here,
once, when its event arrives (the store only keeps records).

Pure functions (no I/O). Pods are parsed once, so the store keeps ~1 KB per pod instead of the raw
object; a 50,000-pod cluster must fit in a few hundred MB.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from controller.api.dra_records import pod_claims
from controller.api.node_selectors import requirements as _requirements
from controller.api.resources import ResourceType
from controller.core import (
    NODE_NAME_FIELD,
    GangKey,
    Node,
    OwnerRef,
    Pod,
    Requirement,
    Taint,
    Toleration,
    effective_requests,
)
from controller.core import messages as msg
from shared import constants, grouplink, native
from shared.jsonread import (
    get_in,
    integer,
    items,
    labels_of,
    metadata_of,
    name_of,
    namespace_of,
    obj,
    strings,
    text,
)
from shared.kinds import KINDS
from shared.podgroup import PodGroupSpec, PodGroupStatus, subgroup_minimums
from shared.quantities import QuantityError, parse_resources
from shared.topology import KUEUE_ANNOTATIONS, TopologyAsk, from_kai, from_volcano, subgroup_levels

KUEUE_TOPOLOGY_ANNOTATIONS = frozenset(KUEUE_ANNOTATIONS.values())


def parse_time(value: object) -> float | None:
    """An RFC 3339 timestamp as seconds since the epoch."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def node_record(raw: Mapping[str, Any]) -> Node:
    meta = metadata_of(raw)
    spec, status = obj(raw.get("spec")), obj(raw.get("status"))
    try:
        allocatable = parse_resources(status.get("allocatable"))
    except QuantityError:
        allocatable = {}
    ready = any(
        cond.get("type") == "Ready" and cond.get("status") == "True"
        for cond in items(status.get("conditions"))
    )
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "NoSchedule")))
        for t in items(spec.get("taints"))
        if isinstance(t, Mapping)
    )
    return Node(
        name=str(meta.get("name", "")),
        allocatable=allocatable,
        labels=strings(meta.get("labels")),
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
        created=parse_time(meta.get("creationTimestamp")) or 0.0,
    )


def _requirement_json(req: Requirement) -> dict[str, Any]:
    out: dict[str, Any] = {"key": req.key, "operator": req.operator}
    if req.values:
        out["values"] = list(req.values)
    return out


def pinned_node_terms(pod: Pod, node: str) -> list[dict[str, Any]]:
    """The pod's required node-selector terms with a pin to ``node`` (by name) added to each.

    A gated pod's required node affinity may only be tightened (requirements added, none changed),
    so the pod's own terms are written back as they are, each with ``metadata.name In [node]``
    appended to its ``matchFields``; a pod without terms gets that one requirement. Pinning by name
    is what the DaemonSet controller does: the ``kubernetes.io/hostname`` label need not equal it.
    """
    pin = {"key": NODE_NAME_FIELD, "operator": "In", "values": [node]}
    if not pod.required_affinity:
        return [{"matchFields": [pin]}]
    terms = []
    for term in pod.required_affinity:
        out: dict[str, Any] = {}
        expressions = [_requirement_json(r) for r in term if not r.field]
        fields = [_requirement_json(r) for r in term if r.field]
        if expressions:
            out["matchExpressions"] = expressions
        out["matchFields"] = [*fields, pin]
        terms.append(out)
    return terms


def _unmodelled(affinity: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    required = "requiredDuringSchedulingIgnoredDuringExecution"
    spread = any(
        isinstance(t, Mapping) and t.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
        for t in items(spec.get("topologySpreadConstraints"))
    )
    return msg.unmodelled(
        bool(get_in(affinity, "podAffinity", required)),
        bool(get_in(affinity, "podAntiAffinity", required)),
        spread,
    )


def owner_of(meta: Mapping[str, Any]) -> OwnerRef | None:
    for ref in items(meta.get("ownerReferences")):
        if isinstance(ref, Mapping) and ref.get("controller"):
            return OwnerRef(
                str(ref.get("apiVersion", "")),
                str(ref.get("kind", "")),
                str(ref.get("name", "")),
                str(ref.get("uid", "")),
            )
    return None


class InvalidPod(ValueError):
    """A pod whose requests cannot be parsed; reported on its PodGroup."""


def _required_terms(affinity: Mapping[str, Any]) -> tuple[tuple[Requirement, ...], ...]:
    required = obj(get_in(affinity, "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"))
    return tuple(_requirements(t) for t in items(required.get("nodeSelectorTerms")) if isinstance(t, Mapping))


def _tolerations(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
    return tuple(
        Toleration(
            str(t.get("key", "")),
            str(t.get("operator", "Equal")),
            str(t.get("value", "")),
            str(t.get("effect", "")),
        )
        for t in items(spec.get("tolerations"))
        if isinstance(t, Mapping)
    )


def _preemptible(labels: Mapping[str, str], annotations: Mapping[str, str]) -> bool:
    return not (
        labels.get(constants.PREEMPTIBLE, "").lower() == "false"
        or annotations.get(constants.PREEMPTIBLE, "").lower() == "false"
    )


CONSUME_ANNOTATIONS = frozenset(
    (constants.CONSUME_PROVISIONING_REQUEST_ANNOTATION, constants.PROVISIONING_CLASS_ANNOTATION)
)


def _kept_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """Phalanx's own annotations, the group links, Kueue's topology requests and the autoscaler's
    consume annotations (the lifting patch must not change a pod's own): all the controller reads
    (memory)."""
    return {
        k: v
        for k, v in annotations.items()
        if k.startswith(constants.DOMAIN)
        or k in constants.GROUP_LINK_ANNOTATIONS
        or k in KUEUE_TOPOLOGY_ANNOTATIONS
        or k in CONSUME_ANNOTATIONS
    }


def pod_record(raw: Mapping[str, Any]) -> Pod:
    meta = metadata_of(raw)
    spec, status = obj(raw.get("spec")), obj(raw.get("status"))
    labels, annotations = strings(meta.get("labels")), strings(meta.get("annotations"))
    try:
        requests = effective_requests(spec)
    except (QuantityError, ValueError) as err:
        raise InvalidPod(msg.invalid_pod(meta.get("namespace"), meta.get("name"), err)) from err
    gates = [str(g.get("name", "")) for g in items(spec.get("schedulingGates")) if isinstance(g, Mapping)]
    affinity = obj(spec.get("affinity"))
    link = grouplink.resolve(labels, annotations, spec)
    ref = grouplink.workload_ref(spec)
    return Pod(
        uid=str(meta.get("uid", "")),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        requests=requests,
        priority=int(spec.get("priority") or 0),
        created=parse_time(meta.get("creationTimestamp")) or 0.0,
        phase=str(status.get("phase") or "Pending"),
        node_name=spec.get("nodeName") or None,
        nominated_node=status.get("nominatedNodeName") or None,
        gated=constants.GATE in gates,
        foreign_gates=tuple(sorted(g for g in gates if g != constants.GATE)),
        terminating=bool(meta.get("deletionTimestamp")),
        node_selector=strings(spec.get("nodeSelector")),
        required_affinity=_required_terms(affinity),
        tolerations=_tolerations(spec),
        unmodelled=_unmodelled(affinity, spec),
        claims=pod_claims(spec, status),
        extended_claim=obj(status.get("extendedResourceClaimStatus")).get("resourceClaimName") or None,
        group=link.name if link else None,
        workload=ref[:2] if ref else None,
        scheduling_group=grouplink.scheduling_group(spec),
        owner=owner_of(meta),
        labels=labels,
        annotations=_kept_annotations(annotations),
        started=parse_time(status.get("startTime")),
        preemptible=_preemptible(labels, annotations),
        preemption_policy=str(spec.get("preemptionPolicy") or "PreemptLowerPriority"),
    )


# ---- PodGroups ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodGroupRecord:
    rt: ResourceType
    namespace: str
    name: str
    uid: str
    created: float
    generation: int
    spec: PodGroupSpec
    status: dict[str, Any]
    labels: dict[str, str]
    annotations: dict[str, str]
    owner_references: list[dict[str, Any]]
    # KAI's spec.subGroups: {leaf subgroup: its minMember} (empty for every other kind).
    subgroups: Mapping[str, int] = field(default_factory=dict)
    # KAI's spec.topologyConstraint (empty for every other kind).
    kai_topology: TopologyAsk = field(default_factory=TopologyAsk)
    # Volcano's spec.networkTopology (empty for every other kind).
    volcano_topology: TopologyAsk = field(default_factory=TopologyAsk)
    # KAI's leaf subgroups' own required levels: {leaf subgroup: node label key}.
    subgroup_topology: Mapping[str, str] = field(default_factory=dict)
    # ``status`` read into the typed model once per record (every pass reads it for every gang);
    # ``status`` itself stays as stored, so a merge patch's result can be assumed on it.
    parsed_status: PodGroupStatus = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parsed_status", PodGroupStatus.from_json(self.status))

    @property
    def key(self) -> GangKey:
        return GangKey(self.namespace, self.name)

    @property
    def managed(self) -> bool:
        """Made by Phalanx for a gang that had none (not applied by a user)."""
        return self.labels.get(constants.MANAGED_BY_LABEL) == constants.MANAGED_BY_PHALANX


def podgroup_record(rt: ResourceType, raw: Mapping[str, Any]) -> PodGroupRecord:
    meta = metadata_of(raw)
    return PodGroupRecord(
        rt=rt,
        namespace=text(meta.get("namespace")),
        name=text(meta.get("name")),
        uid=text(meta.get("uid")),
        created=parse_time(meta.get("creationTimestamp")) or 0.0,
        generation=integer(meta.get("generation"), 0),
        spec=PodGroupSpec.from_json(raw.get("spec")),
        status=dict(obj(raw.get("status"))),
        labels=strings(meta.get("labels")),
        annotations=strings(meta.get("annotations")),
        owner_references=[ref for ref in items(meta.get("ownerReferences")) if isinstance(ref, dict)],
        subgroups=subgroup_minimums(raw.get("spec")),
        kai_topology=from_kai(raw.get("spec")),
        volcano_topology=from_volcano(raw.get("spec")),
        subgroup_topology=subgroup_levels(raw.get("spec")),
    )


def gang_key_of(raw: Mapping[str, Any]) -> GangKey:
    """The gang a PodGroup object is for (its namespace and name)."""
    meta = metadata_of(raw)
    return GangKey(text(meta.get("namespace")), text(meta.get("name")))


# ---- cluster settings: priority classes, disruption budgets, namespaces ------------------------------


@dataclass(frozen=True, slots=True)
class PriorityClass:
    value: int
    preemption_policy: str


def priority_class_record(raw: Mapping[str, Any]) -> PriorityClass:
    return PriorityClass(
        integer(raw.get("value"), 0), text(raw.get("preemptionPolicy")) or "PreemptLowerPriority"
    )


@dataclass(frozen=True, slots=True)
class DisruptionBudget:
    namespace: str
    name: str
    match_labels: Mapping[str, str]
    match_expressions: tuple[tuple[str, str, tuple[str, ...]], ...]
    disruptions_allowed: int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def selects(self, pod: Pod) -> bool:
        if pod.namespace != self.namespace:
            return False
        if any(pod.labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        for key, op, values in self.match_expressions:
            present = key in pod.labels
            if op == "In" and pod.labels.get(key) not in values:
                return False
            if op == "NotIn" and present and pod.labels[key] in values:
                return False
            if op == "Exists" and not present:
                return False
            if op == "DoesNotExist" and present:
                return False
        return True


def budget_key_of(raw: Mapping[str, Any]) -> str:
    meta = metadata_of(raw)
    return f"{text(meta.get('namespace'))}/{text(meta.get('name'))}"


def budget_record(raw: Mapping[str, Any]) -> DisruptionBudget:
    meta = metadata_of(raw)
    selector = obj(get_in(raw, "spec", "selector"))
    expressions = tuple(
        (text(e.get("key")), text(e.get("operator")), tuple(str(v) for v in items(e.get("values"))))
        for e in items(selector.get("matchExpressions"))
        if isinstance(e, dict)
    )
    return DisruptionBudget(
        namespace=text(meta.get("namespace")),
        name=text(meta.get("name")),
        match_labels=strings(selector.get("matchLabels")),
        match_expressions=expressions,
        disruptions_allowed=integer(get_in(raw, "status", "disruptionsAllowed"), 0),
    )


@dataclass(frozen=True, slots=True)
class NamespaceRecord:
    name: str
    opted_in: bool  # labelled phalanx.io/gang-scheduling=enabled
    terminating: bool


def namespace_record(raw: Mapping[str, Any]) -> NamespaceRecord:
    meta = metadata_of(raw)
    return NamespaceRecord(
        name=text(meta.get("name")),
        opted_in=labels_of(raw).get(constants.OPT_IN_LABEL) == constants.OPT_IN_VALUE,
        terminating=bool(meta.get("deletionTimestamp")),
    )


# ---- the native Workload API ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkloadApiRecord:
    """A ``scheduling.k8s.io`` Workload: the gang size of each of its podGroups."""

    namespace: str
    name: str
    uid: str
    min_counts: Mapping[str, int]  # podGroup name -> minCount
    # The released Workload API has no gang timeout: Phalanx reads its annotation on the Workload.
    timeout_seconds: int | None

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name


def workload_api_record(raw: Mapping[str, Any]) -> WorkloadApiRecord:
    """A Workload of any version Phalanx reads (shared/native.py says where each keeps its sizes)."""
    meta = metadata_of(raw)
    return WorkloadApiRecord(
        namespace=text(meta.get("namespace")),
        name=text(meta.get("name")),
        uid=text(meta.get("uid")),
        min_counts=native.workload_min_counts(raw),
        timeout_seconds=native.timeout_annotation(raw),
    )


# ---- workloads that size their gang ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkloadSize:
    """How big a workload's gang is by its spec now (Job, StatefulSet, an operator's object)."""

    kind: str
    namespace: str
    name: str
    size: int  # members that must start together
    largest: int | None  # members it may have at once (elastic ones included); None: no bound

    @property
    def key(self) -> tuple[str, str, str]:
        return self.kind, self.namespace, self.name


def workload_size_record(rt: ResourceType, raw: Mapping[str, Any]) -> WorkloadSize | None:
    """Sized by the very function the webhook sized the workload with at its creation; None for a
    Job or StatefulSet another workload made (mpi-operator's launcher Job, a LeaderWorkerSet's
    StatefulSets): its pods' gang is sized by that workload, not by this one's own spec."""
    if rt.kind in ("Job", "StatefulSet") and owner_of(metadata_of(raw)) is not None:
        return None
    kind, spec = KINDS[(rt.group, rt.version, rt.kind)], obj(raw)
    return WorkloadSize(
        rt.kind, namespace_of(raw), name_of(raw), kind.gang_size(spec), kind.largest_gang(spec)
    )
