"""The planner's knobs. Frozen: one config is shared by every pass."""

from __future__ import annotations

from dataclasses import dataclass

from shared import constants

ZONE_LABEL = "topology.kubernetes.io/zone"
RACK_LABEL = "topology.kubernetes.io/rack"


@dataclass(frozen=True, slots=True)
class PlannerConfig:
    # Seconds from the start of a gang's current wait (`Gang.wait_start`) after which a gang that is
    # still not admitted times out, when the gang sets no schedule timeout itself. None: none.
    default_schedule_timeout: float | None = None
    # Whole-gang preemption of strictly lower-priority work.
    preemption: bool = True
    # A gang (or pod) whose members have run for less than this is never preempted (anti-thrashing).
    # The controller's --preemption-min-runtime-seconds, with the same default.
    preemption_min_runtime_seconds: float = 0.0
    # Room held for a preemptor while its victims terminate is given up after this long (victims
    # stuck terminating must not hold it forever).
    hold_expiry_seconds: float = 300.0
    # At most this many victim searches per pass (each costs up to a few hundred ms on a big cluster);
    # gangs beyond it wait for the next pass.
    max_preemption_searches: int = 8
    # A not-admitted gang older than this that cannot fit gets a starvation reservation (one per
    # pass). None (the default, as Kueue's BestEffortFIFO and Volcano without its reservation
    # plugin): never reserve -- trace replay measured the reservation's idle nodes costing more
    # than it saves on typical queues; enable it where big gangs must never starve.
    starvation_age_seconds: float | None = None
    # Topology labels: a gang that fits inside one rack (else one zone) is kept there.
    zone_label: str = ZONE_LABEL
    rack_label: str = RACK_LABEL
    # The resource that drives the best-fit index and the messages.
    gpu_resource: str = constants.GPU_RESOURCE
    # Owner kinds whose pods never end on their own (DaemonSets): a starvation reservation and the
    # "could this ever fit on an empty cluster" check count their room as permanently taken.
    permanent_owner_kinds: tuple[str, ...] = ("DaemonSet",)
    # How many candidate racks (then zones) a gang tries before it is placed cluster-wide.
    topology_attempts: int = 8
    # Messages list at most this many nodes.
    message_nodes: int = 6
