"""The workload kinds Phalanx gates: where their pod templates are and how big their gang is.

Besides the built-in Job and StatefulSet, the kinds of the operators people train and serve
with (mpi-operator, JobSet, LeaderWorkerSet, KubeRay, Kubeflow Trainer): each top-level object
is one gang (LeaderWorkerSet: one per leader+workers group), sized from its own spec.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from shared import constants as c
from shared.grouplink import GroupLink, workload_group_name
from webhook.patch import PatchBuilder
from webhook.shapes import get_in, integer, obj, strings, text

Path = tuple[str, ...]

# (API group, version, kind) as in an AdmissionRequest's ``kind``.
GVK = tuple[str, str, str]

POD: GVK = ("", "v1", "Pod")
JOB: GVK = ("batch", "v1", "Job")
STATEFULSET: GVK = ("apps", "v1", "StatefulSet")
MPIJOB: GVK = ("kubeflow.org", "v2beta1", "MPIJob")
JOBSET: GVK = ("jobset.x-k8s.io", "v1alpha2", "JobSet")
LEADERWORKERSET: GVK = ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet")
RAYCLUSTER: GVK = ("ray.io", "v1", "RayCluster")
TRAINJOB: GVK = ("trainer.kubeflow.org", "v1alpha1", "TrainJob")

MPI_LAUNCHER = ("spec", "mpiReplicaSpecs", "Launcher")
MPI_WORKER = ("spec", "mpiReplicaSpecs", "Worker")
WAIT_FOR_WORKERS_READY = "WaitForWorkersReady"


@dataclass(frozen=True, slots=True)
class WorkloadKind:
    name: str
    # Paths to every pod template the kind may carry (absent ones are skipped); a digit step
    # indexes a list (JobSet's replicatedJobs, RayCluster's workerGroupSpecs).
    template_paths: tuple[Path, ...] | Callable[[dict[str, Any]], tuple[Path, ...]]
    # Number of pods that must run together, from the workload's shape (always >= 1).
    gang_size: Callable[[dict[str, Any]], int]
    # Where an activeDeadlineSeconds lives that keeps running while pods wait at the gate.
    deadline_path: tuple[str, ...] | None = None
    # The operator makes one gang per group of pods (LeaderWorkerSet): templates get the gate and
    # the size, and each pod its group's name when it is created (see ``pod_group_link``).
    grouped_per_pod: bool = False

    def paths(self, workload: dict[str, Any]) -> tuple[Path, ...]:
        found = self.template_paths
        return found(workload) if callable(found) else found


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


def mpijob_size(workload: dict[str, Any]) -> int:
    """Launcher (default 1) plus workers (default 0), as mpi-operator's defaulting does.

    With ``launcherCreationPolicy: WaitForWorkersReady`` the launcher is created only once the
    workers run, so counting it would make the gang wait for a pod that waits for the gang.
    """
    launcher = get_in(workload, *MPI_LAUNCHER)
    workers = get_in(workload, *MPI_WORKER)
    launchers = integer(launcher.get("replicas"), 1) if isinstance(launcher, dict) else 0
    if text(get_in(workload, "spec", "launcherCreationPolicy")) == WAIT_FOR_WORKERS_READY:
        launchers = 0
    worker_count = integer(workers.get("replicas"), 0) if isinstance(workers, dict) else 0
    return max(launchers + worker_count, 1)


def _items(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


REPLICATED_JOBS = ("spec", "replicatedJobs")


def jobset_templates(jobset: dict[str, Any]) -> tuple[Path, ...]:
    return tuple(
        (*REPLICATED_JOBS, str(i), "template", "spec", "template")
        for i, _ in enumerate(_items(get_in(jobset, *REPLICATED_JOBS)))
    )


def jobset_size(jobset: dict[str, Any]) -> int:
    """Every pod of every child Job at once: the sum over replicatedJobs of replicas (default 1)
    times what each Job runs at once (parallelism, at most completions)."""
    total = 0
    for item in _items(get_in(jobset, *REPLICATED_JOBS)):
        replicated = obj(item)
        total += max(integer(replicated.get("replicas"), 1), 0) * job_size(obj(replicated.get("template")))
    return max(total, 1)


LWS_TEMPLATE = ("spec", "leaderWorkerTemplate")


def leaderworkerset_size(lws: dict[str, Any]) -> int:
    """One group: ``size`` pods, the leader included (LeaderWorkerSet's own default is 1)."""
    return max(integer(get_in(lws, *LWS_TEMPLATE, "size"), 1), 1)


WORKER_GROUPS = ("spec", "workerGroupSpecs")


def raycluster_templates(cluster: dict[str, Any]) -> tuple[Path, ...]:
    workers = tuple(
        (*WORKER_GROUPS, str(i), "template") for i, _ in enumerate(_items(get_in(cluster, *WORKER_GROUPS)))
    )
    return (("spec", "headGroupSpec", "template"), *workers)


def raycluster_size(cluster: dict[str, Any]) -> int:
    """The head plus every worker group at ``minReplicas`` (x ``numOfHosts``), as KubeRay's own gang
    integrations count; workers beyond that join as the gang's elastic members."""
    total = 1
    for item in _items(get_in(cluster, *WORKER_GROUPS)):
        group = obj(item)
        if group.get("suspend") is True:
            continue
        hosts = max(integer(group.get("numOfHosts"), 1), 1)
        total += max(integer(group.get("minReplicas"), 0), 0) * hosts
    return total


def no_templates(_: dict[str, Any]) -> tuple[Path, ...]:
    return ()


KINDS: dict[GVK, WorkloadKind] = {
    JOB: WorkloadKind("Job", (("spec", "template"),), job_size, ("spec", "activeDeadlineSeconds")),
    STATEFULSET: WorkloadKind("StatefulSet", (("spec", "template"),), statefulset_size),
    MPIJOB: WorkloadKind(
        "MPIJob",
        ((*MPI_LAUNCHER, "template"), (*MPI_WORKER, "template")),
        mpijob_size,
        # mpi-operator hands runPolicy.activeDeadlineSeconds to the launcher's Job.
        ("spec", "runPolicy", "activeDeadlineSeconds"),
    ),
    JOBSET: WorkloadKind("JobSet", jobset_templates, jobset_size),
    LEADERWORKERSET: WorkloadKind(
        "LeaderWorkerSet",
        ((*LWS_TEMPLATE, "leaderTemplate"), (*LWS_TEMPLATE, "workerTemplate")),
        leaderworkerset_size,
        grouped_per_pod=True,
    ),
    RAYCLUSTER: WorkloadKind("RayCluster", raycluster_templates, raycluster_size),
    # A TrainJob has no pod template of its own: the Trainer makes a JobSet from its runtime, and
    # that JobSet becomes the gang (owned by the TrainJob). Admitted only to warn.
    TRAINJOB: WorkloadKind("TrainJob", no_templates, lambda _: 1),
}

# LeaderWorkerSet labels each pod with its group's index (its own pod webhook does).
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"


def per_group_link(labels: Mapping[str, str], annotations: Mapping[str, str]) -> GroupLink | None:
    """The gang of a pod whose workload groups its pods itself (a LeaderWorkerSet replica: leader
    and workers), when that workload's template was gated by Phalanx (it carries the size)."""
    name, index = labels.get(LWS_NAME_LABEL), labels.get(LWS_GROUP_INDEX_LABEL)
    if not name or not index or c.INFERRED_MIN_MEMBER_ANNOTATION not in annotations:
        return None
    return GroupLink(workload_group_name(name, index), f"label {LWS_GROUP_INDEX_LABEL}")


KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Where each kind says it is suspended (Kueue creates them suspended and resumes them on admission).
SUSPEND_PATHS: dict[str, tuple[str, ...]] = {
    "Job": ("spec", "suspend"),
    "JobSet": ("spec", "suspend"),
    "RayCluster": ("spec", "suspend"),
    "TrainJob": ("spec", "suspend"),
    "MPIJob": ("spec", "runPolicy", "suspend"),
}
JOBSET_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
LEADER_READY = "LeaderReady"
LEADER_CREATED = "LeaderCreated"


def kueue_managed(kind: str, workload: dict[str, Any]) -> list[str]:
    queue = strings(get_in(workload, "metadata", "labels")).get(KUEUE_QUEUE_LABEL)
    path = SUSPEND_PATHS.get(kind)
    suspended = path is not None and get_in(workload, *path) is True
    if not queue and not suspended:
        return []
    why = f"label {KUEUE_QUEUE_LABEL}={queue}" if queue else f"{'.'.join(path or ())}: true"
    return [
        f"phalanx: {kind} is suspended or managed by Kueue ({why}): it stays suspended, and no pod is "
        f"created, until Kueue admits it (or it is resumed); then its pods form their gang"
    ]


def jobset_traps(jobset: dict[str, Any]) -> list[str]:
    found = []
    if get_in(jobset, "spec", "startupPolicy", "startupPolicyOrder") == "InOrder":
        found.append(
            "phalanx: spec.startupPolicy.startupPolicyOrder InOrder creates a replicatedJob's Jobs only "
            f"once the previous ones run, but the whole JobSet is one gang waiting at gate {c.GATE}: "
            "it never starts (use AnyOrder)"
        )
    waiting = [
        text(obj(r).get("name")) or str(i)
        for i, r in enumerate(_items(get_in(jobset, *REPLICATED_JOBS)))
        if _items(obj(r).get("dependsOn"))
    ]
    if waiting:
        found.append(
            f"phalanx: replicatedJobs {', '.join(waiting)} use dependsOn: their Jobs are created only "
            f"after others run or finish, but the whole JobSet is one gang waiting at gate {c.GATE}: "
            "it never starts"
        )
    exclusive = strings(get_in(jobset, "metadata", "annotations")).get(JOBSET_EXCLUSIVE) or any(
        JOBSET_EXCLUSIVE in strings(get_in(r, "template", "metadata", "annotations"))
        for r in _items(get_in(jobset, *REPLICATED_JOBS))
    )
    if exclusive:
        found.append(
            f"phalanx: {JOBSET_EXCLUSIVE}: JobSet's pod webhook refuses follower pods until the "
            f"leader pod is scheduled, but the leader waits at gate {c.GATE} for its followers: "
            "the gang never forms (use a nodeSelector or affinity instead)"
        )
    return found


def leader_ready(builder: PatchBuilder, lws: dict[str, Any]) -> list[str]:
    """LeaderReady creates the workers only once the leader runs; the leader waits for them."""
    if get_in(lws, "spec", "startupPolicy") != LEADER_READY:
        return []
    builder.set(("spec", "startupPolicy"), LEADER_CREATED)
    return [
        f"phalanx: spec.startupPolicy set to {LEADER_CREATED} (was {LEADER_READY}): {LEADER_READY} "
        f"creates the workers only once the leader is ready, but the leader waits at gate {c.GATE} "
        "for its workers"
    ]


def operator_traps(gvk: GVK, builder: PatchBuilder, workload: dict[str, Any]) -> list[str]:
    """Settings of the operators' kinds that deadlock a gated gang (fixed or warned about), and
    Kueue's suspension, which keeps the gang from forming at all."""
    found = kueue_managed(gvk[2], workload)
    if gvk == JOBSET:
        found += jobset_traps(workload)
    elif gvk == LEADERWORKERSET:
        found += leader_ready(builder, workload)
    return found
