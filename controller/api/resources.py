"""The API resources the controller reads and writes, and their URL paths."""

from __future__ import annotations

from dataclasses import dataclass

from shared import constants


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


NODES = ResourceType("", "v1", "nodes", "Node", namespaced=False)
NAMESPACES = ResourceType("", "v1", "namespaces", "Namespace", namespaced=False)
PODS = ResourceType("", "v1", "pods", "Pod")
EVENTS = ResourceType("", "v1", "events", "Event")
PRIORITY_CLASSES = ResourceType(
    "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False
)
PDBS = ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
LEASES = ResourceType("coordination.k8s.io", "v1", "leases", "Lease")
JOBS = ResourceType("batch", "v1", "jobs", "Job")
STATEFULSETS = ResourceType("apps", "v1", "statefulsets", "StatefulSet")
WORKLOADS = ResourceType("scheduling.k8s.io", "v1alpha1", "workloads", "Workload")

# PodGroup kinds Phalanx serves. The first is where it creates PodGroups; the others are adopted
# when a user applies them (manifests written for current scheduler-plugins or for KAI).
PODGROUPS = ResourceType(
    constants.PODGROUP_GROUP, constants.PODGROUP_VERSION, constants.PODGROUP_PLURAL, constants.PODGROUP_KIND
)
PODGROUPS_X_K8S = ResourceType("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup")
# KAI's PodGroup at its storage version (v2alpha2, as KAI ships it); the kai-compat CRD also serves
# v2 with the same schema, so PodGroups applied at either version are read here.
PODGROUPS_KAI = ResourceType("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup")
PODGROUP_TYPES = (PODGROUPS, PODGROUPS_X_K8S, PODGROUPS_KAI)

# Queues: Phalanx's own, and KAI's (served by the kai-compat component). Cluster-scoped.
QUEUES = ResourceType(constants.QUEUE_GROUP, constants.QUEUE_VERSION, "queues", "Queue", namespaced=False)
QUEUES_KAI = ResourceType("scheduling.run.ai", "v2", "queues", "Queue", namespaced=False)
QUEUE_TYPES = (QUEUES, QUEUES_KAI)

# The operators' kinds: their objects own a gang's PodGroup (controller/api/workload_owners.py).
MPIJOBS = ResourceType("kubeflow.org", "v2beta1", "mpijobs", "MPIJob")
JOBSETS = ResourceType("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
LEADERWORKERSETS = ResourceType("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet")
RAYCLUSTERS = ResourceType("ray.io", "v1", "rayclusters", "RayCluster")
# Workloads whose spec sizes their gang (shared/workloads.py): watched, so that a gang follows its
# workload when that is scaled. (A TrainJob's gang is its JobSet's; a RayJob's, its RayCluster's.)
SIZED_WORKLOAD_TYPES = (JOBS, STATEFULSETS, MPIJOBS, JOBSETS, LEADERWORKERSETS, RAYCLUSTERS)
