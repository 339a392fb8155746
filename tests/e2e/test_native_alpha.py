"""1.37's alpha parts of the native gang API, on a cluster that turns them on (``alpha_cluster``):
a PodGroup's required topology (``schedulingConstraints.topology``, gate
TopologyAwareWorkloadScheduling) and the children of a CompositePodGroup (gate CompositePodGroup,
``scheduling.k8s.io/v1alpha3``). Phalanx plans both; the scheduler's own gang plugin runs beside it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests import builders
from tests.conftest import NodePool, _namespace
from tests.e2e.conftest import AlphaGangs
from tests.e2e.kube import apply, bound, gated, group_pods, held_through_a_pass, n_bound, podgroup
from tests.e2e.waiting import eventually
from tests.localcluster import LocalCluster

pytestmark = pytest.mark.k8s_versions("1.37")

RACK = "topology.kubernetes.io/rack"
BETA = "scheduling.k8s.io/v1beta1"
ALPHA = "scheduling.k8s.io/v1alpha3"


def pod_group(name: str, min_count: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": BETA,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, **spec},
    }


def member(cluster: LocalCluster, ns: str, name: str, group: str, gpus: int, pool: NodePool) -> None:
    pod = builders.pod(name).gpus(gpus).node_selector(pool.selector).scheduling_group(group).build()
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(pod))


def test_a_native_podgroups_topology_constraint_keeps_it_in_one_rack_or_it_waits_saying_why(
    alpha: AlphaGangs,
) -> None:
    cluster, phalanx, ns, pool = alpha.cluster, alpha.phalanx, alpha.namespace, alpha.pool
    nodes = pool.add(4, gpus=4)  # two racks of two 4-GPU nodes
    rack_of = {name: f"rack-{1 + k // 2}" for k, name in enumerate(nodes)}
    for name, rack in rack_of.items():
        cluster.kubectl("label", "node", name, f"{RACK}={rack}", "--overwrite")
    plain = next(plain_namespaces := _namespace(cluster, "plain", {}))
    try:
        # 2 GPUs taken on the first node of each rack: each rack has 6 free, the cluster 12, and
        # 4 free only on the second node of each rack.
        for node in (nodes[0], nodes[2]):
            filler = (
                builders.pod(f"filler-{node}")
                .gpus(2)
                .node_selector({**pool.selector, "kubernetes.io/hostname": NodePool.hostname(node)})
            )
            apply(cluster, plain, filler.build())
        eventually(
            lambda: all(bound(p) for p in pods_of(cluster, plain)) and len(pods_of(cluster, plain)) == 2,
            60,
            what="the fillers bound",
        )
        # 2 pods × 4 GPUs: the cluster has room (a 4-GPU node in each rack), no rack has.
        apply(cluster, ns, pod_group("pair", 2, schedulingConstraints={"topology": [{"key": RACK}]}))
        for i in range(2):
            member(cluster, ns, f"pair-{i}", "pair", 4, pool)

        def says_why() -> str | None:
            status = podgroup(cluster, ns, "pair").get("status") or {}
            message = str(status.get("message", ""))
            return message if status.get("reason") == "InsufficientCapacity" else None

        message = eventually(says_why, 60, what="the PodGroup to say why the gang waits")
        assert f"no single {RACK} domain has" in message and "would fit it across domains" in message, message
        assert podgroup(cluster, ns, "pair")["spec"]["topologyRequired"] == RACK
        held_through_a_pass(
            cluster,
            phalanx,
            lambda: all(gated(p) and not bound(p) for p in group_pods(cluster, ns, "pair")),
            "the gang stays gated: no rack has room",
        )
        # Room in rack-2 again: the gang lands there, whole.
        cluster.kubectl("delete", "pod", f"filler-{nodes[2]}", "-n", plain, "--grace-period=0")
        eventually(lambda: n_bound(cluster, ns, "pair") == 2, 60, what="the gang bound in one rack")
        assert {rack_of[p["spec"]["nodeName"]] for p in group_pods(cluster, ns, "pair")} == {"rack-2"}
    finally:
        next(plain_namespaces, None)


def pods_of(cluster: LocalCluster, ns: str) -> list[dict[str, Any]]:
    return list(cluster.kubectl_json("get", "pods", "-n", ns)["items"])


def test_the_children_of_a_composite_podgroup_never_start_alone(alpha: AlphaGangs) -> None:
    cluster, phalanx, ns, pool = alpha.cluster, alpha.phalanx, alpha.namespace, alpha.pool
    pool.add(1, gpus=8)
    workload = {
        "apiVersion": ALPHA,
        "kind": "Workload",
        "metadata": {"name": "job"},
        "spec": {
            "compositePodGroupTemplates": [
                {
                    "name": "job",
                    "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                    "podGroupTemplates": [
                        {"name": "leader", "schedulingPolicy": {"gang": {"minCount": 1}}},
                        {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}},
                    ],
                }
            ]
        },
    }
    composite = {
        "apiVersion": ALPHA,
        "kind": "CompositePodGroup",
        "metadata": {"name": "job"},
        "spec": {
            "workloadRef": {"workloadName": "job", "templateName": "job"},
            "schedulingPolicy": {"gang": {"minGroupCount": 2}},
        },
    }

    def child(name: str, min_count: int) -> dict[str, Any]:
        return pod_group(
            name,
            min_count,
            parentCompositePodGroupName="job",
            workloadRef={"workloadName": "job", "templateName": name},
        )

    for obj in (workload, composite, child("leader", 1), child("workers", 2)):
        apply(cluster, ns, obj)
    member(cluster, ns, "leader-0", "leader", 1, pool)
    member(cluster, ns, "workers-0", "workers", 1, pool)
    # The leader's own gang is complete (1 of 1), the workers' is not (1 of 2): nobody starts.
    eventually(lambda: len(group_pods(cluster, ns, "leader")) == 1, 30, what="the leader linked")
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: n_bound(cluster, ns, "leader") == 0 and n_bound(cluster, ns, "workers") == 0,
        "the leader waits for its sibling gang",
    )
    assert podgroup(cluster, ns, "leader")["spec"].get("parentPodGroup") == "job"
    member(cluster, ns, "workers-1", "workers", 1, pool)
    eventually(
        lambda: n_bound(cluster, ns, "leader") == 1 and n_bound(cluster, ns, "workers") == 2,
        60,
        what="leader and workers bound together",
    )
