"""The native gang API of 1.36 and 1.37: a ``scheduling.k8s.io`` PodGroup and pods that name it in
``spec.schedulingGroup.podGroupName`` are one gang, held whole and released whole by Phalanx."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.native import scheduled_condition_type
from tests import builders
from tests.conftest import NodePool
from tests.e2e.kube import apply, events, gated, group_pods, held_through_a_pass, n_bound, podgroup
from tests.e2e.waiting import eventually
from tests.localcluster import LocalCluster
from tests.localcluster.phalanx import Phalanx
from tests.localcluster.versions import release

pytestmark = pytest.mark.k8s_versions("1.36", "1.37")


def native_podgroup(name: str, min_count: int) -> dict[str, Any]:
    """At the version this release serves (v1alpha2 on 1.36, v1beta1 on 1.37)."""
    return {
        "apiVersion": release().workload_api,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def scheduling_condition(cluster: LocalCluster, namespace: str, name: str) -> dict[str, Any] | None:
    api = release().workload_api
    group, version = api.split("/")
    native = cluster.kubectl_json("get", f"podgroups.{version}.{group}", name, "-n", namespace)
    wanted = scheduled_condition_type(api)
    conditions = (native.get("status") or {}).get("conditions") or []
    return next((dict(cd) for cd in conditions if cd["type"] == wanted), None)


def members(cluster: LocalCluster, namespace: str, group: str, n: int, pool: NodePool) -> None:
    for i in range(n):
        pod = (
            builders.pod(f"{group}-{i}").gpus(1).node_selector(pool.selector).scheduling_group(group).build()
        )
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(pod))


def test_a_native_gang_is_held_whole_one_gpu_short_and_released_whole(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    pool.add(1, gpus=2)  # 2 of the 3 GPUs the gang needs
    apply(cluster, gang_namespace, native_podgroup("train", 3))
    members(cluster, gang_namespace, "train", 3, pool)
    pg = eventually(lambda: podgroup(cluster, gang_namespace, "train"), 30, what="the PodGroup Phalanx keeps")
    assert pg["spec"]["minMember"] == 3
    owner = pg["metadata"]["ownerReferences"][0]
    assert (owner["apiVersion"], owner["kind"], owner["name"]) == (
        release().workload_api,
        "PodGroup",
        "train",
    )
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: (
            n_bound(cluster, gang_namespace, "train") == 0
            and all(gated(p) for p in group_pods(cluster, gang_namespace, "train"))
        ),
        "one GPU short: no member starts",
    )
    # `kubectl get podgroups.scheduling.k8s.io` tells the truth in upstream's words.
    held = eventually(lambda: scheduling_condition(cluster, gang_namespace, "train"), 30, what="a condition")
    assert (held["status"], held["reason"]) == ("False", "Unschedulable"), held
    assert "held whole at Phalanx's gate" in held["message"], held
    pool.add(1, gpus=1)
    eventually(lambda: n_bound(cluster, gang_namespace, "train") == 3, 60, what="3 bound together")
    eventually(
        lambda: (scheduling_condition(cluster, gang_namespace, "train") or {}).get("status") == "True",
        60,
        what="the native PodGroup scheduled",
    )


def test_pods_applied_before_their_podgroup_wait_then_start_together(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    pool.add(1, gpus=4)
    members(cluster, gang_namespace, "early", 2, pool)
    eventually(
        lambda: any(e["reason"] == "WaitingForPodGroup" for e in events(cluster, gang_namespace, "early-0")),
        30,
        what="the pod says it waits for its PodGroup",
    )
    [waiting] = [e for e in events(cluster, gang_namespace, "early-0") if e["reason"] == "WaitingForPodGroup"]
    assert "spec.schedulingGroup.podGroupName" in waiting["message"]
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: (
            n_bound(cluster, gang_namespace, "early") == 0
            and len(group_pods(cluster, gang_namespace, "early")) == 2
        ),
        "no PodGroup yet: both wait",
    )
    apply(cluster, gang_namespace, native_podgroup("early", 2))
    eventually(lambda: n_bound(cluster, gang_namespace, "early") == 2, 60, what="both bound together")
