"""The public names of Phalanx. Tests, docs and users rely on them."""

from typing import Final

# The prefix of every Phalanx label and annotation.
DOMAIN: Final = "phalanx.io"

# Opt-in: a namespace labelled with this key and value is gang-scheduled; so is one workload (or
# bare pod) carrying it as a label in a namespace that is not (the webhook copies it onto the
# workload's pod templates, so that its pods are selected too).
OPT_IN_LABEL: Final = "phalanx.io/gang-scheduling"
OPT_IN_VALUE: Final = "enabled"

# The only scheduling gate Phalanx ever adds or removes.
GATE: Final = "phalanx.io/gang"

# Canonical pod -> PodGroup link, written by the webhook.
POD_GROUP_LABEL: Final = "phalanx.io/pod-group"

# Per-object opt-out, as label or annotation, value "true".
SKIP: Final = "phalanx.io/skip"

# Workload annotations that override what is inferred.
MIN_MEMBER_ANNOTATION: Final = "phalanx.io/min-member"
# Seconds a gang may wait for a placement (workload or PodGroup).
SCHEDULE_TIMEOUT_ANNOTATION: Final = "phalanx.io/schedule-timeout-seconds"
# pinned (default): each member pinned to its planned node; free: the scheduler picks.
PLACEMENT_ANNOTATION: Final = "phalanx.io/placement"
PLACEMENT_PINNED: Final = "pinned"
PLACEMENT_FREE: Final = "free"
# A node label key (e.g. topology.kubernetes.io/rack): the gang runs inside one domain of it or waits
# (workload, pod or PodGroup annotation; the PodGroup's spec.topologyRequired wins).
TOPOLOGY_REQUIRED_ANNOTATION: Final = "phalanx.io/topology-required"
# A node label key whose domains the gang is tried inside first, then the wider levels', then anywhere.
TOPOLOGY_PREFERRED_ANNOTATION: Final = "phalanx.io/topology-preferred"
# The cluster topology (the controller's --topologies) whose levels the gang is kept in.
TOPOLOGY_ANNOTATION: Final = "phalanx.io/topology"
# Slices: every <size> members (in index order) inside one domain of <label key>.
TOPOLOGY_SLICE_REQUIRED_ANNOTATION: Final = "phalanx.io/topology-slice-required"
TOPOLOGY_SLICE_SIZE_ANNOTATION: Final = "phalanx.io/topology-slice-size"
TOPOLOGY_ANNOTATIONS: Final = (
    TOPOLOGY_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_SLICE_REQUIRED_ANNOTATION,
    TOPOLOGY_SLICE_SIZE_ANNOTATION,
)
# Marks a gang (label or annotation) that preemption must never evict.
PREEMPTIBLE: Final = "phalanx.io/preemptible"

# Written by the webhook on pod templates so the controller knows the inferred gang size and
# where it came from, without re-reading the workload.
INFERRED_MIN_MEMBER_ANNOTATION: Final = "phalanx.io/inferred-min-member"
# PodGroups Phalanx made itself carry this label (and follow their source; a user's wins).
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
MANAGED_BY_PHALANX: Final = "phalanx"
# Recorded by the controller on the PodGroup before any gate is lifted (crash-safe admission).
ADMISSION_ANNOTATION: Final = "phalanx.io/admission"

# On a ProvisioningRequest Phalanx made (--provisioning-requests; labelled with POD_GROUP_LABEL, the
# gang it is for): a digest of the member shapes and counts it asked for (a changed gang replaces it).
PROVISIONING_SIGNATURE_ANNOTATION: Final = "phalanx.io/provisioning-signature"
# On a ProvisioningRequest Phalanx made: how many requests for the gang failed or expired before it.
PROVISIONING_ATTEMPT_ANNOTATION: Final = "phalanx.io/provisioning-attempt"
# Set on each member in the patch that lifts its gate: the ProvisioningRequest whose room it consumes.
CONSUME_PROVISIONING_REQUEST_ANNOTATION: Final = "autoscaling.x-k8s.io/consume-provisioning-request"
# Set with the one above: that request's provisioning class.
PROVISIONING_CLASS_ANNOTATION: Final = "autoscaling.x-k8s.io/provisioning-class-name"

# PodGroup CRD (primary group, as used by Coscheduling tutorials and Alibaba ACS).
PODGROUP_GROUP: Final = "scheduling.sigs.k8s.io"
PODGROUP_VERSION: Final = "v1alpha1"
PODGROUP_PLURAL: Final = "podgroups"
PODGROUP_KIND: Final = "PodGroup"

# Accepted pod -> group links (normalised by the webhook to POD_GROUP_LABEL), in precedence order.
COSCHEDULING_LABEL: Final = "pod-group.scheduling.sigs.k8s.io/name"
# The lightweight Coscheduling form: the gang size on the pods themselves.
COSCHEDULING_MIN_AVAILABLE_LABEL: Final = "pod-group.scheduling.sigs.k8s.io/min-available"
# Alibaba ACS: the gang a pod belongs to.
ACS_LABEL: Final = "pod-group.scheduling.sigs.k8s.io"
# Current scheduler-plugins: the gang a pod belongs to.
SCHEDULER_PLUGINS_LABEL: Final = "scheduling.x-k8s.io/pod-group"
# NVIDIA KAI as it ships: the gang a pod belongs to (annotation, what KAI's own pod grouper writes).
KAI_POD_GROUP_ANNOTATION: Final = "pod-group-name"
# NVIDIA KAI: the subgroup of its PodGroup a pod belongs to (PodGroup spec.subGroups).
KAI_SUBGROUP_LABEL: Final = "kai.scheduler/subgroup-name"
# NVIDIA KAI in older tutorials: the gang a pod belongs to (annotation).
KAI_ANNOTATION: Final = "scheduling.run.ai/pod-group"
# Volcano: the gang a pod belongs to (annotation).
VOLCANO_ANNOTATION: Final = "scheduling.k8s.io/group-name"

GROUP_LINK_LABELS: Final = (POD_GROUP_LABEL, COSCHEDULING_LABEL, ACS_LABEL, SCHEDULER_PLUGINS_LABEL)
GROUP_LINK_ANNOTATIONS: Final = (KAI_POD_GROUP_ANNOTATION, KAI_ANNOTATION, VOLCANO_ANNOTATION)

# Schedulers of gang systems that are usually not installed next to Phalanx.
DEFAULT_FOREIGN_GANG_SCHEDULERS: Final = ("scheduler-plugins-scheduler", "kai-scheduler", "volcano")
DEFAULT_SCHEDULER: Final = "default-scheduler"

# The resource the planner counts as GPUs (placement order, messages, queues).
GPU_RESOURCE: Final = "nvidia.com/gpu"
# The node label kubectl phalanx and the docs name nodes by (pins use the node's name itself).
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"

# Queues: which queue a gang belongs to. The namespace label names its default; a workload, pod or
# PodGroup label (or the PodGroup's spec.queue) overrides it. KAI's and Kueue's links are accepted.
QUEUE_LABEL: Final = "phalanx.io/queue"
# KAI's queue link as it ships (pods, workloads and namespaces), accepted as a queue link.
KAI_SCHEDULER_QUEUE_LABEL: Final = "kai.scheduler/queue"
# KAI's queue link in older tutorials, accepted as a queue link.
KAI_QUEUE_LABEL: Final = "runai/queue"
# Kueue's queue link, accepted as a queue link (and warned about: Kueue keeps such workloads suspended).
KUEUE_QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
QUEUE_LINK_LABELS: Final = (QUEUE_LABEL, KAI_SCHEDULER_QUEUE_LABEL, KAI_QUEUE_LABEL, KUEUE_QUEUE_LABEL)
# Namespace annotation a platform engineer sets: further queues (comma-separated) its workloads may
# name besides the one its phalanx.io/queue label binds it to. A queue granted to some namespace is
# closed to every namespace not granted it.
ALLOWED_QUEUES_ANNOTATION: Final = "phalanx.io/allowed-queues"
# Namespace label a platform engineer sets ("true"): phalanx.io/skip may be used in a namespace bound
# to a queue (what runs there outside Phalanx is still charged to that queue).
SKIP_ALLOWED_LABEL: Final = "phalanx.io/skip-allowed"
# The API group of Phalanx's Queue (cluster-scoped).
QUEUE_GROUP: Final = "scheduling.phalanx.io"
QUEUE_VERSION: Final = "v1alpha1"
