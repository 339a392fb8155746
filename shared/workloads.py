"""The workload kinds Phalanx gang-schedules: where their pod templates are and how big a gang is.

Besides the built-in Job and StatefulSet, the kinds of the operators people train and serve with
(mpi-operator, JobSet, LeaderWorkerSet, KubeRay, Kubeflow Trainer): each top-level object is one
gang (LeaderWorkerSet: one per leader+workers group), sized from its own spec.

Their groups, versions and plurals are in the registry (shared/kinds.py). The webhook sizes a
workload from the object it admits; the controller sizes it again from the object as it is now, so
a gang follows its workload when that is scaled. Both call the functions here, so the two can never
disagree. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shared import constants
from shared.grouplink import GroupLink, workload_group_name
from shared.jsonread import get_in, integer, items, obj, text

TemplatePath = tuple[str, ...]

# (API group, version, kind) as in an AdmissionRequest's ``kind``.
GVK = tuple[str, str, str]


def gvk_of(kind: Mapping[str, Any]) -> GVK:
    """An AdmissionRequest's ``kind`` object as a GVK; a member that is not a string reads as ""."""
    group, version, name = kind.get("group"), kind.get("version"), kind.get("kind")
    # Read on every admission: isinstance inline rather than three calls to text().
    return (
        group if isinstance(group, str) else "",
        version if isinstance(version, str) else "",
        name if isinstance(name, str) else "",
    )


MPI_LAUNCHER = ("spec", "mpiReplicaSpecs", "Launcher")
MPI_WORKER = ("spec", "mpiReplicaSpecs", "Worker")
WAIT_FOR_WORKERS_READY = "WaitForWorkersReady"
REPLICATED_JOBS = ("spec", "replicatedJobs")
LWS_TEMPLATE = ("spec", "leaderWorkerTemplate")
WORKER_GROUPS = ("spec", "workerGroupSpecs")


@dataclass(frozen=True, slots=True)
class WorkloadKind:
    name: str
    # Paths to every pod template the kind may carry (absent ones are skipped); a digit step
    # indexes a list (JobSet's replicatedJobs, RayCluster's workerGroupSpecs).
    template_paths: tuple[TemplatePath, ...] | Callable[[dict[str, Any]], tuple[TemplatePath, ...]]
    # Number of pods that must run together, from the workload's shape (always >= 1).
    gang_size: Callable[[dict[str, Any]], int]
    # Where an activeDeadlineSeconds lives that keeps running while pods wait at the gate.
    deadline_path: tuple[str, ...] | None = None
    # The operator makes one gang per group of pods (LeaderWorkerSet): templates get the gate and
    # the size, and each pod its group's name when it is created (see ``per_group_link``).
    grouped_per_pod: bool = False
    # The most members the workload makes at once, where that can exceed ``gang_size`` (elastic
    # workers, a launcher created later); None: the gang size itself.
    max_size: Callable[[dict[str, Any]], int | None] | None = None

    def paths(self, workload: dict[str, Any]) -> tuple[TemplatePath, ...]:
        found = self.template_paths
        return found(workload) if callable(found) else found

    def largest_gang(self, workload: dict[str, Any]) -> int | None:
        """Members beyond the gang size that may join it (elastic), counted with it; None: no bound."""
        return self.max_size(workload) if self.max_size is not None else self.gang_size(workload)


def job_size(workload: dict[str, Any]) -> int:
    """``parallelism`` (default 1), never more than ``completions``: that many pods run at once."""
    spec = obj(workload.get("spec"))
    size = integer(spec.get("parallelism"), 1)
    completions = spec.get("completions")
    if isinstance(completions, int) and not isinstance(completions, bool):
        size = min(size, completions)
    return max(size, 1)


def statefulset_size(workload: dict[str, Any]) -> int:
    return max(integer(get_in(workload, "spec", "replicas"), 1), 1)


def _mpijob_replicas(workload: dict[str, Any]) -> tuple[int, int]:
    """(launchers, workers) with mpi-operator's defaults: one launcher, no workers."""
    launcher = get_in(workload, *MPI_LAUNCHER)
    workers = get_in(workload, *MPI_WORKER)
    launchers = integer(launcher.get("replicas"), 1) if isinstance(launcher, dict) else 0
    return launchers, integer(workers.get("replicas"), 0) if isinstance(workers, dict) else 0


def mpijob_size(workload: dict[str, Any]) -> int:
    """Launcher (default 1) plus workers (default 0), as mpi-operator's defaulting does.

    With ``launcherCreationPolicy: WaitForWorkersReady`` the launcher is created only once the
    workers run, so counting it would make the gang wait for a pod that waits for the gang.
    """
    launchers, workers = _mpijob_replicas(workload)
    if text(get_in(workload, "spec", "launcherCreationPolicy")) == WAIT_FOR_WORKERS_READY:
        launchers = 0
    return max(launchers + workers, 1)


def mpijob_members(workload: dict[str, Any]) -> int:
    """Launcher and workers, whatever the creation policy: a launcher created once the workers run
    joins their running gang."""
    launchers, workers = _mpijob_replicas(workload)
    return max(launchers + workers, 1)


def jobset_templates(jobset: dict[str, Any]) -> tuple[TemplatePath, ...]:
    return tuple(
        (*REPLICATED_JOBS, str(i), "template", "spec", "template")
        for i, _ in enumerate(items(get_in(jobset, *REPLICATED_JOBS)))
    )


def jobset_size(jobset: dict[str, Any]) -> int:
    """Every pod of every child Job at once: the sum over replicatedJobs of replicas (default 1)
    times what each Job runs at once (parallelism, at most completions)."""
    total = 0
    for item in items(get_in(jobset, *REPLICATED_JOBS)):
        replicated = obj(item)
        total += max(integer(replicated.get("replicas"), 1), 0) * job_size(obj(replicated.get("template")))
    return max(total, 1)


def leaderworkerset_size(lws: dict[str, Any]) -> int:
    """One group: ``size`` pods, the leader included (LeaderWorkerSet's own default is 1)."""
    return max(integer(get_in(lws, *LWS_TEMPLATE, "size"), 1), 1)


def raycluster_templates(cluster: dict[str, Any]) -> tuple[TemplatePath, ...]:
    workers = tuple(
        (*WORKER_GROUPS, str(i), "template") for i, _ in enumerate(items(get_in(cluster, *WORKER_GROUPS)))
    )
    return (("spec", "headGroupSpec", "template"), *workers)


def raycluster_size(cluster: dict[str, Any]) -> int:
    """The head plus every worker group at ``minReplicas`` (x ``numOfHosts``), as KubeRay's own gang
    integrations count; workers beyond that join as the gang's elastic members."""
    total = 1
    for item in items(get_in(cluster, *WORKER_GROUPS)):
        group = obj(item)
        if group.get("suspend") is True:
            continue
        hosts = max(integer(group.get("numOfHosts"), 1), 1)
        total += max(integer(group.get("minReplicas"), 0), 0) * hosts
    return total


def raycluster_max_size(cluster: dict[str, Any]) -> int | None:
    """The head plus every worker group at ``maxReplicas`` (x ``numOfHosts``): how far the
    autoscaler may grow the gang; None where a group sets no bound."""
    total = 1
    for item in items(get_in(cluster, *WORKER_GROUPS)):
        group = obj(item)
        if group.get("suspend") is True:
            continue
        bound = group.get("maxReplicas")
        if not isinstance(bound, int) or isinstance(bound, bool):
            return None
        total += max(bound, 0) * max(integer(group.get("numOfHosts"), 1), 1)
    return max(total, raycluster_size(cluster))


def no_templates(_: dict[str, Any]) -> tuple[TemplatePath, ...]:
    return ()


# The sizing rule of each workload kind (shared/kinds.py gives each its group, versions and plural).
JOB_RULE = WorkloadKind("Job", (("spec", "template"),), job_size, ("spec", "activeDeadlineSeconds"))
STATEFULSET_RULE = WorkloadKind("StatefulSet", (("spec", "template"),), statefulset_size)
MPIJOB_RULE = WorkloadKind(
    "MPIJob",
    ((*MPI_LAUNCHER, "template"), (*MPI_WORKER, "template")),
    mpijob_size,
    # mpi-operator hands runPolicy.activeDeadlineSeconds to the launcher's Job.
    ("spec", "runPolicy", "activeDeadlineSeconds"),
    max_size=mpijob_members,
)
JOBSET_RULE = WorkloadKind("JobSet", jobset_templates, jobset_size)
LEADERWORKERSET_RULE = WorkloadKind(
    "LeaderWorkerSet",
    ((*LWS_TEMPLATE, "leaderTemplate"), (*LWS_TEMPLATE, "workerTemplate")),
    leaderworkerset_size,
    grouped_per_pod=True,
)
RAYCLUSTER_RULE = WorkloadKind(
    "RayCluster", raycluster_templates, raycluster_size, max_size=raycluster_max_size
)
# A TrainJob has no pod template of its own: the Trainer makes a JobSet from its runtime, and
# that JobSet becomes the gang (owned by the TrainJob). Admitted only to warn.
TRAINJOB_RULE = WorkloadKind("TrainJob", no_templates, lambda _: 1)

# LeaderWorkerSet labels each pod with its group's index (its own pod webhook does).
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"


def per_group_link(labels: Mapping[str, str], annotations: Mapping[str, str]) -> GroupLink | None:
    """The gang of a pod whose workload groups its pods itself (a LeaderWorkerSet replica: leader
    and workers), when that workload's template was gated by Phalanx (it carries the size)."""
    name, index = labels.get(LWS_NAME_LABEL), labels.get(LWS_GROUP_INDEX_LABEL)
    if not name or not index or constants.INFERRED_MIN_MEMBER_ANNOTATION not in annotations:
        return None
    return GroupLink(workload_group_name(name, index), f"label {LWS_GROUP_INDEX_LABEL}")
