"""Tenants sharing the cluster: what one writes on its own PodGroups gives it no power over another."""

from __future__ import annotations

import json
from typing import Any

from shared.constants import ALLOWED_QUEUES_ANNOTATION as ALLOWED
from shared.constants import QUEUE_LABEL as QUEUE
from shared.constants import SKIP
from shared.constants import SKIP_ALLOWED_LABEL as SKIP_ALLOWED
from tests.conftest import NodePool
from tests.e2e.kube import apply, bound, events, gated, podgroup
from tests.e2e.test_controller import count_bound, members, pooled_job, pooled_pod
from tests.e2e.test_preemption import prioritised
from tests.e2e.test_queues import MakeQueue, label_namespace, make_queue, queue_status, status_of
from tests.e2e.test_security import refused, tenant
from tests.e2e.waiting import eventually, stays
from tests.localcluster import LocalCluster
from tests.localcluster.phalanx import Phalanx

__all__ = ["make_queue"]  # a fixture these tests use


def pod_named(cluster: LocalCluster, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = cluster.kubectl_json("get", "pod", name, "-n", namespace)
    return found


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
    apply(cluster, other_gang_namespace, pooled_job("victim", pool).parallelism(8).build())
    eventually(lambda: count_bound(cluster, other_gang_namespace, "victim") == 8, 30, what="victim running")

    # The tenant claims the highest priority on its own PodGroup, and the class of the other one.
    claim = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "claim"},
        "spec": {"minMember": 4, "priority": 1_000_000_000, "priorityClassName": classes["high"]},
    }
    apply(cluster, gang_namespace, claim)
    apply(cluster, gang_namespace, pooled_job("claim", pool).parallelism(4).build())
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
    apply(
        cluster,
        gang_namespace,
        prioritised(pooled_job("governed", pool).parallelism(4).build(), classes["high"]),
    )
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

    # Events are posted in the background, behind the pass's status writes: on a loaded machine
    # that has taken longer than the 20 s this bound once was.
    try:
        eventually(
            lambda: expected in said(other_gang_namespace, "victim", "Preempted"), 60, what="victim's cost"
        )
    except AssertionError as timed_out:  # say what the victim was told instead
        told = said(other_gang_namespace, "victim", "Preempted")
        raise AssertionError(f"{timed_out}; its Preempted Events say {told}") from None
    assert any(m.endswith(f"; {cost}") for m in said(gang_namespace, "governed", "Preempting"))
    text = phalanx.metrics()
    assert metric(text, "phalanx_gang_preemption_gpus_evicted_total") >= 8
    assert metric(text, "phalanx_gang_preemption_gpus_gained_total") >= 4


# ---- queues contain a tenant (docs/user-guide.md "Queues": what a tenant can and cannot do) ------


def as_tenant_apply(cluster: LocalCluster, namespace: str, who: list[str], obj: dict[str, Any]) -> Any:
    return cluster.kubectl(
        "apply", "--server-side", "--field-manager=e2e", "-n", namespace, "-f", "-", *who,
        input=json.dumps(obj), check=False,
    )  # fmt: skip


def test_skipping_phalanx_in_a_namespace_bound_to_a_queue_is_refused_and_a_permitted_skip_is_charged(
    cluster: LocalCluster,
    gang_namespace: str,
    other_gang_namespace: str,
    pool: NodePool,
    make_queue: MakeQueue,
) -> None:
    pool.add(1, gpus=8)
    team = make_queue("team", limit=2)
    label_namespace(cluster, gang_namespace, team)
    who = tenant(cluster, gang_namespace)
    skipping_job = pooled_job("escape", pool).parallelism(2).gpus(2).template_labels({SKIP: "true"}).build()
    skipping_job["metadata"]["labels"] = {SKIP: "true"}
    skipping_pod = pooled_pod("bare", pool).gpus(4).annotations({SKIP: "true"}).build()
    why = (
        f"phalanx.io/skip is not allowed in namespace {gang_namespace}, which is bound to queue {team}: "
        "its workloads are gang-scheduled in that queue"
    )
    for manifest in (skipping_job, skipping_pod):
        result = as_tenant_apply(cluster, gang_namespace, who, manifest)
        assert refused(result, why), result.stderr
    # The tenant cannot give itself the permission: namespaces are the cluster admin's.
    grant = ("label", "namespace", gang_namespace, f"{SKIP_ALLOWED}=true")
    assert refused(cluster.kubectl(*grant, *who, check=False), "forbidden")
    # Where no queue governs, skipping works as documented.
    apply(
        cluster,
        other_gang_namespace,
        pooled_pod("free", pool).annotations({SKIP: "true"}).build(),
    )
    eventually(
        lambda: bound(pod_named(cluster, other_gang_namespace, "free")), 30, what="a skip elsewhere runs"
    )

    # A cluster admin permits skipping there: the skipped Job runs outside Phalanx on 4 GPUs, and
    # its queue counts them, so the namespace's next gang waits on the queue's limit.
    cluster.kubectl(*grant)
    eventually(
        lambda: as_tenant_apply(cluster, gang_namespace, who, skipping_job).returncode == 0,
        20,
        what="skip allowed",
    )
    eventually(lambda: count_bound(cluster, gang_namespace, "escape") == 2, 30, what="the skipped Job runs")
    assert not any(gated(p) for p in members(cluster, gang_namespace, "escape"))
    eventually(
        lambda: queue_status(cluster, team).get("outsidePhalanx", {}).get(GPU) == "4",
        30,
        what="the queue charged with the 4 GPUs run outside Phalanx",
    )
    assert queue_status(cluster, team)["allocated"][GPU] == "4"
    apply(cluster, gang_namespace, pooled_job("gang", pool).parallelism(1).build())
    eventually(
        lambda: status_of(cluster, gang_namespace, "gang")[0] == "QueueLimit", 30, what="the gang waits"
    )
    assert (
        status_of(cluster, gang_namespace, "gang")[1]
        == f"queue {team} is at its limit: 4 of 2 {GPU}; the gang needs 1"
    )
    assert count_bound(cluster, gang_namespace, "gang") == 0


def test_a_queue_the_namespace_was_not_granted_is_refused_at_apply_or_by_the_controller(
    cluster: LocalCluster,
    gang_namespace: str,
    other_gang_namespace: str,
    pool: NodePool,
    make_queue: MakeQueue,
) -> None:
    pool.add(1, gpus=8)
    team_a, team_b = make_queue("team-a"), make_queue("team-b")
    label_namespace(cluster, gang_namespace, team_a)
    who = tenant(cluster, gang_namespace)

    # Bound to team A, a tenant names team B's queue: the apply fails, naming what it may use.
    foreign = pooled_job("foreign", pool).parallelism(2).build()
    foreign["metadata"]["labels"] = {QUEUE: team_b}
    why = f"queue {team_b} is not granted to namespace {gang_namespace}; it may use {team_a}"
    assert refused(as_tenant_apply(cluster, gang_namespace, who, foreign), why)
    claim = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "claim"},
        "spec": {"minMember": 1, "queue": team_b},
    }
    assert refused(as_tenant_apply(cluster, gang_namespace, who, claim), why)

    # In a namespace bound to no queue, team A's queue (granted to another namespace) is not
    # free for the taking: the controller keeps the gang waiting and says why; team A is not charged.
    taker = pooled_job("taker", pool).parallelism(2).build()
    taker["metadata"]["labels"] = {QUEUE: team_a}
    apply(cluster, other_gang_namespace, taker)
    eventually(
        lambda: status_of(cluster, other_gang_namespace, "taker")[0] == "QueueNotAllowed", 30, what="refused"
    )
    message = status_of(cluster, other_gang_namespace, "taker")[1]
    assert message == (
        f"queue {team_a} is not granted to namespace {other_gang_namespace}; "
        "it may use queues granted to no namespace"
    )
    eventually(
        lambda: message in [e["message"] for e in events(cluster, other_gang_namespace, "taker")],
        20,
        what="the Waiting Event says why",
    )
    stays(lambda: count_bound(cluster, other_gang_namespace, "taker") == 0, 6.0, what="never admitted")
    assert queue_status(cluster, team_a).get("requested", {}).get(GPU) is None
    assert queue_status(cluster, team_a).get("waitingGangs") == 0

    # The cluster admin grants team B to the first namespace: the same apply now goes through.
    cluster.kubectl("annotate", "namespace", gang_namespace, f"{ALLOWED}={team_b}")
    eventually(
        lambda: as_tenant_apply(cluster, gang_namespace, who, foreign).returncode == 0, 20, what="granted"
    )
    eventually(lambda: count_bound(cluster, gang_namespace, "foreign") == 2, 30, what="admitted in team B")
    eventually(
        lambda: queue_status(cluster, team_b).get("allocated", {}).get(GPU) == "2", 30, what="charged to B"
    )


def test_a_resource_quota_scoped_to_a_priority_class_keeps_a_namespace_from_using_it(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, classes: dict[str, str]
) -> None:
    # The example of docs/operations.md "Security": this namespace may run no pod of the high class.
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-high-priority"},
        "spec": {
            "hard": {"pods": "0"},
            "scopeSelector": {
                "matchExpressions": [
                    {"scopeName": "PriorityClass", "operator": "In", "values": [classes["high"]]}
                ]
            },
        },
    }
    apply(cluster, gang_namespace, quota)
    who = tenant(cluster, gang_namespace)
    pod = pooled_pod("urgent", pool).pod_spec(priorityClassName=classes["high"]).build()
    eventually(
        lambda: refused(
            as_tenant_apply(cluster, gang_namespace, who, pod), "exceeded quota: no-high-priority"
        ),
        20,
        what="the quota in force",
    )
    # Its ordinary classes stay usable.
    ordinary = pooled_pod("ordinary", pool).pod_spec(priorityClassName=classes["low"]).build()
    assert as_tenant_apply(cluster, gang_namespace, who, ordinary).returncode == 0
