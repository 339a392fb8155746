"""The pure decision core: snapshot + now in, plan out. No I/O, no wall clock.

The shell (api, pipeline, runtime, cli) uses only the names exported here (an import-linter
contract in pyproject.toml keeps it so); the modules below are the core's own business. What the
shell calls:

- ``plan(snapshot, config=None) -> Plan``: at most one decision per gang, in planning order;
- ``PlannerConfig``: the knobs (frozen);
- ``effective_requests(raw_pod_spec) -> dict[str, int]``: a pod's request per resource, raising
  ``InvalidRequests`` (a ValueError) on a bad quantity;
- ``invalid_spec(gang)``: why a PodGroup's spec can never be satisfied (or None), for admission-time
  validation;
- ``pod_allows_node(pod, node)``: one pod's constraints against one node (readiness included);
- ``timers.decide`` (exported as ``decide_timers``): rollbacks and timeouts the clock brings;
- ``provisioning.decide`` (exported as ``decide_provisioning``): the ProvisioningRequests the
  cluster-autoscaler is asked for (one per gang waiting for capacity only) and what each says;
- ``explain`` and its changes (``whatif``), ``without``: counterfactuals for ``kubectl phalanx``;
- ``messages``: every sentence written for a person, for the shell's own reports too;
- the snapshot model and the decisions (``model``), ``is_live``, ``QueueTree``.

Modules, one job each:

- ``model``: the snapshot the core reads and the plan it returns (the contract with the shell);
- ``config``: ``PlannerConfig``;
- ``requests``: the effective request of a raw pod spec;
- ``fit``: nodeSelector, node affinity, taints and tolerations, readiness; constraint masks per pass;
- ``capacity``: free room per node with GPU buckets, topology-domain counts and an undo journal;
- ``shapes``: identical members grouped into shapes (requests + constraints);
- ``state``: everything a pass derives from a snapshot (used room, reservations, held rooms);
- ``placement``: all-or-nothing gang placement (best fit, fewest nodes, one rack/zone preferred, one
  domain of any label required), fit memo;
- ``ordering``: the order of gangs (priority, age, name) and of members;
- ``preemption``: victim search (least cost, add-back): whole gangs, or single pods (Single mode);
- ``queues``: quotas, limits, hierarchical fair share, the order across queues, reclaim's victims;
- ``reservation``: starvation reservations and the "could it ever fit" check;
- ``messages``: every sentence written for a person;
- ``planner``: one pass, gang by gang;
- ``timers``: bind, degraded and schedule timeouts -> RollBack | TimedOut | Recheck;
- ``whatif``: what would change a gang's decision;
- ``dra``: the DRA records (devices, DeviceClasses, claims); ``devices``: them as node room and
  member demand before a pass; ``device_cel``: their CEL selectors; ``group_claims``: a native
  PodGroup's claims, shared by its members;
- ``provisioning``: which gangs ask the cluster-autoscaler for nodes, and what their requests say.
"""

from controller.core import messages
from controller.core.config import DEFAULT_LEVELS, DEFAULT_TOPOLOGY, PlannerConfig
from controller.core.devices import class_resource, gpu_resource_of, with_devices
from controller.core.dra import (
    AttributeValue,
    Claim,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    DraWorld,
    GroupClaim,
    NodeReach,
    PodClaim,
)
from controller.core.fit import pod_allows_node
from controller.core.model import (
    NODE_NAME_FIELD,
    Admit,
    Decision,
    DisruptionMode,
    EventReason,
    Gang,
    GangKey,
    GangTopology,
    Node,
    OwnerRef,
    Placement,
    Plan,
    Pod,
    Preempt,
    Queue,
    QueueGrant,
    QueueReport,
    QueueResource,
    Reason,
    Reject,
    Requirement,
    Short,
    Snapshot,
    Taint,
    Toleration,
    Victim,
    Wait,
)
from controller.core.planner import PlanningPass, invalid_spec, plan
from controller.core.provisioning import (
    BEST_EFFORT_ATOMIC,
    CHECK_CAPACITY,
    UNANSWERED,
    AutoscalerNote,
    GangProvisioning,
    NewRequest,
    ProvisioningConfig,
    ProvisioningPlan,
    ProvisioningRequestState,
    RequestCondition,
    RequestPhase,
    autoscaler_note,
)
from controller.core.provisioning import decide as decide_provisioning
from controller.core.queues import QueueTree
from controller.core.requests import InvalidRequests, effective_requests
from controller.core.state import is_live
from controller.core.timers import Recheck, RollBack, RollBackCause, TimedOut, TimerConfig, TimerDecision
from controller.core.timers import decide as decide_timers
from controller.core.topology import held_in
from controller.core.whatif import (
    AddDomain,
    AddNodes,
    Explanation,
    FreeInDomain,
    FreeOnNode,
    Remove,
    explain,
    without,
)

__all__ = [
    "BEST_EFFORT_ATOMIC",
    "CHECK_CAPACITY",
    "DEFAULT_LEVELS",
    "DEFAULT_TOPOLOGY",
    "NODE_NAME_FIELD",
    "UNANSWERED",
    "AddDomain",
    "AddNodes",
    "Admit",
    "AttributeValue",
    "AutoscalerNote",
    "Claim",
    "ClaimSpec",
    "Decision",
    "Device",
    "DeviceClass",
    "DeviceRequest",
    "DisruptionMode",
    "DraWorld",
    "EventReason",
    "Explanation",
    "FreeInDomain",
    "FreeOnNode",
    "Gang",
    "GangKey",
    "GangProvisioning",
    "GangTopology",
    "GroupClaim",
    "InvalidRequests",
    "NewRequest",
    "Node",
    "NodeReach",
    "OwnerRef",
    "Placement",
    "Plan",
    "PlannerConfig",
    "PlanningPass",
    "Pod",
    "PodClaim",
    "Preempt",
    "ProvisioningConfig",
    "ProvisioningPlan",
    "ProvisioningRequestState",
    "Queue",
    "QueueGrant",
    "QueueReport",
    "QueueResource",
    "QueueTree",
    "Reason",
    "Recheck",
    "Reject",
    "Remove",
    "RequestCondition",
    "RequestPhase",
    "Requirement",
    "RollBack",
    "RollBackCause",
    "Short",
    "Snapshot",
    "Taint",
    "TimedOut",
    "TimerConfig",
    "TimerDecision",
    "Toleration",
    "Victim",
    "Wait",
    "autoscaler_note",
    "class_resource",
    "decide_provisioning",
    "decide_timers",
    "effective_requests",
    "explain",
    "gpu_resource_of",
    "held_in",
    "invalid_spec",
    "is_live",
    "messages",
    "plan",
    "pod_allows_node",
    "with_devices",
    "without",
]
