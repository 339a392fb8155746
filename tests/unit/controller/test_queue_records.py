"""Queue objects of both kinds parsed into the core's records; which queue a gang belongs to."""

from __future__ import annotations

from controller.api import resources as r
from controller.api.queue_records import QueueRegistry, gang_queue, kai_queue, phalanx_queue
from controller.core.model import Pod, Queue, QueueGrant, QueueResource
from shared import constants as c

GPU = c.GPU_RESOURCE


def test_a_phalanx_queue_reads_quantities_and_an_absent_limit_as_unlimited() -> None:
    raw = {
        "metadata": {"name": "team-a"},
        "spec": {
            "parent": "dept",
            "resources": {
                GPU: {"quota": "4", "limit": "8", "overQuotaWeight": 2},
                "cpu": {"quota": "1500m"},
                "memory": {"quota": "1Gi", "limit": "bad"},
            },
        },
    }
    record = phalanx_queue(raw)
    assert record.queue == Queue(
        "team-a", "dept", {GPU: QueueResource(4, 8, 2.0), "cpu": QueueResource(1500, None, 1.0)}
    )
    assert record.problem is not None and record.problem.startswith("memory:")


def test_a_kai_queue_maps_gpu_units_cpu_millicores_memory_mb_and_minus_one() -> None:
    raw = {
        "metadata": {"name": "training"},
        "spec": {
            "parentQueue": "default",
            "resources": {
                "gpu": {"quota": 8, "limit": -1, "overQuotaWeight": 1},
                "cpu": {"quota": 4000, "limit": 8000, "overQuotaWeight": 3},
                "memory": {"quota": -1, "limit": 2048, "overQuotaWeight": 1},
            },
        },
    }
    assert kai_queue(raw).queue == Queue(
        "training",
        "default",
        {
            GPU: QueueResource(8, None, 1.0),
            "cpu": QueueResource(4000, 8000, 3.0),
            "memory": QueueResource(0, 2048 * 10**6, 1.0),
        },
    )


def test_a_kai_resource_without_quota_and_limit_is_not_declared() -> None:
    raw = {"metadata": {"name": "q"}, "spec": {"resources": {"cpu": {"quota": -1, "limit": -1}}}}
    assert kai_queue(raw).queue.resources == {}


def test_phalanx_queue_wins_over_kai_queue_of_the_same_name() -> None:
    registry = QueueRegistry()
    registry.upsert(r.QUEUES_KAI, {"metadata": {"name": "q"}, "spec": {"parentQueue": "kai"}})
    registry.upsert(r.QUEUES, {"metadata": {"name": "q"}, "spec": {"parent": "phalanx"}})
    assert registry.queues()["q"].parent == "phalanx"
    registry.delete(r.QUEUES, {"metadata": {"name": "q"}})
    assert registry.queues()["q"].parent == "kai"


def test_namespace_labels_name_default_queues() -> None:
    registry = QueueRegistry()
    assert registry.upsert_namespace({"metadata": {"name": "ns", "labels": {c.QUEUE_LABEL: "a"}}})
    assert not registry.upsert_namespace({"metadata": {"name": "ns", "labels": {c.QUEUE_LABEL: "a"}}})
    assert registry.namespace_queue == {"ns": "a"}
    assert registry.upsert_namespace({"metadata": {"name": "ns"}})
    assert registry.namespace_queue == {}


def member(**labels: str) -> Pod:
    return Pod("u", "ns", "p", {}, labels=labels)


def test_namespaces_grant_their_bound_queue_and_the_ones_their_annotation_lists() -> None:
    registry = QueueRegistry()
    bound = {"name": "a", "labels": {c.QUEUE_LABEL: "team-a"}}
    listed = {"name": "lab", "annotations": {c.ALLOWED_QUEUES_ANNOTATION: " shared, gpu-pool ,,"}}
    assert registry.upsert_namespace({"metadata": bound})
    assert registry.upsert_namespace({"metadata": listed})
    assert registry.grants() == {
        "a": QueueGrant("team-a"),
        "lab": QueueGrant(None, ("shared", "gpu-pool")),
    }
    # The annotation alone changing is a change too (the controller re-plans).
    both = {**bound, "annotations": {c.ALLOWED_QUEUES_ANNOTATION: "shared"}}
    assert registry.upsert_namespace({"metadata": both})
    assert registry.grants()["a"] == QueueGrant("team-a", ("shared",))
    assert registry.delete_namespace({"metadata": {"name": "lab"}})
    assert set(registry.grants()) == {"a"}


def test_which_queue_podgroup_then_parent_then_members_then_namespace() -> None:
    members = [member(**{c.KAI_QUEUE_LABEL: "from-pod"})]
    assert gang_queue("spec", {c.QUEUE_LABEL: "label"}, members, "ns", "parent") == "spec"
    assert gang_queue(None, {c.QUEUE_LABEL: "label"}, members, "ns", "parent") == "label"
    assert gang_queue(None, {}, members, "ns", "parent") == "parent"
    assert gang_queue(None, {}, members, "ns") == "from-pod"
    shipped = [member(**{c.KAI_SCHEDULER_QUEUE_LABEL: "kai-team"})]
    assert gang_queue(None, {}, shipped, "ns") == "kai-team"
    kueue = [member(**{c.KUEUE_QUEUE_LABEL: "lq"})]
    assert gang_queue(None, {}, kueue, "ns") == "lq"
    copied = [Pod("u", "ns", "p", {}, annotations={c.QUEUE_LABEL: "from-workload"})]
    assert gang_queue(None, {}, copied, "ns") == "from-workload"
    assert gang_queue(None, {}, [member()], "ns") == "ns"
    assert gang_queue(None, {}, [], None) is None
