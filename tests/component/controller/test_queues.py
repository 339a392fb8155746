"""Queues through the real shell: Queue objects and namespace labels in, PodGroup reasons and
Queue status out."""

from __future__ import annotations

from typing import Any

from controller.api import resources as r
from shared import constants as c
from tests.component.controller.harness import NS, Harness, gang, gates_of, pod, podgroup


def phalanx_queue(
    name: str, quota: int = 0, limit: int | None = None, parent: str | None = None
) -> dict[str, Any]:
    gpu: dict[str, Any] = {"quota": str(quota)}
    if limit is not None:
        gpu["limit"] = str(limit)
    spec: dict[str, Any] = {"resources": {c.GPU_RESOURCE: gpu}}
    if parent:
        spec["parent"] = parent
    return {"apiVersion": r.QUEUES.api_version, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def label_namespace(h: Harness, queue: str) -> None:
    h.kube.mutate(r.NAMESPACES, None, NS, lambda ns: ns["metadata"]["labels"].update({c.QUEUE_LABEL: queue}))


def queue_status(h: Harness, name: str, rt: Any = r.QUEUES) -> dict[str, Any]:
    return dict((h.kube.obj(rt, None, name) or {}).get("status") or {})


async def test_the_namespace_default_queue_limits_a_gang_and_both_say_so() -> None:
    h = Harness()
    h.cluster(nodes=2, gpus=4)
    h.kube.seed(r.QUEUES, phalanx_queue("team-a", quota=2, limit=4))
    label_namespace(h, "team-a")
    h.kube.seed(r.PODGROUPS, podgroup("g", min_member=5))
    h.kube.seed(r.PODS, *gang(5, "g"))

    await h.step()

    assert all(gates_of(h.pod(f"g-{i}")) == [c.GATE] for i in range(5))  # 8 GPUs free, limit 4
    status = h.pg("g")["status"]  # type: ignore[index]
    assert status["reason"] == "QueueLimit"
    assert status["message"] == (
        "queue team-a would exceed its limit: 0 of 4 nvidia.com/gpu in use; the gang needs 5"
    )
    queue = queue_status(h, "team-a")
    assert queue["waitingGangs"] == 1 and queue["admittedGangs"] == 0
    assert queue["requested"][c.GPU_RESOURCE] == "5" and queue["allocated"] == {}
    assert queue["summary"] == "0/4/2"  # used / fair share (capped by the limit) / quota
    waiting = h.metrics.queue_gangs.labels(queue="team-a", state="waiting")._value.get()
    assert waiting == 1


async def test_a_kai_queue_named_by_runai_label_admits_and_reports_usage() -> None:
    h = Harness()
    h.cluster(nodes=1, gpus=4)
    kai = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": "training"},
        "spec": {"resources": {"gpu": {"quota": 2, "limit": -1, "overQuotaWeight": 1}}},
    }
    h.kube.seed(r.QUEUES_KAI, kai)
    pods = gang(3, "g")
    for p in pods:
        p["metadata"]["labels"][c.KAI_QUEUE_LABEL] = "training"
    h.kube.seed(r.PODGROUPS, podgroup("g", min_member=3))
    h.kube.seed(r.PODS, *pods)

    await h.step()
    assert all(gates_of(h.pod(f"g-{i}")) == [] for i in range(3))
    await h.step()
    queue = queue_status(h, "training", r.QUEUES_KAI)
    assert queue["allocated"][c.GPU_RESOURCE] == "3" and queue["admittedGangs"] == 1


async def test_a_gang_naming_a_missing_queue_waits_and_says_so() -> None:
    h = Harness()
    h.cluster()
    h.kube.seed(r.QUEUES, phalanx_queue("team-a"))
    pg = podgroup("g", min_member=2)
    pg["spec"]["queue"] = "team-z"
    h.kube.seed(r.PODGROUPS, pg)
    h.kube.seed(r.PODS, *gang(2, "g"))

    await h.step()

    status = h.pg("g")["status"]  # type: ignore[index]
    assert (status["reason"], status["message"]) == ("QueueNotFound", "queue team-z does not exist")
    assert all(gates_of(h.pod(f"g-{i}")) == [c.GATE] for i in range(2))


async def test_without_any_queue_a_named_queue_is_ignored_as_before() -> None:
    h = Harness()
    h.cluster()
    pg = podgroup("g", min_member=2)
    pg["spec"]["queue"] = "research"  # KAI manifests name queues; no Queue exists here
    h.kube.seed(r.PODGROUPS, pg)
    h.kube.seed(r.PODS, *gang(2, "g"))

    await h.step()

    assert all(gates_of(h.pod(f"g-{i}")) == [] for i in range(2))


def grant(h: Harness, allowed: str) -> None:
    h.kube.mutate(
        r.NAMESPACES,
        None,
        NS,
        lambda ns: (
            ns["metadata"].setdefault("annotations", {}).update({c.ALLOWED_QUEUES_ANNOTATION: allowed})
        ),
    )


async def test_a_gang_naming_a_queue_its_namespace_was_not_granted_waits_and_charges_nobody() -> None:
    h = Harness()
    h.cluster(nodes=2, gpus=4)
    h.kube.seed(r.QUEUES, phalanx_queue("team-a", limit=2), phalanx_queue("team-b"), phalanx_queue("shared"))
    label_namespace(h, "team-a")
    grant(h, "shared")
    pods = gang(2, "g")
    for p in pods:
        p["metadata"]["labels"][c.QUEUE_LABEL] = "team-b"
    h.kube.seed(r.PODGROUPS, podgroup("g", min_member=2))
    h.kube.seed(r.PODS, *pods)

    await h.step()

    assert all(gates_of(h.pod(f"g-{i}")) == [c.GATE] for i in range(2))
    status = h.pg("g")["status"]  # type: ignore[index]
    assert status["reason"] == "QueueNotAllowed"
    assert status["message"] == f"queue team-b is not granted to namespace {NS}; it may use team-a, shared"
    waiting = [e for e in h.kube.events() if e["reason"] == "Waiting"]
    assert [e["message"] for e in waiting] == [status["message"]]
    assert queue_status(h, "team-b").get("requested", {}) == {}
    assert queue_status(h, "team-b")["waitingGangs"] == 0


async def test_pods_outside_phalanx_in_a_bound_namespace_count_against_its_queue() -> None:
    h = Harness()
    h.cluster(nodes=2, gpus=4)
    h.kube.seed(r.QUEUES, phalanx_queue("team-a", limit=2))
    label_namespace(h, "team-a")
    # Two pods that skipped Phalanx run on 2 GPUs; a gang of the namespace then meets the limit.
    skipped = [
        pod(
            f"skip-{i}",
            group=None,
            gates=(),
            owner=None,
            min_member=None,
            node_name="node-0",
            phase="Running",
        )
        for i in range(2)
    ]
    for p in skipped:
        p["metadata"]["labels"][c.SKIP] = "true"
    h.kube.seed(r.PODS, *skipped)
    h.kube.seed(r.PODGROUPS, podgroup("g", min_member=1))
    h.kube.seed(r.PODS, *gang(1, "g"))

    await h.step()

    assert gates_of(h.pod("g-0")) == [c.GATE]
    assert h.pg("g")["status"]["reason"] == "QueueLimit"  # type: ignore[index]
    queue = queue_status(h, "team-a")
    assert queue["allocated"][c.GPU_RESOURCE] == "2"
    assert queue["outsidePhalanx"][c.GPU_RESOURCE] == "2"
    assert queue["summary"].startswith("2/")
