"""A gang follows its workload when that is scaled, on the real control plane with the real Job and
StatefulSet controllers: a Job shrunk because it did not fit starts at its new size; the pods a
StatefulSet scale-up adds start together, never one by one, while the first ones keep running."""

from __future__ import annotations

import json
from typing import Any

from tests import builders
from tests.conftest import NodePool
from tests.e2e.kube import apply, bound, gated, podgroup, pods
from tests.e2e.waiting import eventually, stays
from tests.localcluster import LocalCluster


def live(cluster: LocalCluster, ns: str, selector: str) -> list[dict[str, Any]]:
    return [p for p in pods(cluster, ns, selector) if not p["metadata"].get("deletionTimestamp")]


def status(cluster: LocalCluster, ns: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = podgroup(cluster, ns, name).get("status", {})
    return found


def test_a_job_shrunk_while_it_waits_starts_at_its_new_size(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    ns, selector = gang_namespace, "job-name=shrink"
    pool.add(1, gpus=3)
    job = builders.job("shrink").parallelism(5).gpus(1).node_selector(pool.selector).build()
    apply(cluster, ns, job)
    eventually(lambda: len(live(cluster, ns, selector)) == 5, 30, what="5 gated pods")
    # 5 GPUs asked of a 3-GPU pool: it can never start at this size, and says so.
    eventually(lambda: status(cluster, ns, "shrink").get("reason") == "Unschedulable", 30, what="why")
    stays(lambda: not any(bound(p) for p in live(cluster, ns, selector)), 2.0, what="nothing bound")

    # The user shrinks it to what fits; the Job controller removes the pods beyond it.
    patch = json.dumps({"spec": {"parallelism": 3}})
    cluster.kubectl("patch", "job", "shrink", "-n", ns, "--type=merge", "-p", patch)
    eventually(lambda: podgroup(cluster, ns, "shrink")["spec"]["minMember"] == 3, 30, what="minMember 3")
    eventually(
        lambda: (found := live(cluster, ns, selector)) and len(found) == 3 and all(bound(p) for p in found),
        60,
        what="the 3 pods of the shrunk Job bound together",
    )


def test_the_pods_a_statefulset_scale_up_adds_start_together(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    ns, selector = gang_namespace, "app=grow"
    pool.add(1, gpus=3)
    sts = builders.statefulset("grow").replicas(2).gpus(1).node_selector(pool.selector).build()
    apply(cluster, ns, sts)
    eventually(
        lambda: (found := live(cluster, ns, selector)) and len(found) == 2 and all(bound(p) for p in found),
        60,
        what="2 replicas bound",
    )
    first = {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in live(cluster, ns, selector)}

    # Scaled to 4: two more pods, room for one. Neither starts alone; the first two run on.
    cluster.kubectl("scale", "statefulset", "grow", "-n", ns, "--replicas=4")
    eventually(lambda: len(live(cluster, ns, selector)) == 4, 30, what="4 pods")
    eventually(lambda: podgroup(cluster, ns, "grow")["spec"]["minMember"] == 4, 30, what="minMember 4")
    new = lambda: [p for p in live(cluster, ns, selector) if p["metadata"]["uid"] not in first]  # noqa: E731
    stays(lambda: not any(bound(p) for p in new()) and all(gated(p) for p in new()), 3.0, what="both wait")
    eventually(
        lambda: (
            "2 more members needed to reach 4 wait to start together"
            in status(cluster, ns, "grow").get("message", "")
        ),
        30,
        what="the PodGroup says why",
    )
    assert status(cluster, ns, "grow")["phase"] == "Running"

    pool.add(1, gpus=1)
    eventually(lambda: all(bound(p) for p in new()) and len(new()) == 2, 60, what="both new pods bound")
    kept = {
        p["metadata"]["uid"]: p["spec"]["nodeName"]
        for p in live(cluster, ns, selector)
        if p["metadata"]["uid"] in first
    }
    assert kept == first, "the first replicas were moved or restarted"
