"""The API resources the controller reads and writes, and their URL paths: a view over the registry
of kinds (shared/kinds.py)."""

from __future__ import annotations

from dataclasses import dataclass

from shared import kinds
from shared.kinds import Kind, Role


@dataclass(frozen=True, slots=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base

    def __str__(self) -> str:
        return f"{self.plural}.{self.group or 'core'}"


def of(kind: Kind, version: str | None = None) -> ResourceType:
    """A registry kind as the controller addresses it, at the version Phalanx uses unless told."""
    return ResourceType(kind.group, version or kind.version, kind.plural, kind.kind, kind.namespaced)


def every_version(kind: Kind) -> tuple[ResourceType, ...]:
    return tuple(of(kind, version) for version in kind.versions)


NODES = of(kinds.NODE_KIND)
NAMESPACES = of(kinds.NAMESPACE_KIND)
PODS = of(kinds.POD_KIND)
EVENTS = of(kinds.EVENT_KIND)
PRIORITY_CLASSES = of(kinds.PRIORITY_CLASS_KIND)
PDBS = of(kinds.PDB_KIND)
LEASES = of(kinds.LEASE_KIND)
JOBS = of(kinds.JOB_KIND)
STATEFULSETS = of(kinds.STATEFULSET_KIND)
# The native Workload API at every version Phalanx reads, newest first: the controller watches the
# first one the API server serves (``first_served``). WORKLOADS is the version v1alpha1 pods name.
WORKLOAD_VERSIONS = every_version(kinds.NATIVE_WORKLOAD_KIND)
NATIVE_PODGROUP_VERSIONS = every_version(kinds.NATIVE_PODGROUP_KIND)
NATIVE_TYPES = (*WORKLOAD_VERSIONS, *NATIVE_PODGROUP_VERSIONS)
WORKLOADS = of(kinds.NATIVE_WORKLOAD_KIND, "v1alpha1")
NATIVE_PODGROUPS = NATIVE_PODGROUP_VERSIONS[0]

# DRA (resource.k8s.io/v1): watched where served; read only.
DEVICE_CLASSES = of(kinds.DEVICE_CLASS_KIND)
RESOURCE_SLICES = of(kinds.RESOURCE_SLICE_KIND)
RESOURCE_CLAIMS = of(kinds.RESOURCE_CLAIM_KIND)
RESOURCE_CLAIM_TEMPLATES = of(kinds.RESOURCE_CLAIM_TEMPLATE_KIND)
DRA_TYPES = (DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES)

# PodGroup kinds Phalanx serves, primary first: it creates PodGroups there.
PODGROUP_TYPES = tuple(of(k) for k in kinds.of_role(Role.PODGROUP))
PODGROUPS, PODGROUPS_X_K8S, PODGROUPS_KAI, PODGROUPS_VOLCANO = PODGROUP_TYPES
# Queues: Phalanx's own, and KAI's (served by the kai-compat component). Cluster-scoped.
QUEUE_TYPES = tuple(of(k) for k in kinds.of_role(Role.QUEUE))
QUEUES, QUEUES_KAI = QUEUE_TYPES
PROVISIONING_REQUESTS = of(kinds.PROVISIONING_REQUEST_KIND)
POD_TEMPLATES = of(kinds.POD_TEMPLATE_KIND)
MPIJOBS = of(kinds.MPIJOB_KIND)
JOBSETS = of(kinds.JOBSET_KIND)
LEADERWORKERSETS = of(kinds.LEADERWORKERSET_KIND)
RAYCLUSTERS = of(kinds.RAYCLUSTER_KIND)
# Workloads whose spec sizes their gang (shared/workloads.py): watched, so that a gang follows its
# workload when that is scaled. (A TrainJob's gang is its JobSet's; a RayJob's, its RayCluster's.)
SIZED_WORKLOAD_TYPES = tuple(of(k) for k in kinds.of_role(Role.WORKLOAD) if k.follows_size)
# Every workload kind the webhook admits (explain and audit read their objects).
ADMITTED_WORKLOAD_TYPES = tuple(of(k) for k in kinds.ADMITTED)


def first_served(types: list[ResourceType]) -> list[ResourceType]:
    """One version of each resource: the first listed (newest) where several are served."""
    seen: set[str] = set()
    out = []
    for rt in types:
        if str(rt) not in seen:
            seen.add(str(rt))
            out.append(rt)
    return out
