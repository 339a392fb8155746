"""The one registry of the kinds Phalanx reads or writes.

Every kind the webhook admits, the controller watches or writes, the CRD generator emits and the
reference documents is one ``Kind`` here: its API group, versions, plural, scope and role, and --
for a workload -- its sizing rule (shared/workloads.py: where its pod templates are, how big its
gang is). Everything else is a view over this table: the webhook's kinds (``WORKLOAD_KINDS``), the
controller's resource table (controller/api/resources.py), the owner lookups
(controller/api/workload_owners.py), deploy/crdgen.py, docs/refgen.py and the webhook
configuration's test. Adding a kind, or a version of one, is one entry here plus its sizing rule.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from shared import constants, workloads
from shared.workloads import GVK, WorkloadKind


class Role(StrEnum):
    CORE = "core"  # built-in objects the controller reads or writes
    NODE = "node-side"  # where pods run: the capacity every plan is made of
    WORKLOAD = "workload"  # the webhook gates its pod templates and sizes its gang
    PODGROUP = "podgroup"  # a PodGroup CRD Phalanx serves: one gang each
    QUEUE = "queue"  # a Queue CRD Phalanx serves
    NATIVE = "native Workload API"  # scheduling.k8s.io's own gang API, read where the server serves it
    DEVICES = "DRA devices"  # resource.k8s.io: devices, their classes and claims, read where served
    # The cluster-autoscaler's API: Phalanx asks it for a waiting gang's nodes (--provisioning-requests)
    AUTOSCALER = "cluster-autoscaler"


@dataclass(frozen=True, slots=True)
class Kind:
    group: str  # "" for the core group
    kind: str
    plural: str
    # Every version Phalanx reads, the one it uses first: of a CRD Phalanx serves, its served
    # versions with the storage version first; of the native API, the versions Phalanx knows,
    # newest first (the controller reads the first one the API server serves).
    versions: tuple[str, ...]
    role: Role
    namespaced: bool = True
    # A workload's sizing rule: the webhook gates and sizes it (None: never admitted).
    sizing: WorkloadKind | None = None
    # Its gang is that of an object it makes (a TrainJob's JobSet, a RayJob's RayCluster): that
    # object's PodGroup is owned by it instead, and its own size is never followed.
    parent: bool = False
    # The built-in kinds that make pods themselves: a pod's controlling owner of this kind is the
    # workload its gang was sized from.
    makes_pods: bool = False
    # The pod label naming the object an operator made the pods for, and labels that must match too.
    naming_label: str | None = None
    naming_also: Mapping[str, str] = field(default_factory=dict)
    short_names: tuple[str, ...] = ()

    @property
    def version(self) -> str:
        """The version Phalanx uses (writes, stores, sizes from)."""
        return self.versions[0]

    @property
    def gvk(self) -> GVK:
        return self.group, self.version, self.kind

    def api_version(self, version: str | None = None) -> str:
        version = version or self.version
        return f"{self.group}/{version}" if self.group else version

    @property
    def follows_size(self) -> bool:
        """The controller watches its objects: a gang follows its workload when that is scaled."""
        return self.sizing is not None and not self.parent


# ---- core ------------------------------------------------------------------------------------------
POD_KIND = Kind("", "Pod", "pods", ("v1",), Role.CORE)
NAMESPACE_KIND = Kind("", "Namespace", "namespaces", ("v1",), Role.CORE, namespaced=False)
EVENT_KIND = Kind("", "Event", "events", ("v1",), Role.CORE)
PRIORITY_CLASS_KIND = Kind(
    "scheduling.k8s.io", "PriorityClass", "priorityclasses", ("v1",), Role.CORE, namespaced=False
)
PDB_KIND = Kind("policy", "PodDisruptionBudget", "poddisruptionbudgets", ("v1",), Role.CORE)
LEASE_KIND = Kind("coordination.k8s.io", "Lease", "leases", ("v1",), Role.CORE)
# Phalanx's own Deployment: kubectl phalanx reads the controller's planner settings from it.
DEPLOYMENT_KIND = Kind("apps", "Deployment", "deployments", ("v1",), Role.CORE)
NODE_KIND = Kind("", "Node", "nodes", ("v1",), Role.NODE, namespaced=False)

# ---- workloads (the webhook's kinds; the sizing rules are in shared/workloads.py) -------------------
JOB_KIND = Kind("batch", "Job", "jobs", ("v1",), Role.WORKLOAD, sizing=workloads.JOB_RULE, makes_pods=True)
STATEFULSET_KIND = Kind(
    "apps",
    "StatefulSet",
    "statefulsets",
    ("v1",),
    Role.WORKLOAD,
    sizing=workloads.STATEFULSET_RULE,
    makes_pods=True,
)
MPIJOB_KIND = Kind(
    "kubeflow.org",
    "MPIJob",
    "mpijobs",
    ("v2beta1",),
    Role.WORKLOAD,
    sizing=workloads.MPIJOB_RULE,
    naming_label="training.kubeflow.org/job-name",
    naming_also={"training.kubeflow.org/operator-name": "mpi-operator"},
)
JOBSET_KIND = Kind(
    "jobset.x-k8s.io",
    "JobSet",
    "jobsets",
    ("v1alpha2",),
    Role.WORKLOAD,
    sizing=workloads.JOBSET_RULE,
    naming_label="jobset.sigs.k8s.io/jobset-name",
)
LEADERWORKERSET_KIND = Kind(
    "leaderworkerset.x-k8s.io",
    "LeaderWorkerSet",
    "leaderworkersets",
    ("v1",),
    Role.WORKLOAD,
    sizing=workloads.LEADERWORKERSET_RULE,
    naming_label=workloads.LWS_NAME_LABEL,
)
RAYCLUSTER_KIND = Kind(
    "ray.io",
    "RayCluster",
    "rayclusters",
    ("v1",),
    Role.WORKLOAD,
    sizing=workloads.RAYCLUSTER_RULE,
    naming_label="ray.io/cluster",
)
TRAINJOB_KIND = Kind(
    "trainer.kubeflow.org",
    "TrainJob",
    "trainjobs",
    ("v1alpha1",),
    Role.WORKLOAD,
    sizing=workloads.TRAINJOB_RULE,
    parent=True,
)
RAYJOB_KIND = Kind("ray.io", "RayJob", "rayjobs", ("v1",), Role.WORKLOAD, parent=True)

# ---- PodGroups and Queues Phalanx serves (deploy/crdgen.py writes their CRDs) --------------------------
# The first is where Phalanx creates PodGroups; the others are adopted when a user applies them
# (manifests written for current scheduler-plugins or for KAI).
PODGROUP_KIND = Kind(
    constants.PODGROUP_GROUP,
    constants.PODGROUP_KIND,
    constants.PODGROUP_PLURAL,
    (constants.PODGROUP_VERSION,),
    Role.PODGROUP,
    short_names=("pg",),
)
PODGROUP_X_K8S_KIND = Kind("scheduling.x-k8s.io", "PodGroup", "podgroups", ("v1alpha1",), Role.PODGROUP)
# KAI's PodGroup at its storage version (v2alpha2, as KAI ships it); v2 is what older KAI tutorials
# wrote, served with the same schema.
PODGROUP_KAI_KIND = Kind("scheduling.run.ai", "PodGroup", "podgroups", ("v2alpha2", "v2"), Role.PODGROUP)
# Volcano's PodGroup (minMember, queue, networkTopology): manifests written for Volcano apply unchanged.
PODGROUP_VOLCANO_KIND = Kind("scheduling.volcano.sh", "PodGroup", "podgroups", ("v1beta1",), Role.PODGROUP)
QUEUE_KIND = Kind(
    constants.QUEUE_GROUP, "Queue", "queues", (constants.QUEUE_VERSION,), Role.QUEUE, namespaced=False
)
QUEUE_KAI_KIND = Kind("scheduling.run.ai", "Queue", "queues", ("v2",), Role.QUEUE, namespaced=False)

# ---- the native Workload API (scheduling.k8s.io) -----------------------------------------------------
# Read at whichever version the API server serves, each spelled as shared/native.py says.
NATIVE_WORKLOAD_KIND = Kind(
    "scheduling.k8s.io",
    "Workload",
    "workloads",
    (
        "v1beta1",  # 1.37
        "v1alpha2",  # 1.36
        "v1alpha1",  # 1.35: pods name it in spec.workloadRef
    ),
    Role.NATIVE,
)
NATIVE_PODGROUP_KIND = Kind(
    "scheduling.k8s.io",
    "PodGroup",
    "podgroups",
    (
        "v1beta1",  # 1.37
        "v1alpha2",  # 1.36
    ),
    Role.NATIVE,
)

# ---- Dynamic Resource Allocation (resource.k8s.io): read-only, the devices a plan counts ------------
DRA_GROUP = "resource.k8s.io"
DEVICE_CLASS_KIND = Kind(DRA_GROUP, "DeviceClass", "deviceclasses", ("v1",), Role.DEVICES, namespaced=False)
RESOURCE_SLICE_KIND = Kind(
    DRA_GROUP, "ResourceSlice", "resourceslices", ("v1",), Role.DEVICES, namespaced=False
)
RESOURCE_CLAIM_KIND = Kind(DRA_GROUP, "ResourceClaim", "resourceclaims", ("v1",), Role.DEVICES)
RESOURCE_CLAIM_TEMPLATE_KIND = Kind(
    DRA_GROUP, "ResourceClaimTemplate", "resourceclaimtemplates", ("v1",), Role.DEVICES
)
# ---- the cluster-autoscaler's ProvisioningRequests (opt-in: --provisioning-requests) --------------------
# One per gang waiting for capacity; its pod sets point at PodTemplates Phalanx writes beside it.
PROVISIONING_REQUEST_KIND = Kind(
    "autoscaling.x-k8s.io", "ProvisioningRequest", "provisioningrequests", ("v1",), Role.AUTOSCALER
)
POD_TEMPLATE_KIND = Kind("", "PodTemplate", "podtemplates", ("v1",), Role.AUTOSCALER)

REGISTRY: tuple[Kind, ...] = (
    POD_KIND,
    NAMESPACE_KIND,
    EVENT_KIND,
    PRIORITY_CLASS_KIND,
    PDB_KIND,
    LEASE_KIND,
    DEPLOYMENT_KIND,
    NODE_KIND,
    JOB_KIND,
    STATEFULSET_KIND,
    MPIJOB_KIND,
    JOBSET_KIND,
    LEADERWORKERSET_KIND,
    RAYCLUSTER_KIND,
    TRAINJOB_KIND,
    RAYJOB_KIND,
    PODGROUP_KIND,
    PODGROUP_X_K8S_KIND,
    PODGROUP_KAI_KIND,
    PODGROUP_VOLCANO_KIND,
    QUEUE_KIND,
    QUEUE_KAI_KIND,
    NATIVE_WORKLOAD_KIND,
    NATIVE_PODGROUP_KIND,
    DEVICE_CLASS_KIND,
    RESOURCE_SLICE_KIND,
    RESOURCE_CLAIM_KIND,
    RESOURCE_CLAIM_TEMPLATE_KIND,
    PROVISIONING_REQUEST_KIND,
    POD_TEMPLATE_KIND,
)


def of_role(role: Role) -> tuple[Kind, ...]:
    return tuple(k for k in REGISTRY if k.role is role)


# ---- views -------------------------------------------------------------------------------------------
POD: GVK = POD_KIND.gvk
JOB: GVK = JOB_KIND.gvk
STATEFULSET: GVK = STATEFULSET_KIND.gvk
MPIJOB: GVK = MPIJOB_KIND.gvk
JOBSET: GVK = JOBSET_KIND.gvk
LEADERWORKERSET: GVK = LEADERWORKERSET_KIND.gvk
RAYCLUSTER: GVK = RAYCLUSTER_KIND.gvk
TRAINJOB: GVK = TRAINJOB_KIND.gvk

# The webhook's kinds: every workload with a sizing rule, by the GVK an AdmissionRequest names.
ADMITTED: tuple[Kind, ...] = tuple(k for k in of_role(Role.WORKLOAD) if k.sizing is not None)
KINDS: dict[GVK, WorkloadKind] = {k.gvk: k.sizing for k in ADMITTED if k.sizing is not None}
