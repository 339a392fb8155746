"""The workload kinds Phalanx gates: where their pod templates are and how big their gang is."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webhook.shapes import get_in, integer, obj, text

# (API group, version, kind) as in an AdmissionRequest's ``kind``.
GVK = tuple[str, str, str]

POD: GVK = ("", "v1", "Pod")
JOB: GVK = ("batch", "v1", "Job")
STATEFULSET: GVK = ("apps", "v1", "StatefulSet")
MPIJOB: GVK = ("kubeflow.org", "v2beta1", "MPIJob")

MPI_LAUNCHER = ("spec", "mpiReplicaSpecs", "Launcher")
MPI_WORKER = ("spec", "mpiReplicaSpecs", "Worker")
WAIT_FOR_WORKERS_READY = "WaitForWorkersReady"


@dataclass(frozen=True, slots=True)
class WorkloadKind:
    name: str
    # Paths to every pod template the kind may carry (absent ones are skipped).
    template_paths: tuple[tuple[str, ...], ...]
    # Number of pods that must run together, from the workload's shape (always >= 1).
    gang_size: Callable[[dict[str, Any]], int]
    # Where an activeDeadlineSeconds lives that keeps running while pods wait at the gate.
    deadline_path: tuple[str, ...] | None = None


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
}
