"""Which PodGroup a gang gets, and when: never one smaller than its user declared (issue: pods that
name a group before the group exists), a user's PodGroup wins over Phalanx's, and one deleted
while its gang lives is made again with its admission."""

from __future__ import annotations

from typing import Any

from controller import admission_record
from controller import resources as r
from shared import constants as c
from tests.component.controller.harness import NS, Harness, gang, gates_of, pod, podgroup


def workload(min_count: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "train", "namespace": NS, "uid": "workload-uid"},
        "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": min_count}}}]},
    }


def workload_pods(n: int) -> list[dict[str, Any]]:
    pods = []
    for i in range(n):
        body = pod(f"w-{i}", group=None, owner=None, min_member=None)
        body["spec"]["workloadRef"] = {"name": "train", "podGroup": "workers"}
        pods.append(body)
    return pods


def linked_pods(n: int, label: str, value: str = "g") -> list[dict[str, Any]]:
    """Pods as the webhook leaves them: the user's link kept, the canonical label added."""
    pods = gang(n, min_member=None, owner=None)
    for body in pods:
        body["metadata"]["labels"][label] = value
    return pods


def pod_events(h: Harness, reason: str) -> list[dict[str, Any]]:
    return [e for e in h.kube.events() if e["reason"] == reason and e["involvedObject"]["kind"] == "Pod"]


async def test_pods_naming_a_workload_that_does_not_exist_wait_for_it_whole(h: Harness) -> None:
    h.kube.seed(r.PODS, *workload_pods(3))
    await h.step()
    await h.step()

    assert h.kube.items(r.PODGROUPS) == []  # no PodGroup of 1: it would start them one by one
    assert all(gates_of(h.pod(f"w-{i}")) == [c.GATE] for i in range(3))
    waiting = pod_events(h, "WaitingForWorkload")
    assert {e["involvedObject"]["name"] for e in waiting} == {"w-0", "w-1", "w-2"}
    assert "Workload team/train" in waiting[0]["message"]
    await h.step()
    assert len(pod_events(h, "WaitingForWorkload")) == 3  # said once per pod, not every pass

    h.kube.seed(r.WORKLOADS, workload(4))
    await h.step()
    await h.step()
    group = h.pg("train-workers")
    assert group is not None and group["spec"]["minMember"] == 4
    assert all(gates_of(h.pod(f"w-{i}")) == [c.GATE] for i in range(3))  # 3 of 4: still waiting

    h.kube.seed(r.PODS, workload_pods(4)[3])
    await h.step()
    await h.step()
    assert all(not gates_of(h.pod(f"w-{i}")) for i in range(4))


async def test_pods_linked_to_a_podgroup_that_arrives_later_wait_and_then_use_it(h: Harness) -> None:
    h.kube.seed(r.PODS, *linked_pods(4, c.COSCHEDULING_LABEL))
    await h.step()
    await h.step()

    assert h.kube.items(r.PODGROUPS) == []
    assert all(gates_of(h.pod(f"g-{i}")) == [c.GATE] for i in range(4))
    waiting = pod_events(h, "WaitingForPodGroup")
    assert len(waiting) == 4
    assert c.COSCHEDULING_LABEL in waiting[0]["message"]

    h.kube.seed(r.PODGROUPS, podgroup(min_member=5))
    await h.step()
    await h.step()
    assert all(gates_of(h.pod(f"g-{i}")) == [c.GATE] for i in range(4))  # 4 of the user's 5
    h.kube.seed(r.PODS, linked_pods(5, c.COSCHEDULING_LABEL)[4])
    await h.step()
    await h.step()
    assert all(not gates_of(h.pod(f"g-{i}")) for i in range(5))


async def test_a_size_declared_on_the_pods_needs_no_podgroup(h: Harness) -> None:
    pods = linked_pods(3, c.COSCHEDULING_LABEL)
    for body in pods:
        body["metadata"]["labels"][c.COSCHEDULING_MIN_AVAILABLE_LABEL] = "3"
    h.kube.seed(r.PODS, *pods)
    await h.step()
    await h.step()

    group = h.pg()
    assert group is not None and group["spec"]["minMember"] == 3
    assert all(not gates_of(h.pod(f"g-{i}")) for i in range(3))


async def test_bare_pods_with_only_the_canonical_label_and_no_size_wait(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(2, min_member=None, owner=None))
    await h.step()
    await h.step()

    assert h.kube.items(r.PODGROUPS) == []
    assert all(gates_of(h.pod(f"g-{i}")) == [c.GATE] for i in range(2))
    assert c.MIN_MEMBER_ANNOTATION in pod_events(h, "WaitingForPodGroup")[0]["message"]


async def test_a_podgroup_phalanx_made_follows_its_workload_until_admitted(h: Harness) -> None:
    h.kube.seed(r.WORKLOADS, workload(4))
    h.kube.seed(r.PODS, *workload_pods(3))
    await h.step()
    group = h.pg("train-workers")
    assert group is not None and group["spec"]["minMember"] == 4

    h.kube.mutate(
        r.WORKLOADS, NS, "train", lambda w: w["spec"]["podGroups"][0]["policy"]["gang"].update(minCount=3)
    )
    await h.step()
    await h.step()
    group = h.pg("train-workers")
    assert group is not None and group["spec"]["minMember"] == 3
    assert all(not gates_of(h.pod(f"w-{i}")) for i in range(3))


async def test_a_podgroup_a_user_applied_over_phalanxs_is_not_overwritten(h: Harness) -> None:
    h.kube.seed(r.WORKLOADS, workload(4))
    h.kube.seed(r.PODS, *workload_pods(3))
    await h.step()

    def user_applies(obj: dict[str, Any]) -> None:
        obj["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
        obj["spec"]["minMember"] = 6

    h.kube.mutate(r.PODGROUPS, NS, "train-workers", user_applies)
    await h.step()
    group = h.pg("train-workers")
    assert group is not None and group["spec"]["minMember"] == 6


async def test_a_users_podgroup_of_another_kind_retires_phalanxs_shadow(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(3, min_member=4))  # the workload says 4; 3 exist so far
    await h.step()
    shadow = h.pg()
    assert shadow is not None and shadow["spec"]["minMember"] == 4

    kai = {
        "apiVersion": r.PODGROUPS_KAI.api_version,
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": NS},
        "spec": {"minMember": 3},
    }
    h.kube.seed(r.PODGROUPS_KAI, kai)
    await h.step()
    await h.step()

    assert h.pg() is None  # Phalanx's own was deleted
    users = h.kube.obj(r.PODGROUPS_KAI, NS, "g")
    assert users is not None and users["status"]["phase"] != "Pending"
    assert all(not gates_of(h.pod(f"g-{i}")) for i in range(3))  # admitted at the user's size


async def test_a_retired_shadow_hands_its_admission_to_the_users_podgroup(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(3, min_member=3))
    await h.step()
    await h.step()
    assert all(not gates_of(h.pod(f"g-{i}")) for i in range(3))
    shadow = h.pg()
    assert shadow is not None
    admitted = admission_record.decode(shadow["metadata"]["annotations"])
    assert admitted is not None

    h.kube.seed(r.PODGROUPS_X_K8S, {**podgroup(min_member=3), "apiVersion": r.PODGROUPS_X_K8S.api_version})
    await h.step()
    await h.step()

    assert h.pg() is None
    users = h.kube.obj(r.PODGROUPS_X_K8S, NS, "g")
    assert users is not None
    moved = admission_record.decode(users["metadata"]["annotations"])
    assert moved is not None and moved.placement == admitted.placement
    assert users["status"]["phase"] != "Pending"


async def test_a_podgroup_deleted_mid_lift_is_made_again_with_its_admission(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(4, min_member=4))
    # The lift of the third gate fails: the gang is torn when its PodGroup is deleted.
    h.kube.fail("patch", rt=r.PODS, nth=3, times=2)
    await h.step()
    pg = h.pg()
    assert pg is not None
    admitted = admission_record.decode(pg["metadata"]["annotations"])
    assert admitted is not None and len(admitted.placement) == 4
    still_gated = [i for i in range(4) if gates_of(h.pod(f"g-{i}"))]
    assert still_gated  # the fault landed mid-lift

    h.kube.remove(r.PODGROUPS, NS, "g")
    await h.step()
    await h.step()

    again = h.pg()
    assert again is not None and again["spec"]["minMember"] == 4
    record = admission_record.decode(again["metadata"]["annotations"])
    assert record is not None and record.placement == admitted.placement
    assert all(not gates_of(h.pod(f"g-{i}")) for i in range(4))
    assert all(h.pin(f"g-{i}") == admitted.placement[h.pod(f"g-{i}")["metadata"]["uid"]] for i in range(4))


async def test_a_namespace_being_deleted_gets_no_status_and_no_new_podgroup(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(2, min_member=3))  # waiting for a third member
    await h.step()
    group = h.pg()
    assert group is not None and group["status"]["reason"] == "WaitingForMembers"
    h.kube.mutate(
        r.NAMESPACES, None, NS, lambda ns: ns["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z")
    )
    h.kube.seed(r.PODS, *gang(2, group="other", min_member=2))
    mark = h.mark()
    for i in range(2):  # the namespace controller deletes what is inside
        h.kube.mutate(
            r.PODS, NS, f"g-{i}", lambda p: p["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z")
        )
    await h.step()
    await h.step()

    assert [w for w in h.writes_since(mark) if w.rt in (r.PODGROUPS, r.PODS)] == []
    assert h.pg("other") is None
