"""Manifests written for Coscheduling, current scheduler-plugins, Alibaba ACS, NVIDIA KAI and the
native Workload API, applied unchanged (server-side apply, as a user would), are gang-scheduled.

The only change the test makes: every pod gets a nodeSelector for the test's own node pool, so the
capacity arithmetic is exact in a shared cluster.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import builders
from tests.conftest import NodePool
from tests.e2e.kube import (
    bound,
    events,
    gated,
    group_pods,
    held_through_a_pass,
    n_bound,
    podgroup,
    pods,
    set_pod_quota,
)
from tests.e2e.test_controller import pooled_pod
from tests.e2e.waiting import eventually
from tests.localcluster import LocalCluster
from tests.localcluster.phalanx import Phalanx

COMPAT = Path(__file__).parent / "manifests" / "compat"


def _pod_specs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    kind = obj.get("kind")
    if kind == "Pod":
        return [obj["spec"]]
    if kind in ("Job", "StatefulSet"):
        return [obj["spec"]["template"]["spec"]]
    if kind == "List":
        return [spec for item in obj["items"] for spec in _pod_specs(item)]
    return []


def apply_manifest(
    cluster: LocalCluster,
    namespace: str,
    name: str,
    pool: NodePool,
    edit: Callable[[dict[str, Any]], None] | None = None,
    only: Callable[[dict[str, Any]], bool] | None = None,
) -> str:
    docs = []
    for doc in yaml.safe_load_all((COMPAT / name).read_text()):
        if doc:
            docs.extend(doc["items"] if doc.get("kind") == "List" else [doc])
    docs = [doc for doc in docs if only is None or only(doc)]
    for doc in docs:
        if edit is not None:
            edit(doc)
        for spec in _pod_specs(doc):
            spec["nodeSelector"] = pool.selector
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    result = cluster.kubectl(
        "apply", "--server-side", "--field-manager=e2e", "-n", namespace, "-f", "-", input=body
    )
    return result.stderr


def test_coscheduling_pytorch_statefulset(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    pool.add(1, gpus=3)  # one GPU short of the gang
    warnings = apply_manifest(cluster, gang_namespace, "coscheduling-pytorch.yaml", pool)
    assert "scheduler-plugins-scheduler" in warnings and "Parallel" in warnings, warnings
    eventually(
        lambda: len(group_pods(cluster, gang_namespace, "pytorch-pg")) == 4, 30, what="4 replicas exist"
    )
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: n_bound(cluster, gang_namespace, "pytorch-pg") == 0,
        "nothing bound on 3 GPUs",
    )
    pg = podgroup(cluster, gang_namespace, "pytorch-pg")
    # Its minResources (4 GPUs) are not free either: that is what it says first.
    assert pg["status"]["phase"] == "Pending" and "needs 4" in pg["status"]["message"], pg["status"]

    pool.add(1, gpus=8)
    eventually(lambda: n_bound(cluster, gang_namespace, "pytorch-pg") == 4, 30, what="all 4 together")
    eventually(
        lambda: podgroup(cluster, gang_namespace, "pytorch-pg")["status"]["phase"] == "Running",
        20,
        what="Running",
    )
    table = cluster.kubectl("get", "pg", "-n", gang_namespace).stdout
    assert "pytorch-pg" in table and "Running" in table, table


def test_current_scheduler_plugins_group(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    pool.add(1, gpus=8)

    def four(doc: dict[str, Any]) -> None:  # unlike the Job's 3: only the PodGroup says 4
        if doc["kind"] == "PodGroup":
            doc["spec"]["minMember"] = 4

    apply_manifest(cluster, gang_namespace, "scheduler-plugins-x-k8s.yaml", pool, edit=four)
    eventually(lambda: len(group_pods(cluster, gang_namespace, "train")) == 3, 30, what="the Job's 3 pods")
    held_through_a_pass(
        cluster, phalanx, lambda: n_bound(cluster, gang_namespace, "train") == 0, "the group's 4 never start"
    )
    # The PodGroup's 4, not the Job's 3, is the gang's size: more than the Job can ever create.
    status = podgroup(cluster, gang_namespace, "train", group="scheduling.x-k8s.io")["status"]
    assert status["reason"] == "InvalidSpec", status
    assert status["message"] == "minMember is 4 but the workload can only ever create 3 members"
    cluster.kubectl(  # the manifest's own 3
        "patch",
        "podgroups.scheduling.x-k8s.io",
        "train",
        "-n",
        gang_namespace,
        "--type",
        "merge",
        "-p",
        '{"spec": {"minMember": 3}}',
    )
    eventually(lambda: n_bound(cluster, gang_namespace, "train") == 3, 30, what="3 members bound")
    status = eventually(
        lambda: (
            (
                s := podgroup(cluster, gang_namespace, "train", group="scheduling.x-k8s.io").get("status", {})
            ).get("phase")
            in ("Running", "Scheduled")
            and s
        ),
        20,
        what="status written on the scheduling.x-k8s.io PodGroup",
    )
    assert status["running"] + status["scheduled"] >= 3
    # No second PodGroup was made in the primary group: the user's was adopted.
    assert cluster.kubectl("get", "pg", "train", "-n", gang_namespace, check=False).returncode != 0


def test_acs_quota_holds_everyone_until_lifted(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    pool.add(1, gpus=8)
    set_pod_quota(cluster, gang_namespace, "two", 2)
    apply_manifest(cluster, gang_namespace, "acs-job.yaml", pool)
    eventually(lambda: len(group_pods(cluster, gang_namespace, "acs-gang")) == 2, 30, what="2 of 3 exist")
    held_through_a_pass(
        cluster, phalanx, lambda: n_bound(cluster, gang_namespace, "acs-gang") == 0, "none scheduled"
    )
    assert podgroup(cluster, gang_namespace, "acs-gang")["status"]["reason"] == "WaitingForMembers"
    set_pod_quota(cluster, gang_namespace, "two", 10)
    eventually(lambda: n_bound(cluster, gang_namespace, "acs-gang") == 3, 60, what="all 3 start together")


def test_kai_elastic_gang_starts_at_min_and_grows(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    pool.add(1, gpus=3)
    warnings = apply_manifest(cluster, gang_namespace, "kai-elastic.yaml", pool)
    assert "kai-scheduler" in warnings, warnings
    eventually(
        lambda: n_bound(cluster, gang_namespace, "kai-elastic") == 3, 30, what="min 2 + 1 elastic member"
    )
    assert sum(1 for p in group_pods(cluster, gang_namespace, "kai-elastic") if gated(p)) == 1
    status = podgroup(cluster, gang_namespace, "kai-elastic", group="scheduling.run.ai")["status"]
    assert status["phase"] in ("Scheduled", "Running")
    pool.add(1, gpus=1)
    eventually(lambda: n_bound(cluster, gang_namespace, "kai-elastic") == 4, 30, what="grew to maxMember")


def test_two_jobs_joined_by_pod_group_name_to_a_v2alpha2_podgroup_are_one_gang(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    """KAI as it ships: a v2alpha2 PodGroup, pods linked by ``pod-group-name``, the queue by the
    label ``kai.scheduler/queue``. On 3 GPUs a gang per Job (of 2) would start; the one of 4 waits."""
    pool.add(1, gpus=3)
    queue = f"kai-{gang_namespace}"
    kai_queues = "queues.scheduling.run.ai"
    cluster.apply_objects(
        [
            {
                "apiVersion": "scheduling.run.ai/v2",
                "kind": "Queue",
                "metadata": {"name": queue},
                "spec": {"resources": {"gpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1}}},
            }
        ]
    )

    def queue_named(doc: dict[str, Any]) -> None:
        if doc["kind"] == "Job":
            doc["spec"]["template"]["metadata"]["labels"]["kai.scheduler/queue"] = queue

    def part(*names: str) -> Callable[[dict[str, Any]], bool]:
        return lambda doc: doc["metadata"]["name"] in names

    try:
        warnings = apply_manifest(
            cluster,
            gang_namespace,
            "kai-v2alpha2.yaml",
            pool,
            edit=queue_named,
            only=part("kai-train", "launcher"),
        )
        assert "kai-scheduler" in warnings, warnings
        eventually(
            lambda: len(group_pods(cluster, gang_namespace, "kai-train")) == 2, 30, what="the launcher's 2"
        )
        held_through_a_pass(
            cluster, phalanx, lambda: n_bound(cluster, gang_namespace, "kai-train") == 0, "2 of 4 wait"
        )
        # Until the second Job makes its pods, the workloads seen can make only 2 of the 4.
        status = podgroup(cluster, gang_namespace, "kai-train", group="scheduling.run.ai")["status"]
        assert status["reason"] == "InvalidSpec", status
        # Not a gang per Job: no PodGroup was made for either.
        assert cluster.kubectl("get", "pg", "launcher", "-n", gang_namespace, check=False).returncode != 0

        apply_manifest(
            cluster, gang_namespace, "kai-v2alpha2.yaml", pool, edit=queue_named, only=part("workers")
        )
        eventually(
            lambda: len(group_pods(cluster, gang_namespace, "kai-train")) == 4, 30, what="the workers' 2"
        )
        held_through_a_pass(
            cluster, phalanx, lambda: n_bound(cluster, gang_namespace, "kai-train") == 0, "4 on 3 GPUs wait"
        )
        status = podgroup(cluster, gang_namespace, "kai-train", group="scheduling.run.ai")["status"]
        # One gang of 4 (a gang per Job would need only 2 on a node).
        assert status["reason"] == "Unschedulable" and "needs 4 pods" in status["message"], status
        pool.add(1, gpus=1)
        eventually(lambda: n_bound(cluster, gang_namespace, "kai-train") == 4, 30, what="all 4 together")
        pg = podgroup(cluster, gang_namespace, "kai-train", group="scheduling.run.ai")
        # Released whole: one admission recorded all four before any gate was lifted.
        record = json.loads(pg["metadata"]["annotations"]["phalanx.io/admission"])
        assert set(record["placement"]) == {
            p["metadata"]["uid"] for p in group_pods(cluster, gang_namespace, "kai-train")
        }
        reasons = [e["reason"] for e in events(cluster, gang_namespace, "kai-train")]
        assert reasons.count("Admitted") == 1 and "MembersAdmitted" not in reasons, reasons
        # The gang was charged to the queue its pods' kai.scheduler/queue label names.
        eventually(
            lambda: (
                cluster.kubectl_json("get", kai_queues, queue).get("status", {}).get("admittedGangs") == 1
            ),
            20,
            what="the KAI queue counts the gang",
        )
        eventually(
            lambda: (
                podgroup(cluster, gang_namespace, "kai-train", group="scheduling.run.ai")["status"]["phase"]
                in ("Scheduled", "Running")
            ),
            20,
            what="the gang's status on the KAI PodGroup",
        )
        # Every KAI field is kept, read at either served version.
        for version in ("v2alpha2", "v2"):
            got = cluster.kubectl_json(
                "get", f"podgroups.{version}.scheduling.run.ai", "kai-train", "-n", gang_namespace
            )
            assert got["apiVersion"] == f"scheduling.run.ai/{version}"
            assert got["spec"]["subGroups"] == [
                {"name": "launcher", "minMember": 2},
                {"name": "workers", "minMember": 2},
            ]
            assert got["spec"]["preemptibility"] == "non-preemptible"
            assert got["spec"]["topologyConstraint"] == {
                "preferredTopologyLevel": "topology.kubernetes.io/rack"
            }
            assert got["status"]["phase"] in ("Scheduled", "Running")
    finally:
        cluster.kubectl("delete", kai_queues, queue, "--wait=false", check=False)


def test_kai_child_group_never_starts_alone(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    pool.add(1, gpus=8)
    apply_manifest(cluster, gang_namespace, "kai-hierarchy.yaml", pool)

    def child(name: str, i: int) -> dict[str, Any]:
        return pooled_pod(f"{name}-{i}", pool).annotations({"scheduling.run.ai/pod-group": name}).build()

    for i in range(2):
        cluster.kubectl("apply", "-n", gang_namespace, "-f", "-", input=json.dumps(child("kai-child-a", i)))
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: n_bound(cluster, gang_namespace, "kai-child-a") == 0,
        "child a waits for its sibling",
    )
    reason = podgroup(cluster, gang_namespace, "kai-child-a", group="scheduling.run.ai")["status"]["reason"]
    assert reason == "WaitingForSiblings", reason
    for i in range(2):
        cluster.kubectl("apply", "-n", gang_namespace, "-f", "-", input=json.dumps(child("kai-child-b", i)))
    eventually(
        lambda: (
            n_bound(cluster, gang_namespace, "kai-child-a") == 2
            and n_bound(cluster, gang_namespace, "kai-child-b") == 2
        ),
        30,
        what="both children admitted together",
    )


@pytest.mark.k8s_versions("1.35")  # the v1alpha1 Workload and the pod's spec.workloadRef
def test_native_workload_api(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    pool.add(1, gpus=8)
    apply_manifest(cluster, gang_namespace, "workload-api.yaml", pool)
    for i in range(2):
        member = (
            pooled_pod(f"worker-{i}", pool)
            .pod_spec(workloadRef={"name": "train", "podGroup": "workers"})
            .build()
        )
        cluster.kubectl("apply", "-n", gang_namespace, "-f", "-", input=json.dumps(member))
    pg = eventually(
        lambda: podgroup(cluster, gang_namespace, "train-workers"), 30, what="the PodGroup Phalanx keeps"
    )
    assert pg["spec"]["minMember"] == 3 and pg["spec"]["scheduleTimeoutSeconds"] == 120
    assert pg["metadata"]["ownerReferences"][0]["kind"] == "Workload"
    held_through_a_pass(
        cluster, phalanx, lambda: n_bound(cluster, gang_namespace, "train-workers") == 0, "2 of 3 wait"
    )
    member = (
        pooled_pod("worker-2", pool).pod_spec(workloadRef={"name": "train", "podGroup": "workers"}).build()
    )
    cluster.kubectl("apply", "-n", gang_namespace, "-f", "-", input=json.dumps(member))
    eventually(lambda: n_bound(cluster, gang_namespace, "train-workers") == 3, 30, what="3 bound together")
    eventually(
        lambda: any(
            e["reason"] == "Admitted" and e["involvedObject"]["kind"] == "Workload"
            for e in events(cluster, gang_namespace, "train")
        ),
        20,
        what="an Admitted Event on the Workload",
    )


def test_min_resources_are_checked_per_node(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    nodes = pool.add(3, gpus=4)
    for i, node in enumerate(nodes):  # 1 GPU taken on every node: 9 free in sum, 3 on each
        blocker = (
            builders.pod(f"blocker-{i}")
            .gpus(1)
            .node_selector({"kubernetes.io/hostname": pool.hostname(node)})
            .build()
        )
        cluster.kubectl("apply", "-n", gang_namespace, "-f", "-", input=json.dumps(blocker))
    eventually(
        lambda: (
            sum(
                1
                for p in pods(cluster, gang_namespace)
                if p["metadata"]["name"].startswith("blocker") and bound(p)
            )
            == 3
        ),
        20,
        what="blockers bound",
    )
    manifest = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "wide"},
        "spec": {"minMember": 2, "minResources": {"nvidia.com/gpu": "8"}},
    }
    cluster.kubectl("apply", "-n", gang_namespace, "-f", "-", input=json.dumps(manifest))
    for i in range(2):
        member = (
            pooled_pod(f"wide-{i}", pool)
            .gpus(4)
            .labels({"pod-group.scheduling.sigs.k8s.io/name": "wide"})
            .build()
        )
        cluster.kubectl("apply", "-n", gang_namespace, "-f", "-", input=json.dumps(member))
    # A cluster-wide sum (9 free >= 8) would admit it; no node has 4 free GPUs, so it waits.
    held_through_a_pass(
        cluster, phalanx, lambda: n_bound(cluster, gang_namespace, "wide") == 0, "not admitted on summed room"
    )
    status = podgroup(cluster, gang_namespace, "wide")["status"]
    assert (
        status["reason"] == "InsufficientCapacity" and "needs 2 pods × 4 nvidia.com/gpu" in status["message"]
    )
