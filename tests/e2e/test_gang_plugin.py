"""Phalanx beside the stock scheduler's own gang scheduling (1.37: the GangScheduling plugin runs
with GenericWorkload, as on the shared cluster).

How the two compose (docs/coming-from-workload-api.md): Phalanx plans, pins and lifts every gate of a
gang at once; the scheduler's Permit barrier then waits for exactly the members Phalanx admitted, so it
holds nothing Phalanx let go and never holds a gang twice. Where the Job controller makes a Job's
Workload and PodGroup itself (WorkloadWithJob), the Job is still one gang.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import NodePool, _namespace
from tests.e2e import workloads as w
from tests.e2e.kube import apply, bound, gated, held_through_a_pass, podgroup, pods
from tests.e2e.waiting import eventually
from tests.localcluster import LocalCluster
from tests.localcluster.cluster import ClusterConfig
from tests.localcluster.fleet import FleetSpec
from tests.localcluster.phalanx import Phalanx

pytestmark = pytest.mark.k8s_versions("1.37")


def native_gang_job(
    cluster: LocalCluster, name: str, size: int, pool: NodePool | None, run_for: str
) -> list[dict[str, Any]]:
    """A native PodGroup of ``size`` and a Job whose pods name it (spec.schedulingGroup)."""
    group = {
        "apiVersion": cluster.config.release.workload_api,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": size}}},
    }
    job = w.job(name, size, run_for=run_for)
    job["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": name}
    if pool is not None:
        job["spec"]["template"]["spec"]["nodeSelector"] = pool.selector
    return [group, job]


def live(cluster: LocalCluster, ns: str, job: str) -> list[dict[str, Any]]:
    return [p for p in pods(cluster, ns, f"job-name={job}") if not p["metadata"].get("deletionTimestamp")]


def bound_or_done(cluster: LocalCluster, ns: str, job: str) -> int:
    return sum(1 for p in live(cluster, ns, job) if bound(p) or p["status"].get("phase") == "Succeeded")


def whole_or_nothing(cluster: LocalCluster, ns: str, job: str) -> bool:
    members = live(cluster, ns, job)
    return sum(1 for p in members if bound(p)) == 0 and all(gated(p) for p in members)


def test_the_deadlock_race_resolves_one_whole_gang_at_a_time(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    assert cluster.config.runs_gang_plugin
    pool.add(1, gpus=8)
    for name, run_for in (("first", "8s"), ("second", "3s")):
        for obj in native_gang_job(cluster, name, 5, pool, run_for):
            apply(cluster, gang_namespace, obj)
    eventually(
        lambda: bound_or_done(cluster, gang_namespace, "first") == 5, 60, what="first gang bound whole"
    )
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: whole_or_nothing(cluster, gang_namespace, "second"),
        "second gang wholly gated while the first holds 5 of 8 GPUs",
    )
    assert podgroup(cluster, gang_namespace, "second")["status"]["reason"] == "InsufficientCapacity"
    eventually(
        lambda: bound_or_done(cluster, gang_namespace, "second") == 5,
        60,
        what="second gang admitted whole after the first finished",
    )


def test_a_64_pod_gang_starts_whole_and_a_second_one_waits_whole(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    pool.add(8, gpus=8)
    for obj in native_gang_job(cluster, "big", 64, pool, "20s"):
        apply(cluster, gang_namespace, obj)
    eventually(lambda: bound_or_done(cluster, gang_namespace, "big") == 64, 180, what="64 members bound")
    for obj in native_gang_job(cluster, "next", 64, pool, "2s"):
        apply(cluster, gang_namespace, obj)
    eventually(lambda: len(live(cluster, gang_namespace, "next")) == 64, 120, what="64 members of the next")
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: whole_or_nothing(cluster, gang_namespace, "next"),
        "the next 64-pod gang wholly gated while the first holds every GPU",
    )
    eventually(lambda: bound_or_done(cluster, gang_namespace, "next") == 64, 180, what="the next gang whole")


@pytest.fixture(scope="module")
def job_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Phalanx]]:
    """A control plane whose Job controller makes each Job's Workload and PodGroup (WorkloadWithJob)."""
    cluster = LocalCluster(
        ClusterConfig(
            name="phalanx-jobgangs",
            workdir=tmp_path_factory.mktemp("jobgang-cluster"),
            fleet=FleetSpec(gpu_nodes=1, gpus_per_node=8, cpu_nodes=0),
            feature_gates=("WorkloadWithJob",),
        )
    )
    phalanx = Phalanx(cluster)
    try:
        try:
            cluster.up()
        except (TimeoutError, RuntimeError):  # a port kwokctl picked was taken meanwhile: once more
            cluster.up()
        phalanx.up()
        yield cluster, phalanx
    finally:
        phalanx.down()
        cluster.down()


def test_a_job_whose_podgroup_the_job_controller_made_is_one_gang(
    job_cluster: tuple[LocalCluster, Phalanx],
) -> None:
    cluster, phalanx = job_cluster
    ns = next(namespaces := _namespace(cluster, "gang", {"phalanx.io/gang-scheduling": "enabled"}))
    gang = {"schedulingPolicy": {"gang": {"minCount": 5}}}
    apply(cluster, ns, w.job("first", 5, run_for="8s", scheduling=gang))
    apply(cluster, ns, w.job("second", 5, run_for="2s", scheduling=gang))
    eventually(lambda: bound_or_done(cluster, ns, "first") == 5, 90, what="first Job bound whole")
    members = live(cluster, ns, "first")
    native = {p["spec"].get("schedulingGroup", {}).get("podGroupName") for p in members}
    assert len(native) == 1 and None not in native, native  # the Job controller linked every pod
    (native_name,) = native
    made = cluster.kubectl_json(
        "get",
        f"podgroups.{cluster.config.release.workload_api.split('/')[1]}.scheduling.k8s.io",
        native_name,
        "-n",
        ns,
    )
    assert made["metadata"]["ownerReferences"][0]["kind"] == "Job"
    # One gang: one Phalanx PodGroup for the Job, holding every member.
    assert {p["metadata"]["labels"]["phalanx.io/pod-group"] for p in members} == {
        podgroup(cluster, ns, "first")["metadata"]["name"]
    }
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: whole_or_nothing(cluster, ns, "second"),
        "the second Job wholly gated while the first holds 5 of 8 GPUs",
    )
    eventually(lambda: bound_or_done(cluster, ns, "second") == 5, 90, what="second Job admitted whole")
    next(namespaces, None)
