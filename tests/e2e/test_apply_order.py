"""Real apply orders: pods before the group they name, PodGroups of other kinds applied later,
minResources, and gangs that could never run once complete."""

from __future__ import annotations

from typing import Any

import pytest

from controller.api import admission_record
from tests import builders
from tests.conftest import NodePool
from tests.e2e.kube import apply, bound, events, gated, group_pods, n_bound, podgroup, set_pod_quota
from tests.e2e.test_controller import pooled_job, pooled_pod
from tests.e2e.waiting import eventually, stays
from tests.localcluster import LocalCluster

COSCHEDULING = "pod-group.scheduling.sigs.k8s.io/name"


def has_podgroup(cluster: LocalCluster, ns: str, name: str) -> bool:
    found = cluster.kubectl("get", "podgroups.scheduling.sigs.k8s.io", name, "-n", ns, check=False)
    return found.returncode == 0


@pytest.mark.k8s_versions("1.35")  # the v1alpha1 Workload and the pod's spec.workloadRef
def test_workload_pods_applied_before_their_workload_wait_for_it(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    pool.add(1, gpus=8)
    ref = {"name": "late", "podGroup": "workers"}
    for i in range(2):
        apply(
            cluster,
            gang_namespace,
            pooled_pod(f"worker-{i}", pool).pod_spec(workloadRef=ref).build(),
        )
    eventually(
        lambda: any(e["reason"] == "WaitingForWorkload" for e in events(cluster, gang_namespace, "worker-0")),
        20,
        what="the pods say they wait for their Workload",
    )
    stays(lambda: n_bound(cluster, gang_namespace, "late-workers") == 0, 2.0, what="no member starts alone")
    assert not has_podgroup(cluster, gang_namespace, "late-workers")

    workload = {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "late"},
        "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 3}}}]},
    }
    apply(cluster, gang_namespace, workload)
    pg = eventually(lambda: podgroup(cluster, gang_namespace, "late-workers"), 20, what="the PodGroup")
    assert pg["spec"]["minMember"] == 3
    stays(lambda: n_bound(cluster, gang_namespace, "late-workers") == 0, 2.0, what="2 of the declared 3 wait")
    apply(
        cluster,
        gang_namespace,
        pooled_pod("worker-2", pool).pod_spec(workloadRef=ref).build(),
    )
    eventually(lambda: n_bound(cluster, gang_namespace, "late-workers") == 3, 30, what="3 bound together")


def test_a_job_linked_to_a_podgroup_applied_later_waits_for_its_size(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    pool.add(1, gpus=8)
    job = pooled_job("late-group", pool).parallelism(2).template_labels({COSCHEDULING: "team"}).build()
    apply(cluster, gang_namespace, job)
    eventually(lambda: len(group_pods(cluster, gang_namespace, "team")) == 2, 20, what="the Job's pods")
    stays(lambda: n_bound(cluster, gang_namespace, "team") == 0, 3.0, what="no PodGroup of the Job's guess")
    assert not has_podgroup(cluster, gang_namespace, "team")
    first = group_pods(cluster, gang_namespace, "team")[0]["metadata"]["name"]
    waiting = [e for e in events(cluster, gang_namespace, first) if e["reason"] == "WaitingForPodGroup"]
    assert waiting and COSCHEDULING in waiting[0]["message"]

    # The team's PodGroup spans this Job and a second one: 3 members, not the Job's 2.
    group = builders.podgroup("team", 3)
    apply(cluster, gang_namespace, group)
    stays(lambda: n_bound(cluster, gang_namespace, "team") == 0, 2.0, what="2 of the group's 3 wait")
    second = pooled_job("late-group-2", pool).parallelism(1).template_labels({COSCHEDULING: "team"}).build()
    apply(cluster, gang_namespace, second)
    eventually(lambda: n_bound(cluster, gang_namespace, "team") == 3, 30, what="3 bound together")


def test_a_users_later_podgroup_of_another_kind_replaces_phalanxs(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    pool.add(1, gpus=8)
    # Phalanx sizes the Job from its spec (3) and makes a PodGroup; 2 pods are allowed so far.
    job = pooled_job("shadowed", pool).parallelism(3).build()
    set_pod_quota(cluster, gang_namespace, "two", 2)
    apply(cluster, gang_namespace, job)
    eventually(lambda: has_podgroup(cluster, gang_namespace, "shadowed"), 20, what="Phalanx's PodGroup")
    stays(lambda: n_bound(cluster, gang_namespace, "shadowed") == 0, 2.0, what="2 of 3 wait")

    kai = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "shadowed"},
        "spec": {"minMember": 2},
    }
    apply(cluster, gang_namespace, kai)
    eventually(lambda: not has_podgroup(cluster, gang_namespace, "shadowed"), 20, what="Phalanx's retired")
    eventually(lambda: n_bound(cluster, gang_namespace, "shadowed") == 2, 30, what="the user's size: 2 bound")
    users = podgroup(cluster, gang_namespace, "shadowed", group="scheduling.x-k8s.io")
    assert users["status"]["phase"] in ("Scheduled", "Running", "Scheduling")


def test_min_resources_hold_a_gang_that_fits_until_that_much_is_free(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    (node,) = pool.add(1, gpus=8)
    blocker = (
        builders.pod("blocker").gpus(3).node_selector({"kubernetes.io/hostname": pool.hostname(node)}).build()
    )
    apply(cluster, gang_namespace, blocker)
    eventually(lambda: bound(cluster.kubectl_json("get", "pod", "blocker", "-n", gang_namespace)), 20)
    group = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "roomy"},
        "spec": {"minMember": 2, "minResources": {"nvidia.com/gpu": "8"}},
    }
    apply(cluster, gang_namespace, group)
    for i in range(2):  # 2 × 1 GPU fit in the 5 free; minResources asks for 8 free
        member = pooled_pod(f"roomy-{i}", pool).labels({COSCHEDULING: "roomy"}).build()
        apply(cluster, gang_namespace, member)
    stays(lambda: n_bound(cluster, gang_namespace, "roomy") == 0, 3.0, what="held by minResources")
    status = podgroup(cluster, gang_namespace, "roomy")["status"]
    assert status["reason"] == "InsufficientCapacity"
    assert "minResources needs 8 nvidia.com/gpu free where its pods may run, 5 are" in status["message"]

    cluster.kubectl("delete", "pod", "blocker", "-n", gang_namespace, "--wait=false")
    eventually(lambda: n_bound(cluster, gang_namespace, "roomy") == 2, 30, what="admitted once 8 are free")


def test_a_gang_that_could_never_run_once_complete_says_so_while_members_arrive(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    pool.add(1, gpus=8)
    group = builders.podgroup("huge", 10000)
    apply(cluster, gang_namespace, group)
    for i in range(3):
        member = pooled_pod(f"huge-{i}", pool).labels({COSCHEDULING: "huge"}).build()
        apply(cluster, gang_namespace, member)

    def reason() -> str:
        return str(podgroup(cluster, gang_namespace, "huge").get("status", {}).get("reason"))

    eventually(lambda: reason() == "Unschedulable", 20, what="Unschedulable, not WaitingForMembers")

    def message() -> str:
        return str(podgroup(cluster, gang_namespace, "huge")["status"].get("message", ""))

    # A change of count alone is written at most once a second per gang, so the first
    # Unschedulable status may still count fewer members; the last count must follow.
    eventually(
        lambda: message().startswith("3 of 10000 members exist, and all 10000 could never run together"),
        10,
        what="the message counts all three members",
    )
    assert reason() == "Unschedulable"
    assert all(gated(p) for p in group_pods(cluster, gang_namespace, "huge"))


def test_a_podgroup_deleted_under_a_running_gang_is_made_again_with_its_admission(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    pool.add(1, gpus=8)
    apply(cluster, gang_namespace, pooled_job("kept", pool).parallelism(3).build())
    eventually(lambda: n_bound(cluster, gang_namespace, "kept") == 3, 30, what="the gang runs")
    before = podgroup(cluster, gang_namespace, "kept")
    uids = {p["metadata"]["uid"] for p in group_pods(cluster, gang_namespace, "kept")}
    cluster.kubectl("delete", "podgroups.scheduling.sigs.k8s.io", "kept", "-n", gang_namespace)

    def recreated() -> dict[str, Any] | None:
        pg = podgroup(cluster, gang_namespace, "kept")
        return pg if pg["metadata"]["uid"] != before["metadata"]["uid"] else None

    again = eventually(recreated, 20, what="the PodGroup made again")
    # With the admission it carried: the running members stay admitted, nothing re-forms.
    assert again["metadata"]["annotations"]["phalanx.io/admission"]
    eventually(
        lambda: podgroup(cluster, gang_namespace, "kept").get("status", {}).get("phase") == "Running",
        20,
        what="Running again on the new PodGroup",
    )
    assert {p["metadata"]["uid"] for p in group_pods(cluster, gang_namespace, "kept")} == uids


def test_a_gang_of_300_is_admitted_with_its_record_written_compressed(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    """A record past 16 KiB is written compressed: the API server takes it, the admission-record
    policy lets the controller write it, and the gang starts whole."""
    pool.add(38, gpus=8)
    apply(cluster, gang_namespace, pooled_job("wide", pool).parallelism(300).build())
    eventually(lambda: n_bound(cluster, gang_namespace, "wide") == 300, 120, what="all 300 bound")
    record = podgroup(cluster, gang_namespace, "wide")["metadata"]["annotations"]["phalanx.io/admission"]
    assert record.startswith("zlib:")
    decoded = admission_record.decode({"phalanx.io/admission": record})
    assert decoded is not None
    uids = {p["metadata"]["uid"] for p in group_pods(cluster, gang_namespace, "wide")}
    assert set(decoded.placement) == uids
