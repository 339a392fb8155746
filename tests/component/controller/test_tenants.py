"""What a tenant can claim on a PodGroup gives no power over other namespaces."""

from __future__ import annotations

import pytest

from controller.api import resources as r
from controller.core.config import PlannerConfig
from shared import constants as c
from tests.component.controller.harness import Harness, gang, gates_of, namespace, podgroup

OTHER = "other-team"


def victim_running_and_tenant_waiting(claim: dict[str, object]) -> Harness:
    """Another namespace's 8-GPU gang runs on both nodes; a tenant's gang claims a priority on its
    own PodGroup, while its pods carry none (their PriorityClass is what Kubernetes governs)."""
    h = Harness(planner=PlannerConfig(starvation_age_seconds=None, preemption_min_runtime_seconds=0))
    h.cluster()
    h.kube.seed(r.NAMESPACES, namespace(OTHER))
    h.kube.seed(
        r.PRIORITY_CLASSES,
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "vip"},
            "value": 10**9,
        },
    )
    running = gang(8, "victim", ns=OTHER, gates=(), owner=None)
    for i, p in enumerate(running):
        p["spec"]["nodeName"] = f"node-{i // 4}"
        p["status"] = {"phase": "Running", "startTime": "2023-11-14T20:00:00Z"}
    h.kube.seed(r.PODGROUPS, podgroup("victim", ns=OTHER, min_member=8))
    tenant = podgroup("claim", min_member=4)
    tenant["spec"].update(claim)
    h.kube.seed(r.PODGROUPS, tenant)
    h.kube.seed(r.PODS, *running, *gang(4, "claim"))
    return h


@pytest.mark.parametrize("claim", [{"priority": 10**9}, {"priorityClassName": "vip"}])
async def test_a_podgroup_priority_preempts_no_other_namespace(claim: dict[str, object]) -> None:
    h = victim_running_and_tenant_waiting(claim)

    await h.step()
    await h.step()

    assert h.kube.writes_to(r.PODS, "evict") == []
    assert all(gates_of(h.pod(f"claim-{i}")) == [c.GATE] for i in range(4))
    assert h.pg("claim")["status"]["reason"] == "InsufficientCapacity"  # type: ignore[index]


async def test_pod_priority_from_a_priority_class_still_preempts() -> None:
    """The positive control: the same gang whose pods carry the priority preempts whole."""
    h = victim_running_and_tenant_waiting({})
    for i in range(4):
        h.kube.mutate(r.PODS, "team", f"claim-{i}", lambda p: p["spec"].update(priority=10**9))

    await h.step()

    assert sorted(w.name for w in h.kube.writes_to(r.PODS, "evict")) == [f"victim-{i}" for i in range(8)]
