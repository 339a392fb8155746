"""Real operators beside Phalanx: the pods an operator makes from a JobSet, an MPIJob, a
LeaderWorkerSet, a RayCluster or a TrainJob form one gang per object (per group for a
LeaderWorkerSet), sized from the object's spec and owned by it.

Each test starts only the operator it needs (``operators.ensure``); `make test` builds exactly
those before the run. Every pod gets a nodeSelector for the test's own node pool, so the capacity
arithmetic is exact in a shared cluster.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import NodePool
from tests.e2e.kube import GROUP_LABEL, bound, gated, podgroup, pods
from tests.e2e.waiting import eventually, stays
from tests.localcluster import LocalCluster
from tests.localcluster.operators import Operators
from tests.localcluster.phalanx import Phalanx

SEED = Path(__file__).parent / "manifests" / "seed"
IMAGE = "registry.example/train:1.0"


def _container(gpus: int) -> dict[str, Any]:
    return {"name": "main", "image": IMAGE, "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}


def apply(cluster: LocalCluster, namespace: str, obj: dict[str, Any]) -> str:
    result = cluster.kubectl(
        "apply", "--server-side", "--field-manager=e2e", "-n", namespace, "-f", "-", input=json.dumps(obj)
    )
    return result.stderr


def live(cluster: LocalCluster, ns: str, selector: str) -> list[dict[str, Any]]:
    return [p for p in pods(cluster, ns, selector) if not p["metadata"].get("deletionTimestamp")]


def count_bound(cluster: LocalCluster, ns: str, selector: str) -> int:
    return sum(1 for p in live(cluster, ns, selector) if bound(p))


def status(cluster: LocalCluster, ns: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = podgroup(cluster, ns, name).get("status", {})
    return result


def owner_kinds(cluster: LocalCluster, ns: str, name: str) -> set[str]:
    return {ref["kind"] for ref in podgroup(cluster, ns, name)["metadata"].get("ownerReferences", [])}


def wait_blocked(cluster: LocalCluster, ns: str, selector: str, group: str, members: int) -> None:
    """``members`` pods exist, gated, none bound, and the PodGroup says it waits for room."""
    eventually(lambda: len(live(cluster, ns, selector)) == members, 60, what=f"{members} pods of {group}")
    stays(lambda: count_bound(cluster, ns, selector) == 0, 3.0, what=f"nothing of {group} bound")
    assert all(gated(p) for p in live(cluster, ns, selector))
    eventually(
        lambda: (
            status(cluster, ns, group).get("phase") == "Pending" and status(cluster, ns, group).get("message")
        ),
        20,
        what=f"{group} Pending with a reason",
    )


def replace_one_member(cluster: LocalCluster, ns: str, selector: str, members: int) -> None:
    """Delete one bound member: the operator makes a replacement, which is bound beside the
    others, which keep running all along (the gang is not re-formed)."""
    before = {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in live(cluster, ns, selector)}
    victim = sorted(live(cluster, ns, selector), key=lambda p: p["metadata"]["name"])[-1]
    cluster.kubectl("delete", "pod", victim["metadata"]["name"], "-n", ns, "--wait=false")
    survivors = {uid: node for uid, node in before.items() if uid != victim["metadata"]["uid"]}

    def replaced() -> bool:
        now = live(cluster, ns, selector)
        fresh = [p for p in now if p["metadata"]["uid"] not in before]
        kept = {
            p["metadata"]["uid"]: p["spec"].get("nodeName") for p in now if p["metadata"]["uid"] in survivors
        }
        assert kept == survivors, "a surviving member was moved or lost while its peer was replaced"
        return len(fresh) == 1 and bound(fresh[0]) and len(now) == members

    eventually(replaced, 60, what="the replacement bound beside the surviving members")


# ---- JobSet ---------------------------------------------------------------------------------------
def jobset(name: str, pool: NodePool, replicas: int, parallelism: int) -> dict[str, Any]:
    pod_spec = {"restartPolicy": "Never", "nodeSelector": pool.selector, "containers": [_container(1)]}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "parallelism": parallelism,
                            "completions": parallelism,
                            "backoffLimit": 4,
                            "template": {"spec": pod_spec},
                        }
                    },
                }
            ]
        },
    }


def test_a_jobset_is_one_gang_owned_by_the_jobset(
    cluster: LocalCluster, operators: Operators, gang_namespace: str, pool: NodePool
) -> None:
    operators.ensure("jobset")
    ns, name = gang_namespace, "train"
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    pool.add(1, gpus=3)  # two Jobs of two pods: one GPU short
    warnings = apply(cluster, ns, jobset(name, pool, replicas=2, parallelism=2))
    assert "4 pods" in warnings, warnings

    wait_blocked(cluster, ns, selector, name, 4)
    assert {p["metadata"]["labels"][GROUP_LABEL] for p in live(cluster, ns, selector)} == {name}
    # One PodGroup for the JobSet (not one per child Job), owned by the JobSet.
    assert podgroup(cluster, ns, name)["spec"]["minMember"] == 4
    assert owner_kinds(cluster, ns, name) == {"JobSet"}

    pool.add(1, gpus=1)
    eventually(lambda: count_bound(cluster, ns, selector) == 4, 60, what="all 4 bound together")
    eventually(lambda: status(cluster, ns, name).get("phase") == "Running", 30, what="Running")

    replace_one_member(cluster, ns, selector, 4)

    # A JobSet is never re-sized: its own webhook refuses any change to replicatedJobs.
    scale = [{"op": "replace", "path": "/spec/replicatedJobs/0/replicas", "value": 3}]
    refused = cluster.kubectl(
        "patch", "jobset", name, "-n", ns, "--type=json", "-p", json.dumps(scale), check=False
    )
    assert refused.returncode != 0 and "immutable" in refused.stderr, refused.stderr


def test_a_jobset_kueue_holds_is_warned_about_and_makes_no_pod(
    cluster: LocalCluster, operators: Operators, gang_namespace: str, pool: NodePool
) -> None:
    operators.ensure("jobset")
    ns, name = gang_namespace, "queued"
    held = jobset(name, pool, replicas=1, parallelism=2)
    held["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
    held["spec"]["suspend"] = True
    warnings = apply(cluster, ns, held)
    assert "Kueue" in warnings and "team-a" in warnings, warnings
    stays(
        lambda: not live(cluster, ns, f"jobset.sigs.k8s.io/jobset-name={name}"), 3.0, what="no pod while held"
    )


# ---- MPIJob: the Coscheduling tutorial's Horovod example, verbatim ----------------------------
ML_TRAINING = "ml-training"  # the seeds' own namespace, written in their manifests


@pytest.fixture(scope="module")
def ml_training(cluster: LocalCluster, phalanx: Phalanx) -> Iterator[str]:
    """The seeds' namespace, opted in (they name it themselves, so they apply unchanged)."""
    yield from _exact_namespace(cluster, ML_TRAINING)


def _exact_namespace(cluster: LocalCluster, name: str) -> Iterator[str]:
    cluster.kubectl("create", "namespace", name, check=False)
    cluster.kubectl("label", "--overwrite", "namespace", name, "phalanx.io/gang-scheduling=enabled")
    eventually(
        lambda: cluster.kubectl("get", "sa", "default", "-n", name, check=False).returncode == 0,
        20,
        what="default ServiceAccount",
    )
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def seed_documents(file: str, pool: NodePool) -> list[dict[str, Any]]:
    """The seed's documents unchanged but for a nodeSelector on every pod template (the pool)."""
    docs = [d for d in yaml.safe_load_all((SEED / file).read_text()) if d]
    for doc in docs:
        for template in _pod_templates(doc):
            template.setdefault("spec", {})["nodeSelector"] = pool.selector
    return docs


def _pod_templates(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc.get("spec", {})
    if doc["kind"] == "MPIJob":
        return [r["template"] for r in spec["mpiReplicaSpecs"].values()]
    if doc["kind"] == "RayCluster":
        return [spec["headGroupSpec"]["template"], *(g["template"] for g in spec["workerGroupSpecs"])]
    return []


def apply_documents(cluster: LocalCluster, docs: list[dict[str, Any]]) -> str:
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    return cluster.kubectl("apply", "--server-side", "--field-manager=e2e", "-f", "-", input=body).stderr


def delete_documents(cluster: LocalCluster, docs: list[dict[str, Any]]) -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    cluster.kubectl("delete", "--wait=false", "--ignore-not-found", "-f", "-", input=body, check=False)


def test_horovod_mpijob_seed_runs_as_one_gang(
    cluster: LocalCluster, operators: Operators, ml_training: str, pool: NodePool
) -> None:
    operators.ensure("mpi-operator")
    ns, group = ml_training, "horovod-training-group"
    selector = "training.kubeflow.org/job-name=horovod-training"
    # Workers take one GPU each, the launcher none: with 6 GPUs at most 7 of the 8 the seed's
    # PodGroup asks for could run.
    pool.add(1, gpus=6)
    docs = seed_documents("coscheduling-horovod-mpijob.yaml", pool)
    try:
        warnings = apply_documents(cluster, docs)
        assert "scheduler-plugins-scheduler" in warnings, warnings
        wait_blocked(cluster, ns, selector, group, 9)  # the launcher and 8 workers

        pool.add(1, gpus=2)
        eventually(lambda: count_bound(cluster, ns, selector) == 9, 60, what="launcher + 8 workers bound")
        eventually(lambda: status(cluster, ns, group).get("phase") == "Running", 30, what="Running")

        # mpi-operator recreates a deleted worker; it joins the running gang.
        replace_one_member(cluster, ns, "training.kubeflow.org/job-role=worker", 8)
    finally:
        delete_documents(cluster, docs)


def test_an_mpijob_shrunk_while_it_waits_starts_and_grows_whole_when_scaled_up(
    cluster: LocalCluster, operators: Operators, gang_namespace: str, pool: NodePool
) -> None:
    operators.ensure("mpi-operator")
    ns, name = gang_namespace, "resized"
    selector = f"training.kubeflow.org/job-name={name}"
    workers = f"{selector},training.kubeflow.org/job-role=worker"

    def replica(replicas: int, gpus: int) -> dict[str, Any]:
        return {
            "replicas": replicas,
            "template": {"spec": {"nodeSelector": pool.selector, "containers": [_container(gpus)]}},
        }

    def scale(replicas: int) -> None:
        patch = [{"op": "replace", "path": "/spec/mpiReplicaSpecs/Worker/replicas", "value": replicas}]
        cluster.kubectl("patch", "mpijob", name, "-n", ns, "--type=json", "-p", json.dumps(patch))

    mpijob = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {"Launcher": replica(1, 0), "Worker": replica(4, 1)},
        },
    }
    pool.add(1, gpus=3)  # four 1-GPU workers never fit
    apply(cluster, ns, mpijob)
    wait_blocked(cluster, ns, selector, name, 5)  # the launcher and 4 workers
    assert podgroup(cluster, ns, name)["spec"]["minMember"] == 5

    # Shrunk to what fits: mpi-operator deletes workers 2 and 3, the gang follows and starts.
    scale(2)
    eventually(lambda: podgroup(cluster, ns, name)["spec"]["minMember"] == 3, 30, what="minMember 3")
    eventually(lambda: count_bound(cluster, ns, selector) == 3 and len(live(cluster, ns, selector)) == 3, 60)
    running = {p["metadata"]["uid"] for p in live(cluster, ns, selector)}

    # Scaled up to 4 workers with room for one more: the two new workers start together or not at all.
    scale(4)
    eventually(lambda: len(live(cluster, ns, workers)) == 4, 30, what="4 workers")
    eventually(lambda: podgroup(cluster, ns, name)["spec"]["minMember"] == 5, 30, what="minMember 5")
    stays(lambda: count_bound(cluster, ns, selector) == 3, 3.0, what="neither new worker alone")
    assert "2 more members needed to reach 5" in status(cluster, ns, name)["message"]
    pool.add(1, gpus=1)
    eventually(lambda: count_bound(cluster, ns, selector) == 5, 60, what="both new workers bound")
    assert running <= {p["metadata"]["uid"] for p in live(cluster, ns, selector)}, "a running member was lost"


# ---- RayCluster: the KAI tutorial's step 6, verbatim ------------------------------------------
def test_kai_raycluster_seed_is_one_gang_of_head_and_workers(
    cluster: LocalCluster, operators: Operators, ml_training: str, pool: NodePool
) -> None:
    operators.ensure("kuberay")
    ns, group = ml_training, "ray-cluster"
    selector = "ray.io/cluster=ray-cluster"
    pool.add(1, gpus=8)  # head (1 GPU) + 4 workers x 2 GPUs = 9
    docs = seed_documents("kai-raycluster.yaml", pool)
    try:
        warnings = apply_documents(cluster, docs)
        assert "kai-scheduler replaced" in warnings and "5 pods" in warnings, warnings
        wait_blocked(cluster, ns, selector, group, 5)
        assert owner_kinds(cluster, ns, group) == {"RayCluster"}

        pool.add(1, gpus=2)
        eventually(lambda: count_bound(cluster, ns, selector) == 5, 60, what="head + 4 workers bound")

        # KubeRay recreates a deleted worker; it joins the running gang.
        replace_one_member(cluster, ns, "ray.io/node-type=worker", 4)
    finally:
        delete_documents(cluster, docs)


# ---- LeaderWorkerSet ------------------------------------------------------------------------------
def test_each_leaderworkerset_group_is_a_gang_of_its_own(
    cluster: LocalCluster, operators: Operators, gang_namespace: str, pool: NodePool
) -> None:
    operators.ensure("lws")
    ns, name = gang_namespace, "serve"
    template = {"spec": {"nodeSelector": pool.selector, "containers": [_container(1)]}}
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": 2,
            "startupPolicy": "LeaderReady",
            "leaderWorkerTemplate": {"size": 3, "workerTemplate": template},
        },
    }
    pool.add(1, gpus=4)  # room for one group of 3, not two
    warnings = apply(cluster, ns, lws)
    assert "LeaderCreated" in warnings, warnings

    def group(index: int) -> str:
        return f"leaderworkerset.sigs.k8s.io/name={name},leaderworkerset.sigs.k8s.io/group-index={index}"

    eventually(
        lambda: len(live(cluster, ns, group(0))) + len(live(cluster, ns, group(1))) == 6, 60, what="6 pods"
    )
    eventually(
        lambda: count_bound(cluster, ns, group(0)) + count_bound(cluster, ns, group(1)) == 3,
        60,
        what="one group",
    )
    stays(
        lambda: sorted([count_bound(cluster, ns, group(0)), count_bound(cluster, ns, group(1))]) == [0, 3],
        3.0,
        what="one whole group bound, the other not at all",
    )
    for index in (0, 1):
        pg = podgroup(cluster, ns, f"{name}-{index}")
        assert pg["spec"]["minMember"] == 3
        assert {ref["kind"] for ref in pg["metadata"].get("ownerReferences", [])} == {"LeaderWorkerSet"}

    pool.add(1, gpus=2)
    eventually(
        lambda: count_bound(cluster, ns, group(0)) + count_bound(cluster, ns, group(1)) == 6, 60, what="both"
    )

    # Scaled up: the new replica is a gang of its own, which waits whole for room.
    cluster.kubectl("scale", "leaderworkerset", name, "-n", ns, "--replicas=3")
    eventually(lambda: len(live(cluster, ns, group(2))) == 3, 60, what="the third group's 3 pods")
    stays(lambda: count_bound(cluster, ns, group(2)) == 0, 3.0, what="the third group waits whole")
    pool.add(1, gpus=3)
    eventually(lambda: count_bound(cluster, ns, group(2)) == 3, 60, what="the third group bound")

    # A worker lost: LeaderWorkerSet recreates its whole group (RecreateGroupOnPodRestart), which
    # forms again whole; the other groups run on untouched. The operator looks the pod up by name:
    # KWOK removes a deleted pod at once and the StatefulSet makes one of the same name within
    # milliseconds, so it can miss the deletion (1 run in 5 here). A finalizer holds the pod
    # terminating until the operator has acted, as a real kubelet's graceful shutdown does.
    others = {p["metadata"]["uid"] for i in (1, 2) for p in live(cluster, ns, group(i))}
    first = {p["metadata"]["uid"] for p in live(cluster, ns, group(0))}
    members = live(cluster, ns, group(0))
    worker = next(p for p in members if p["metadata"]["name"].endswith("-1"))
    leader = next(p["metadata"]["uid"] for p in members if p["metadata"]["name"] == f"{name}-0")
    hold = ["patch", "pod", worker["metadata"]["name"], "-n", ns, "--type=merge", "-p"]
    cluster.kubectl(*hold, '{"metadata":{"finalizers":["phalanx.io/e2e-terminating"]}}')
    cluster.kubectl("delete", "pod", worker["metadata"]["name"], "-n", ns, "--wait=false")
    eventually(
        lambda: all(p["metadata"]["uid"] != leader for p in live(cluster, ns, group(0))),
        60,
        what="the group's leader deleted by the operator",
    )
    cluster.kubectl(*hold, '{"metadata":{"finalizers":null}}')

    def group_reformed() -> bool:
        now = live(cluster, ns, group(0))
        fresh = [p for p in now if p["metadata"]["uid"] not in first]
        return len(fresh) == 3 and all(bound(p) for p in fresh)

    eventually(group_reformed, 90, what="group 0 recreated and bound whole")
    assert {p["metadata"]["uid"] for i in (1, 2) for p in live(cluster, ns, group(i))} == others


# ---- TrainJob -------------------------------------------------------------------------------------
def test_a_trainjob_is_one_gang_owned_by_the_trainjob(
    cluster: LocalCluster, operators: Operators, gang_namespace: str, pool: NodePool
) -> None:
    operators.ensure("jobset")
    operators.ensure("trainer")
    ns, name = gang_namespace, f"tj-{uuid.uuid4().hex[:4]}"
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 3, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "2"}}},
            "podSpecOverrides": [{"targetJobs": [{"name": "node"}], "nodeSelector": pool.selector}],
        },
    }
    pool.add(1, gpus=4)  # 3 nodes x 2 GPUs: one node short
    apply(cluster, ns, trainjob)
    wait_blocked(cluster, ns, selector, name, 3)
    assert podgroup(cluster, ns, name)["spec"]["minMember"] == 3
    assert owner_kinds(cluster, ns, name) == {"TrainJob"}

    pool.add(1, gpus=2)
    eventually(lambda: count_bound(cluster, ns, selector) == 3, 60, what="all 3 nodes bound")

    replace_one_member(cluster, ns, selector, 3)


def test_a_raycluster_grows_beyond_min_replicas_as_elastic_members(
    cluster: LocalCluster, operators: Operators, gang_namespace: str, pool: NodePool
) -> None:
    operators.ensure("kuberay")
    ns, name = gang_namespace, "elastic"
    selector = f"ray.io/cluster={name}"
    template = {"spec": {"nodeSelector": pool.selector, "containers": [{**_container(1), "name": "ray"}]}}
    ray = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name},
        "spec": {
            "headGroupSpec": {"rayStartParams": {}, "template": template},
            "workerGroupSpecs": [
                {
                    "groupName": "gpu",
                    "replicas": 1,
                    "minReplicas": 1,
                    "maxReplicas": 3,
                    "rayStartParams": {},
                    "template": template,
                }
            ],
        },
    }
    pool.add(1, gpus=4)
    warnings = apply(cluster, ns, ray)
    assert "2 pods" in warnings, warnings  # head + 1 worker at minReplicas
    eventually(lambda: count_bound(cluster, ns, selector) == 2, 60, what="head + 1 worker bound")
    assert podgroup(cluster, ns, name)["spec"]["minMember"] == 2

    assert podgroup(cluster, ns, name)["spec"].get("maxMember") == 4  # head + maxReplicas 3

    # Scaled up within maxReplicas: the new workers join the running gang as they fit.
    scale = [{"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 3}]
    cluster.kubectl("patch", "raycluster", name, "-n", ns, "--type=json", "-p", json.dumps(scale))
    eventually(lambda: count_bound(cluster, ns, selector) == 4, 60, what="head + 3 workers bound")

    # minReplicas raised: the gang's size follows (head + 3 workers must now run together).
    raise_min = [{"op": "replace", "path": "/spec/workerGroupSpecs/0/minReplicas", "value": 3}]
    cluster.kubectl("patch", "raycluster", name, "-n", ns, "--type=json", "-p", json.dumps(raise_min))
    eventually(lambda: podgroup(cluster, ns, name)["spec"]["minMember"] == 4, 30, what="minMember 4")


def test_an_mpijob_launcher_that_waits_for_its_workers_joins_their_running_gang(
    cluster: LocalCluster, operators: Operators, gang_namespace: str, pool: NodePool
) -> None:
    operators.ensure("mpi-operator")
    ns, name = gang_namespace, "pi"
    selector = f"training.kubeflow.org/job-name={name}"

    def replica(replicas: int, gpus: int) -> dict[str, Any]:
        spec = {"nodeSelector": pool.selector, "containers": [_container(gpus)]}
        return {"replicas": replicas, "template": {"spec": spec}}

    mpijob = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "slotsPerWorker": 1,
            "launcherCreationPolicy": "WaitForWorkersReady",
            "mpiReplicaSpecs": {"Launcher": replica(1, 0), "Worker": replica(2, 2)},
        },
    }
    pool.add(1, gpus=4)
    warnings = apply(cluster, ns, mpijob)
    assert "2 pods" in warnings, warnings  # the workers; the launcher comes once they run
    eventually(lambda: count_bound(cluster, ns, f"{selector},training.kubeflow.org/job-role=worker") == 2, 60)
    assert podgroup(cluster, ns, name)["spec"]["minMember"] == 2
    assert owner_kinds(cluster, ns, name) == {"MPIJob"}
    # mpi-operator creates the launcher only now; it joins the running gang.
    eventually(
        lambda: count_bound(cluster, ns, f"{selector},training.kubeflow.org/job-role=launcher") == 1,
        60,
        what="the launcher bound beside its running workers",
    )


def test_the_raycluster_a_rayjob_makes_is_one_gang_owned_by_the_rayjob(
    cluster: LocalCluster, operators: Operators, gang_namespace: str, pool: NodePool
) -> None:
    operators.ensure("kuberay")
    ns, name = gang_namespace, "batch"
    template = {"spec": {"nodeSelector": pool.selector, "containers": [{**_container(1), "name": "ray"}]}}
    rayjob = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": name},
        "spec": {
            "entrypoint": "python train.py",
            "rayClusterSpec": {
                "headGroupSpec": {"rayStartParams": {}, "template": template},
                "workerGroupSpecs": [
                    {
                        "groupName": "gpu",
                        "replicas": 2,
                        "minReplicas": 2,
                        "maxReplicas": 2,
                        "rayStartParams": {},
                        "template": template,
                    }
                ],
            },
        },
    }
    pool.add(1, gpus=2)  # head + 2 workers need 3
    apply(cluster, ns, rayjob)
    clusters = eventually(
        lambda: cluster.kubectl_json("get", "rayclusters", "-n", ns)["items"],
        60,
        what="the RayJob's RayCluster",
    )
    group = clusters[0]["metadata"]["name"]
    selector = f"ray.io/cluster={group}"
    wait_blocked(cluster, ns, selector, group, 3)
    assert owner_kinds(cluster, ns, group) == {"RayJob"}

    pool.add(1, gpus=1)
    eventually(lambda: count_bound(cluster, ns, selector) == 3, 60, what="head + 2 workers bound")
