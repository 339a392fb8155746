"""Pods of a native PodGroup (1.36+ ``spec.schedulingGroup.podGroupName``): one gang, sized by the
PodGroup's gang policy, whatever order the Workload, the PodGroup and the pods arrive in."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from controller.api import resources as r
from shared import constants as c
from tests.component.controller.harness import NS, Harness, bind, gates_of, node, pod

WORKLOADS = r.WORKLOAD_VERSIONS[0]  # v1beta1


def native_podgroup(name: str = "train", min_count: int | None = 3, **spec: Any) -> dict[str, Any]:
    policy = {"gang": {"minCount": min_count}} if min_count is not None else {"basic": {}}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NS, "uid": f"{name}-uid"},
        "spec": {"schedulingPolicy": policy, **spec},
    }


def workload(timeout: int | None = None) -> dict[str, Any]:
    annotations = {c.SCHEDULE_TIMEOUT_ANNOTATION: str(timeout)} if timeout else {}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "job", "namespace": NS, "uid": "job-uid", "annotations": annotations},
        "spec": {"podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 3}}}]},
    }


def member_pods(n: int, group: str = "train", gpus: int = 1) -> list[dict[str, Any]]:
    """Pods as the webhook leaves them: gated, the canonical label added beside the user's link."""
    pods = []
    for i in range(n):
        body = pod(f"{group}-{i}", group=group, owner=None, min_member=None, gpus=gpus)
        body["spec"]["schedulingGroup"] = {"podGroupName": group}
        pods.append(body)
    return pods


async def settle(h: Harness) -> None:
    for _ in range(3):
        await h.step()


async def test_pods_before_their_podgroup_wait_gated_and_say_for_what(h: Harness) -> None:
    h.kube.seed(r.PODS, *member_pods(3))
    await settle(h)

    assert h.kube.items(r.PODGROUPS) == []  # no gang of 1: they would start one by one
    assert all(gates_of(h.pod(f"train-{i}")) == [c.GATE] for i in range(3))
    waiting = [e for e in h.kube.events() if e["reason"] == "WaitingForPodGroup"]
    assert {e["involvedObject"]["name"] for e in waiting} == {"train-0", "train-1", "train-2"}
    assert "PodGroup team/train (scheduling.k8s.io)" in waiting[0]["message"]
    assert "spec.schedulingGroup.podGroupName" in waiting[0]["message"]

    h.kube.seed(r.NATIVE_PODGROUPS, native_podgroup(min_count=3))
    await settle(h)
    group = h.pg("train")
    assert group is not None and group["spec"]["minMember"] == 3
    assert group["metadata"]["ownerReferences"][0] | {"controller": False} == {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "name": "train",
        "uid": "train-uid",
        "controller": False,
        "blockOwnerDeletion": False,
    }
    assert all(not gates_of(h.pod(f"train-{i}")) for i in range(3))


async def test_a_gang_short_of_members_waits_for_the_min_count(h: Harness) -> None:
    h.kube.seed(r.NATIVE_PODGROUPS, native_podgroup(min_count=4))
    h.kube.seed(r.PODS, *member_pods(3))
    await settle(h)
    assert all(gates_of(h.pod(f"train-{i}")) == [c.GATE] for i in range(3))  # 3 of 4
    h.kube.seed(r.PODS, member_pods(4)[3])
    await settle(h)
    assert all(not gates_of(h.pod(f"train-{i}")) for i in range(4))


async def test_the_basic_policy_admits_pods_one_by_one(h: Harness) -> None:
    h.kube.seed(r.NATIVE_PODGROUPS, native_podgroup(min_count=None))
    h.kube.seed(r.PODS, *member_pods(3, gpus=3))
    await settle(h)
    group = h.pg("train")
    assert group is not None and group["spec"]["minMember"] == 1
    # Room for two (one per 4-GPU node): two start, the third waits for room alone.
    assert sorted(len(gates_of(h.pod(f"train-{i}"))) for i in range(3)) == [0, 0, 1]


ARRIVALS = ("workload", "podgroup", "pods")


@pytest.mark.parametrize("order", list(itertools.permutations(ARRIVALS)), ids="-".join)
async def test_a_podgroup_made_from_a_workload_template_works_in_any_apply_order(
    h: Harness, order: tuple[str, ...]
) -> None:
    made = native_podgroup(min_count=3, workloadRef={"workloadName": "job", "templateName": "workers"})
    apply = {
        "workload": lambda: h.kube.seed(WORKLOADS, workload()),
        "podgroup": lambda: h.kube.seed(r.NATIVE_PODGROUPS, made),
        "pods": lambda: h.kube.seed(r.PODS, *member_pods(3)),
    }
    for step in order:
        apply[step]()
        await settle(h)
    group = h.pg("train")
    assert group is not None and group["spec"]["minMember"] == 3
    assert all(not gates_of(h.pod(f"train-{i}")) for i in range(3))


async def test_the_timeout_written_on_the_workload_reaches_the_gang(h: Harness) -> None:
    h.kube.seed(WORKLOADS, workload(timeout=120))
    made = native_podgroup(min_count=5, workloadRef={"workloadName": "job", "templateName": "workers"})
    h.kube.seed(r.NATIVE_PODGROUPS, made)
    h.kube.seed(r.PODS, *member_pods(3))
    await settle(h)
    group = h.pg("train")
    assert group is not None and group["spec"]["scheduleTimeoutSeconds"] == 120


async def test_children_of_a_composite_podgroup_start_together(h: Harness) -> None:
    """Two children of one CompositePodGroup: the one that fits alone waits for its sibling."""
    for name in ("leader", "workers"):
        h.kube.seed(r.NATIVE_PODGROUPS, native_podgroup(name, min_count=2, parentCompositePodGroupName="job"))
    h.kube.seed(r.PODS, *member_pods(2, "leader"))
    await settle(h)
    leader = h.pg("leader")
    assert leader is not None and leader["spec"]["parentPodGroup"] == "job"
    assert all(gates_of(h.pod(f"leader-{i}")) == [c.GATE] for i in range(2))  # its sibling has no pods yet
    h.kube.seed(r.PODS, *member_pods(2, "workers"))
    await settle(h)
    assert all(not gates_of(h.pod(f"{g}-{i}")) for g in ("leader", "workers") for i in range(2))


def scheduling_condition(h: Harness, name: str = "train") -> dict[str, Any] | None:
    native = h.kube.obj(r.NATIVE_PODGROUPS, NS, name)
    assert native is not None
    conditions = (native.get("status") or {}).get("conditions") or []
    return next((cd for cd in conditions if cd["type"] == "PodGroupInitiallyScheduled"), None)


async def test_the_native_podgroup_says_in_upstreams_words_that_it_is_held_then_placed(h: Harness) -> None:
    """The scheduler never sees a group held at the gate: Phalanx writes its scheduling condition
    (False/Unschedulable, and why), then True/Scheduled once it runs; the others are kept."""
    other = {"type": "DisruptionTarget", "status": "False", "reason": "None", "message": ""}
    h.kube.seed(r.NATIVE_PODGROUPS, {**native_podgroup(min_count=3), "status": {"conditions": [other]}})
    h.kube.seed(r.PODS, *member_pods(3, gpus=3))  # 9 GPUs on two 4-GPU nodes: never together
    await settle(h)
    held = scheduling_condition(h)
    assert held is not None and (held["status"], held["reason"]) == ("False", "Unschedulable")
    assert held["message"].startswith("held whole at Phalanx's gate phalanx.io/gang: ")
    assert "needs 3 pods" in held["message"], held["message"]
    assert other in h.kube.obj(r.NATIVE_PODGROUPS, NS, "train")["status"]["conditions"]

    h.kube.seed(r.NODES, node("node-big", 16))
    await settle(h)
    assert all(not gates_of(h.pod(f"train-{i}")) for i in range(3))
    for i in range(3):
        bind(h.kube, f"train-{i}", "node-big", phase="Running")
    await settle(h)
    placed = scheduling_condition(h)
    assert placed is not None and (placed["status"], placed["reason"]) == ("True", "Scheduled")
    assert placed["message"] == "admitted whole by Phalanx: 3 members placed"


async def test_a_native_podgroup_already_scheduled_is_never_told_otherwise(h: Harness) -> None:
    done = {
        "type": "PodGroupInitiallyScheduled",
        "status": "True",
        "reason": "Scheduled",
        "message": "by the scheduler",
    }
    h.kube.seed(r.NATIVE_PODGROUPS, {**native_podgroup(min_count=3), "status": {"conditions": [done]}})
    h.kube.seed(r.PODS, *member_pods(3, gpus=3))
    await settle(h)
    assert scheduling_condition(h) == done  # terminal upstream: a later wait does not regress it
    assert not [w for w in h.kube.writes_to(r.NATIVE_PODGROUPS)]
