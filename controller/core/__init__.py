"""The pure decision core: snapshot + now in, plan out. No I/O, no wall clock.

What the shell calls:

- ``plan(snapshot, config=None) -> Plan``: at most one decision per gang, in planning order;
- ``PlannerConfig``: the knobs (frozen);
- ``effective_requests(raw_pod_spec) -> dict[str, int]``: a pod's request per resource, raising
  ``InvalidRequests`` (a ValueError) on a bad quantity;
- ``invalid_spec(gang)``: why a PodGroup's spec can never be satisfied (or None), for admission-time
  validation;
- ``pod_allows_node(pod, node)``: one pod's constraints against one node (readiness included).

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
- ``planner``: one pass, gang by gang.
"""

from controller.core.config import PlannerConfig
from controller.core.fit import pod_allows_node
from controller.core.planner import invalid_spec, plan
from controller.core.requests import InvalidRequests, effective_requests

__all__ = [
    "InvalidRequests",
    "PlannerConfig",
    "effective_requests",
    "invalid_spec",
    "plan",
    "pod_allows_node",
]
