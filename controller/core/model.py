"""The immutable snapshot the pure core decides on, and the plan it returns.

The shell builds these from the informers' caches; the core never sees a raw API object or a
clock -- ``now`` (seconds since the epoch) is an input. Everything is frozen so that a snapshot can
be shared between a planning pass and the status writer without copies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeAlias

from controller.core.dra import DraWorld, PodClaim
from shared.constants import GPU_RESOURCE

# name -> exact integer amount (milli-CPU, bytes, counts); see shared.quantities.
Resources: TypeAlias = Mapping[str, int]


@dataclass(frozen=True, slots=True)
class GangKey:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""  # empty key with operator Exists tolerates everything
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty matches every effect


# The one node field a node-selector term may match on (``matchFields``): the node's name.
NODE_NAME_FIELD = "metadata.name"


@dataclass(frozen=True, slots=True)
class Requirement:
    """One node-selector requirement of required node affinity."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist | Gt | Lt
    values: tuple[str, ...] = ()
    # From ``matchFields``: ``key`` is a node field (only NODE_NAME_FIELD exists), not a label.
    field: bool = False


# Terms are ORed, requirements inside a term are ANDed (as in the API).
NodeSelectorTerm: TypeAlias = tuple[Requirement, ...]


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    allocatable: Resources  # includes "pods"
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False  # cordoned
    ready: bool = True
    created: float = 0.0  # creationTimestamp, seconds since the epoch (which nodes a booking made)


@dataclass(frozen=True, slots=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class Pod:
    """A slim pod record: only what placement, ordering and status need."""

    uid: str
    namespace: str
    name: str
    # Effective request (max of init containers vs. sum of containers + sidecars, + overhead).
    requests: Resources
    priority: int = 0
    created: float = 0.0  # creationTimestamp, seconds since the epoch
    phase: str = "Pending"  # Pending | Running | Succeeded | Failed | Unknown
    node_name: str | None = None  # bound when set
    nominated_node: str | None = None  # the scheduler's nomination (status.nominatedNodeName)
    gated: bool = False  # carries the phalanx.io/gang gate
    foreign_gates: tuple[str, ...] = ()  # gates of other systems: never touched, block admission
    terminating: bool = False
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_affinity: tuple[NodeSelectorTerm, ...] = ()  # empty: no required node affinity
    tolerations: tuple[Toleration, ...] = ()
    # Why the core cannot model this pod's constraints (inter-pod affinity, topology spread), or None.
    unmodelled: str | None = None
    # spec.resourceClaims (DRA): core/devices.py turns them into requests before a pass.
    claims: tuple[PodClaim, ...] = ()
    # Why its DRA device demand cannot be proven (its gang waits, saying so), or None.
    devices_unproven: str | None = None
    # status.extendedResourceClaimStatus.resourceClaimName: the claim the scheduler made for its
    # extended-resource requests (DRA), or None.
    extended_claim: str | None = None
    group: str | None = None  # canonical PodGroup name (same namespace), None for non-gang pods
    # spec.workloadRef (workload, podGroup): where a native Workload's gang size comes from.
    workload: tuple[str, str] | None = None
    # spec.schedulingGroup.podGroupName (1.36+): the native PodGroup whose policy sizes the gang.
    scheduling_group: str | None = None
    owner: OwnerRef | None = None  # controlling owner (Job, StatefulSet, MPIJob, ...)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    started: float | None = None  # status.startTime (for the minimum runtime before preemption)
    # "namespace/name" of a PodDisruptionBudget that selects this pod, if any.
    disruption_budget: str | None = None
    preemptible: bool = True  # False with phalanx.io/preemptible: "false" (label or annotation)
    # spec.preemptionPolicy, resolved by the API server from the pod's PriorityClass.
    preemption_policy: str = "PreemptLowerPriority"

    @property
    def bound(self) -> bool:
        return self.node_name is not None

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def holds_capacity(self) -> bool:
        """Does this pod occupy room on a node now (bound, or nominated, and not finished)?"""
        return not self.finished and (self.node_name is not None or self.nominated_node is not None)


class DisruptionMode(StrEnum):
    """What preemption may evict of a running gang (PodGroup spec.disruptionMode)."""

    ALL = "All"  # the whole gang, never a part of it
    SINGLE = "Single"  # single pods, as many as needed; the rest keeps running


class Placement(StrEnum):
    PINNED = "pinned"  # each member gets nodeSelector kubernetes.io/hostname=<planned node>
    FREE = "free"  # gates lifted, the scheduler chooses (the plan still proved a fit exists)


@dataclass(frozen=True, slots=True)
class GangTopology:
    """A gang's topology request beyond ``Gang.required_topology``.

    ``name``: the cluster topology (PlannerConfig.topologies) whose levels it is kept in (None: the
    first). ``preferred``: a level key tried first, then the wider levels, then anywhere.
    ``slice_key``/``slice_size``: every ``slice_size`` members (in member order) run inside one
    domain of ``slice_key``. ``required_tier``/``preferred_tier``: Volcano's highestTierAllowed
    (hard or soft), the N-th level of the topology narrowest first, until the planning pass resolves
    it into ``Gang.required_topology`` or ``preferred`` (core/topology.py ``resolve_tiers``; -1: not
    a positive count). ``conflict``: why its sources disagree (told as InvalidSpec)."""

    name: str | None = None
    preferred: str | None = None
    slice_key: str | None = None
    slice_size: int = 0
    required_tier: int = 0
    preferred_tier: int = 0
    # KAI subgroups with a required level of their own: (leaf subgroup, node label key), sorted.
    subgroup_levels: tuple[tuple[str, str], ...] = ()
    conflict: str | None = None


@dataclass(frozen=True, slots=True)
class Gang:
    """A PodGroup and its member pods, as the core sees them."""

    key: GangKey
    min_member: int
    members: tuple[Pod, ...]
    max_member: int | None = None  # elastic: admit beyond min up to max when room allows
    # The members' pod priority (resolved by the API server from their PriorityClass, which
    # Kubernetes governs): the order across namespaces and who may preempt whom.
    priority: int = 0
    # The PodGroup's own priority (its priorityClassName's value or spec.priority), which any
    # tenant can write: it orders gangs inside their own namespace only. None: no own priority.
    local_priority: int | None = None
    created: float = 0.0  # PodGroup creation, or the first member's, seconds since the epoch
    schedule_timeout: float | None = None  # seconds from `waiting_since`; None: no timeout
    # Start of the current wait: `created`, or when the gang last lost its admission (preempted,
    # rolled back). Timeouts and starvation age count from here; order by age still uses `created`.
    waiting_since: float | None = None
    placement: Placement = Placement.PINNED
    preemptible: bool = True
    preemption_policy: str = "PreemptLowerPriority"  # or "Never" (from the PriorityClass)
    # Members the gang's workload can ever create (None: unknown); minMember above it is invalid.
    creatable: int | None = None
    # Already admitted by Phalanx and recorded on the PodGroup: pod uid -> planned node (None: free).
    admitted: Mapping[str, str | None] = field(default_factory=dict)
    admitted_at: float | None = None
    parent: str | None = None  # parentPodGroup (KAI): admitted only together with its siblings
    queue: str | None = None
    # Room held for this gang while its preemption victims terminate: pod uid -> node.
    held: Mapping[str, str | None] = field(default_factory=dict)
    held_since: float | None = None
    # The node the simulation booked for admitted members that were placed without a pin (FREE gangs,
    # unmodelled members): pod uid -> node, copied from `Admit.booked`. Lets the core keep counting
    # their room until they bind; without it an unpinned, unbound admitted member books nothing.
    booked: Mapping[str, str] = field(default_factory=dict)
    # PodGroup spec.minResources (as Coscheduling): the gang starts only when this much is free in
    # the cluster, summed over the nodes that take pods.
    min_resources: Resources = field(default_factory=dict)
    # KAI subgroups: {subgroup: its minMember}. Members name theirs with the label
    # kai.scheduler/subgroup-name; the gang starts only with each subgroup's minimum among it.
    subgroups: Mapping[str, int] = field(default_factory=dict)
    # When members were last admitted (None: not admitted): the bind timeout counts from here.
    last_admitted_at: float | None = None
    # Since when an admitted gang runs below minMember with nothing of it left to bind (a node
    # drained, a member evicted); None while it is whole. The degraded timeout counts from here.
    degraded_since: float | None = None
    # A node label key (e.g. topology.kubernetes.io/rack): every member must run inside ONE domain
    # of it (nodes sharing one value); nodes without the label are never used. None: no such need.
    required_topology: str | None = None
    disruption_mode: DisruptionMode = DisruptionMode.ALL
    # The rest of what the gang asks of topology: which of the cluster's topologies, a preferred
    # level, slices (see GangTopology and core/topology.py).
    topology: GangTopology = field(default_factory=GangTopology)
    # The cluster-autoscaler provisioned nodes for this gang (its ProvisioningRequest is Provisioned
    # and its booking lasts): it is planned before every other gang, so the room made for it is not
    # given to a gang planned after it.
    capacity_booked: bool = False
    # Its ProvisioningRequest is out and not yet answered (Requested or Accepted, for at most
    # ProvisioningConfig.answer_seconds): it waits for its own nodes rather than taking room that
    # may have been made for another gang's request.
    capacity_awaited: bool = False
    # When its current ProvisioningRequest was created (booked or awaited gangs): nodes registered
    # since may be the ones asked for, its own (booked) or another gang's (awaited).
    capacity_since: float | None = None
    # Why the gang's admission could not be recorded on its PodGroup (too many members for the
    # annotation that holds it): it is not admitted while it keeps this many members.
    unrecordable: str | None = None

    @property
    def wait_start(self) -> float:
        return self.created if self.waiting_since is None else self.waiting_since


@dataclass(frozen=True, slots=True)
class QueueResource:
    """One resource of a queue: quota (guaranteed), limit (never exceeded; None: unlimited) and the
    weight by which it shares capacity beyond the quotas."""

    quota: int = 0
    limit: int | None = None
    over_quota_weight: float = 1.0


@dataclass(frozen=True, slots=True)
class Queue:
    """A queue of the hierarchy (see core/queues.py). A resource it does not name has no quota, no
    limit and weight 1."""

    name: str
    parent: str | None = None
    resources: Mapping[str, QueueResource] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class QueueGrant:
    """The queues a platform engineer granted a namespace (namespaces are theirs to label): the one
    it is ``bound`` to (its gangs' default, and the queue charged for what runs there outside
    Phalanx) and the further ones it may name (``allowed``, in the order they were listed)."""

    bound: str | None = None
    allowed: tuple[str, ...] = ()

    @property
    def queues(self) -> tuple[str, ...]:
        """Every queue granted, the bound one first (as messages list them)."""
        head = (self.bound,) if self.bound else ()
        return head + tuple(q for q in self.allowed if q != self.bound)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything a planning pass reads. Identical snapshots give identical plans."""

    nodes: tuple[Node, ...]
    # Every pod the cluster knows (all namespaces): bound ones hold capacity whoever owns them.
    pods: tuple[Pod, ...]
    gangs: tuple[Gang, ...]
    now: float
    # Namespaces labelled phalanx.io/gang-scheduling=enabled: their non-gang pods may be preempted.
    opted_in_namespaces: frozenset[str] = frozenset()
    # PodDisruptionBudget "namespace/name" -> status.disruptionsAllowed.
    disruptions_allowed: Mapping[str, int] = field(default_factory=dict)
    # Queues by name. Empty: no queue semantics at all (every gang is ordered as without queues).
    queues: Mapping[str, Queue] = field(default_factory=dict)
    # Namespace -> the queues it was granted (only namespaces granted any).
    grants: Mapping[str, QueueGrant] = field(default_factory=dict)
    # DRA devices, classes and claims (None: the cluster serves no DRA, or none is used).
    devices: DraWorld | None = None


# ---- the plan -------------------------------------------------------------------------------


class Reason(StrEnum):
    """PascalCase words written to PodGroup conditions and Events."""

    ADMITTED = "Admitted"  # gates lifted: the whole gang fits and was let go
    WAITING_FOR_MEMBERS = "WaitingForMembers"  # fewer than minMember pods exist yet
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"  # the whole gang (or its minResources) does not fit now
    UNSCHEDULABLE = "Unschedulable"  # no node could ever host a member (empty cluster too small)
    FOREIGN_GATES = "ForeignGates"  # another system's scheduling gate is still on a member
    WAITING_FOR_PARENT = "WaitingForSiblings"  # a child of a parentPodGroup waits for its siblings
    RESERVED = "Reserved"  # holds a starvation reservation
    # would fit, but in room reserved for a starving gang or provisioned for a booked one
    BLOCKED_BY_RESERVATION = "BlockedByReservation"
    PREEMPTING = "Preempting"  # lower-priority gangs are being evicted to make room
    SCHEDULING_TIMEOUT = "SchedulingTimeout"  # not admitted within its schedule timeout
    DEVICES_UNPROVEN = "DevicesUnproven"  # a member's DRA claims ask what Phalanx cannot prove fits
    INVALID_SPEC = "InvalidSpec"  # a spec that can never be satisfied (e.g. minMember > creatable)
    QUEUE_NOT_FOUND = "QueueNotFound"  # names a queue that does not exist (or is not a leaf)
    QUEUE_LIMIT = "QueueLimit"  # its queue, or an ancestor, would go beyond its limit
    QUEUE_NOT_ALLOWED = "QueueNotAllowed"  # names a queue its namespace was not granted
    FINISHED = "Finished"  # at least minMember members succeeded and none runs any more
    MEMBERS_FAILED = "MembersFailed"  # so many members failed that the rest cannot make up the gang
    # An admitted gang runs below minMember, the rest gone (node drained, pod evicted); also the
    # Degraded condition's reason while it is True.
    DEGRADED = "Degraded"
    WHOLE = "Whole"  # the Degraded condition's reason once it is False: every member it needs runs or is done


class EventReason(StrEnum):
    """PascalCase reasons of the Events the controller posts (on PodGroups, their Workloads and
    member pods). A reason also a PodGroup condition's reason is spelled the same."""

    ADMITTED = "Admitted"  # the gang's gates were lifted
    MEMBERS_ADMITTED = "MembersAdmitted"  # replacements or elastic members of an admitted gang joined
    WAITING = "Waiting"  # not admitted; the message says why (once per waiting reason)
    DEVICES_UNPROVEN = "DevicesUnproven"  # a member's DRA claims ask what Phalanx cannot prove fits
    INVALID_SPEC = "InvalidSpec"  # a spec that can never be satisfied: the gang will not be admitted
    TIMED_OUT = "TimedOut"  # not admitted within its schedule timeout
    GAVE_UP = "GaveUp"  # timed out with --schedule-timeout-action release: members released
    ROLLED_BACK = "RolledBack"  # admitted members did not bind in time, or the gang stayed degraded
    PREEMPTING = "Preempting"  # evicting lower-priority gangs to make room for this one
    PREEMPTED = "Preempted"  # evicted to make room for another gang (whole, or single pods: Single mode)
    PREEMPTION_DRY_RUN = "PreemptionDryRun"  # what --preemption-dry-run would have evicted
    PREEMPTION_BLOCKED = "PreemptionBlocked"  # a PodDisruptionBudget refused an eviction
    INVALID_MEMBER = "InvalidMember"  # a member whose requests cannot be read
    GATE_BYPASSED = "GateBypassed"  # a member bound without Phalanx's admission
    WAITING_FOR_WORKLOAD = "WaitingForWorkload"  # (on pods) the Workload they name does not exist yet
    WAITING_FOR_POD_GROUP = "WaitingForPodGroup"  # (on pods) the PodGroup they name does not exist yet
    # --provisioning-requests: the cluster-autoscaler was asked for the gang's nodes (a ProvisioningRequest)
    PROVISIONING_REQUESTED = "ProvisioningRequested"
    CAPACITY_PROVISIONED = "CapacityProvisioned"  # the autoscaler provisioned (or found) the gang's nodes
    # it found no room (Provisioned=False), failed the request, or the booking ended
    PROVISIONING_FAILED = "ProvisioningFailed"


@dataclass(frozen=True, slots=True)
class Admit:
    gang: GangKey
    # pod uid -> node the simulation chose (None: placed without a pin, see `notes`).
    placement: Mapping[str, str | None]
    message: str
    notes: tuple[str, ...] = ()  # e.g. "web-0: inter-pod affinity not modelled, placed without a pin"
    # pod uid -> the node the simulation booked for it, for every admitted member, pinned or not.
    # Record it with the admission (Gang.booked) so unpinned members keep their room until they bind.
    booked: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Wait:
    gang: GangKey
    reason: Reason
    message: str  # what is missing, for a person
    timed_out: bool = False  # schedule timeout passed (PodGroup turns Failed/SchedulingTimeout)
    # Reason RESERVED: the nodes reserved for this starving gang in this pass (sorted).
    reserved_nodes: tuple[str, ...] = ()
    # A capacity wait its queue's limit leaves room to ask the autoscaler for, counting what the
    # gangs planned before it in this pass ask for (--provisioning-requests).
    may_ask: bool = True
    # The gated members the gang needs to start (uids), which a capacity request asks for; None:
    # not worked out (every gated member).
    asks_for: tuple[str, ...] | None = None


# The waits that only more nodes can end. Not WAITING_FOR_MEMBERS, QUEUE_LIMIT, PREEMPTING,
# RESERVED or BLOCKED_BY_RESERVATION: members, a queue or nodes already promised end those.
CAPACITY_WAITS = frozenset({Reason.INSUFFICIENT_CAPACITY, Reason.UNSCHEDULABLE})


@dataclass(frozen=True, slots=True)
class Reject:
    gang: GangKey
    reason: Reason
    message: str


@dataclass(frozen=True, slots=True)
class Victim:
    gang: GangKey | None  # None for a non-gang pod
    pods: tuple[str, ...]  # pod uids to evict
    namespace: str
    gpus: int = 0  # what its evicted pods hold of the GPU resource (the preemption's cost to it)
    # False: some pods of a gang with disruption mode Single; the rest keeps running, admitted.
    whole: bool = True


@dataclass(frozen=True, slots=True)
class Preempt:
    gang: GangKey  # the preemptor
    victims: tuple[Victim, ...]
    # Room held for the preemptor until the victims are gone: pod uid -> node.
    placement: Mapping[str, str | None]
    message: str
    # Reclaim: the queues whose borrowed room is taken back (empty for priority preemption).
    reclaimed_from: tuple[str, ...] = ()
    # The cost: GPUs the victims lose, and GPUs the preemptor's placed members get.
    gpus_evicted: int = 0
    gpus_gained: int = 0
    # What those count: the GPU resource, or on a cluster whose GPUs are DRA devices, their class.
    gpu_resource: str = GPU_RESOURCE
    gpu_seconds: float = 0.0  # the victims' GPUs times how long each pod has run: the work lost


@dataclass(frozen=True, slots=True)
class Short:
    """An admitted gang short of members it needs -- its workload was scaled up, or members were
    lost -- whose missing members cannot all start yet. They wait, gated, to start together; the
    members that run keep running (a Wait would read as "not admitted")."""

    gang: GangKey
    # WAITING_FOR_MEMBERS, INSUFFICIENT_CAPACITY, UNSCHEDULABLE, QUEUE_LIMIT or DEVICES_UNPROVEN
    reason: Reason
    message: str
    missing: int  # members it needs beyond those that run or are admitted


Decision: TypeAlias = Admit | Wait | Reject | Preempt | Short


@dataclass(frozen=True, slots=True)
class QueueReport:
    """A queue after the pass: resource name -> amount, subtree included (ancestors sum children)."""

    allocated: Mapping[str, int]
    requested: Mapping[str, int]  # allocated plus what waiting gangs ask for
    fair_share: Mapping[str, float]
    admitted_gangs: int
    waiting_gangs: int
    # Of allocated: what pods outside Phalanx hold in namespaces bound to the queue (subtree included).
    outside: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Plan:
    decisions: tuple[Decision, ...]  # at most one per gang, in planning order
    # Per queue, its usage and fair share as this pass saw them (empty without queues).
    queues: Mapping[str, QueueReport] = field(default_factory=dict)
    # gang -> its decision, built on first use (for_gang is O(1), not a scan per call)
    _by_gang: dict[GangKey, Decision] = field(default_factory=dict, init=False, repr=False, compare=False)

    def for_gang(self, key: GangKey) -> Decision | None:
        if not self._by_gang and self.decisions:
            for decision in self.decisions:
                self._by_gang.setdefault(decision.gang, decision)
        return self._by_gang.get(key)
