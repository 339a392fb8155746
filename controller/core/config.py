"""The planner's knobs. Frozen: one config is shared by every pass."""

from __future__ import annotations

from dataclasses import dataclass

from shared import constants

ZONE_LABEL = "topology.kubernetes.io/zone"
BLOCK_LABEL = "topology.kubernetes.io/block"
RACK_LABEL = "topology.kubernetes.io/rack"
NVLINK_LABEL = "nvidia.com/gpu.clique"  # one NVLink domain (GPU Feature Discovery's label)
HOSTNAME_LABEL = constants.HOSTNAME_LABEL
DEFAULT_TOPOLOGY = "default"
# The network layers EKS labels nodes with (layer 1 widest), and GKE's reserved-capacity placement
# labels (block, sub-block -- an NVL72 domain on A4X -- and physical host).
AWS_LAYERS = tuple(f"topology.k8s.aws/network-node-layer-{n}" for n in (1, 2, 3))
GKE_BLOCK, GKE_SUBBLOCK, GKE_HOST = (
    f"cloud.google.com/gce-topology-{part}" for part in ("block", "subblock", "host")
)
# The default topology's levels, widest first: labels no node carries are simply not used, so one
# list serves EKS, GKE and clusters labelled the generic way.
DEFAULT_LEVELS = (
    ZONE_LABEL,
    *AWS_LAYERS,
    GKE_BLOCK,
    GKE_SUBBLOCK,
    BLOCK_LABEL,
    RACK_LABEL,
    NVLINK_LABEL,
    GKE_HOST,
    HOSTNAME_LABEL,
)


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
    # The cluster's topologies: (name, node label keys widest first). A gang uses the one it names
    # (phalanx.io/topology), else the first; one that fits inside one domain of a level is kept
    # there, the narrowest level first (core/topology.py).
    topologies: tuple[tuple[str, tuple[str, ...]], ...] = ((DEFAULT_TOPOLOGY, DEFAULT_LEVELS),)
    # The resource that drives the best-fit index and the messages.
    gpu_resource: str = constants.GPU_RESOURCE
    # Owner kinds whose pods never end on their own (DaemonSets): a starvation reservation and the
    # "could this ever fit on an empty cluster" check count their room as permanently taken.
    permanent_owner_kinds: tuple[str, ...] = ("DaemonSet",)
    # How many candidate domains of each level a gang tries before it is placed cluster-wide.
    topology_attempts: int = 8
    # Messages list at most this many nodes.
    message_nodes: int = 6

    def levels(self, topology: str | None = None) -> tuple[str, ...] | None:
        """The levels (widest first) of the named topology (None: the first), or None if unknown."""
        if topology is None:
            return self.topologies[0][1] if self.topologies else ()
        return next((levels for name, levels in self.topologies if name == topology), None)


def narrowest_first(levels: tuple[str, ...]) -> tuple[str, ...]:
    """The levels a gang is tried inside, the narrowest first; the hostname is left out (best fit
    already keeps a gang on one node when one can hold it)."""
    return tuple(key for key in reversed(levels) if key != HOSTNAME_LABEL)


def preferred_levels(config: PlannerConfig) -> tuple[str, ...]:
    """The default topology's levels a gang is tried inside, the narrowest first."""
    return narrowest_first(config.levels() or ())
