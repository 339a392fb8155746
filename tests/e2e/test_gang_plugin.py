"""Phalanx beside the stock scheduler's own gang scheduling (1.37: the GangScheduling plugin runs
with GenericWorkload, as on the shared cluster).

How the two compose (docs/coming-from-workload-api.md): Phalanx plans, pins and lifts every gate of a
gang at once; the scheduler's Permit barrier then waits for exactly the members Phalanx admitted, so it
holds nothing Phalanx let go and never holds a gang twice. Where the Job controller makes a Job's
Workload and PodGroup itself (WorkloadWithJob), the Job is still one gang.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests import builders
from tests.conftest import NodePool
from tests.e2e.conftest import AlphaGangs
from tests.e2e.kube import apply, bound, gated, held_through_a_pass, podgroup, pods
from tests.e2e.waiting import eventually
from tests.localcluster import LocalCluster
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
    job = builders.job(name).parallelism(size).gpus(1).run_for(run_for).scheduling_group(name)
    if pool is not None:
        job.node_selector(pool.selector)
    return [group, job.build()]


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


def test_a_job_whose_podgroup_the_job_controller_made_is_one_gang(alpha: AlphaGangs) -> None:
    """WorkloadWithJob on: the Job controller makes each Job's Workload and PodGroup itself."""
    cluster, phalanx, ns, pool = alpha.cluster, alpha.phalanx, alpha.namespace, alpha.pool
    pool.add(1, gpus=8)
    gang = {"schedulingPolicy": {"gang": {"minCount": 5}}}
    for name, run_for in (("first", "8s"), ("second", "2s")):
        job = builders.job(name).parallelism(5).gpus(1).run_for(run_for).scheduling(gang)
        apply(cluster, ns, job.node_selector(pool.selector).build())
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
