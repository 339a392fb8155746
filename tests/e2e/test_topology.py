"""A gang held to one rack (phalanx.io/topology-required) on the real control plane: KWOK nodes
labelled in racks, the webhook copying the annotation, the controller's PodGroup carrying it."""

from __future__ import annotations

from tests.conftest import NodePool
from tests.e2e.kube import apply, bound, gated, held_through_a_pass, podgroup
from tests.e2e.test_controller import count_bound, members, pooled_job
from tests.e2e.waiting import eventually
from tests.localcluster import LocalCluster
from tests.localcluster.phalanx import Phalanx

RACK = "topology.kubernetes.io/rack"
HOSTNAME = "kubernetes.io/hostname"
REQUIRED = {"phalanx.io/topology-required": RACK}


def test_a_gang_that_requires_one_rack_lands_in_one_or_waits_saying_why(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    # Two racks of two 8-GPU nodes, named for this test only.
    nodes = pool.add(4, gpus=8)
    rack_of = {name: f"{pool.name}-r{1 + k // 2}" for k, name in enumerate(nodes)}
    for name, rack in rack_of.items():
        cluster.kubectl("label", "node", name, f"{RACK}={rack}", "--overwrite")

    # 4 pods × 2 GPUs fit in one node of either rack: they land inside one rack.
    apply(
        cluster,
        gang_namespace,
        pooled_job("first", pool).parallelism(4).gpus(2).annotations(REQUIRED).build(),
    )
    eventually(lambda: count_bound(cluster, gang_namespace, "first") == 4, 60, what="first gang bound")
    racks = {rack_of[p["spec"]["nodeName"]] for p in members(cluster, gang_namespace, "first")}
    assert len(racks) == 1, racks
    assert podgroup(cluster, gang_namespace, "first")["spec"]["topologyRequired"] == RACK

    # A single pod takes 4 GPUs of the other rack: one rack has 8 GPUs free, the other 12. Then
    # 7 pods × 2 GPUs fit the cluster (20 free) and would fit either rack were it empty, but no
    # rack now: the gang waits, and its PodGroup says so.
    [used] = racks
    other = next(rack for rack in rack_of.values() if rack != used)
    first_of_other = next(name for name, rack in rack_of.items() if rack == other)
    filler = pooled_job("filler", pool).parallelism(1).gpus(4)
    filler.node_selector({**pool.selector, HOSTNAME: NodePool.hostname(first_of_other)})
    apply(cluster, gang_namespace, filler.build())
    eventually(lambda: count_bound(cluster, gang_namespace, "filler") == 1, 60, what="filler bound")
    apply(
        cluster,
        gang_namespace,
        pooled_job("second", pool).parallelism(7).gpus(2).annotations(REQUIRED).build(),
    )

    def says_why() -> str | None:
        status = podgroup(cluster, gang_namespace, "second").get("status") or {}
        message = str(status.get("message", ""))
        return message if status.get("reason") == "InsufficientCapacity" else None

    message = eventually(says_why, 60, what="second gang's PodGroup to say why it waits")
    assert message == (
        f"needs 7 pods × 2 nvidia.com/gpu inside one {RACK} domain; no single {RACK} domain has 14 "
        f"free nvidia.com/gpu; the best, {other}, has 12; the cluster as a whole has 20 nvidia.com/gpu "
        "free and would fit it across domains"
    )
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: all(gated(p) and not bound(p) for p in members(cluster, gang_namespace, "second")),
        what="second gang stays gated",
    )
