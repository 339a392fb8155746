"""Tenants sharing the cluster: what one writes on its own PodGroups gives it no power over another."""

from __future__ import annotations

from tests.conftest import NodePool
from tests.e2e.kube import apply, events, gated, podgroup
from tests.e2e.test_controller import count_bound, members, pooled_job
from tests.e2e.test_preemption import prioritised
from tests.e2e.waiting import eventually, stays
from tests.localcluster import LocalCluster
from tests.localcluster.phalanx import Phalanx

GPU = "nvidia.com/gpu"


def metric(text: str, name: str) -> float:
    """An unlabelled sample of the controller's /metrics."""
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not exported")


def test_a_podgroup_priority_evicts_no_other_namespace(
    cluster: LocalCluster,
    phalanx: Phalanx,
    gang_namespace: str,
    other_gang_namespace: str,
    pool: NodePool,
    classes: dict[str, str],
) -> None:
    pool.add(1, gpus=8)
    apply(cluster, other_gang_namespace, pooled_job("victim", 8, pool))
    eventually(lambda: count_bound(cluster, other_gang_namespace, "victim") == 8, 30, what="victim running")

    # The tenant claims the highest priority on its own PodGroup, and the class of the other one.
    claim = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "claim"},
        "spec": {"minMember": 4, "priority": 1_000_000_000, "priorityClassName": classes["high"]},
    }
    apply(cluster, gang_namespace, claim)
    apply(cluster, gang_namespace, pooled_job("claim", 4, pool))
    eventually(lambda: len(members(cluster, gang_namespace, "claim")) == 4, 30, what="4 gated members")
    stays(
        lambda: (
            count_bound(cluster, other_gang_namespace, "victim") == 8
            and all(gated(p) for p in members(cluster, gang_namespace, "claim"))
        ),
        5.0,
        what="the other namespace's gang untouched, the claim waiting",
    )
    assert podgroup(cluster, gang_namespace, "claim")["status"]["reason"] == "InsufficientCapacity"

    # The control: pods that carry the class (which Kubernetes governs) do preempt.
    apply(cluster, gang_namespace, prioritised(pooled_job("governed", 4, pool), classes["high"]))
    eventually(
        lambda: count_bound(cluster, gang_namespace, "governed") == 4, 40, what="governed gang admitted"
    )
    assert count_bound(cluster, other_gang_namespace, "victim") < 8
    # What it cost, on both PodGroups: the victim's names who took its room and what it lost, the
    # preemptor's what it evicted for what it gained.
    cost = f"evicts 8 {GPU} for 4 gained"
    by = f"{gang_namespace}/governed (priority 100000)"
    expected = f"evicted whole (8 pods, 8 {GPU}) to make room for {by}: {cost}"

    def said(namespace: str, name: str, reason: str) -> list[str]:
        return [e["message"] for e in events(cluster, namespace, name) if e["reason"] == reason]

    eventually(
        lambda: expected in said(other_gang_namespace, "victim", "Preempted"), 20, what="victim's cost"
    )
    assert any(m.endswith(f"; {cost}") for m in said(gang_namespace, "governed", "Preempting"))
    text = phalanx.metrics()
    assert metric(text, "phalanx_gang_preemption_gpus_evicted_total") >= 8
    assert metric(text, "phalanx_gang_preemption_gpus_gained_total") >= 4
