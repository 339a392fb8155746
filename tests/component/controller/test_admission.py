"""Reconciler + executor end to end, in-process, against the FakeKube (the component tier,
docs/development.md "Tests")."""

from __future__ import annotations

import pytest

from controller.api import admission_record
from controller.api import resources as r
from controller.api.kube import ApiError
from controller.pipeline import executor
from shared import constants as c
from tests.component.controller.harness import (
    JOB,
    KEY,
    NS,
    Harness,
    admission_annotation,
    gang,
    gates_of,
    pod,
    podgroup,
)

FOREIGN = "example.com/other"


async def test_podgroup_is_created_with_inferred_min_member_and_owner(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(5))
    h.sync()

    await h.reconcile(KEY)

    created = h.kube.writes_to(r.PODGROUPS, "create")
    assert len(created) == 1
    pg = h.pg()
    assert pg is not None
    assert pg["spec"]["minMember"] == 5
    assert pg["metadata"]["ownerReferences"] == [{**JOB, "controller": False, "blockOwnerDeletion": False}]
    assert pg["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "phalanx"


async def test_admission_lifts_every_gate_with_a_pin_after_recording_it(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(5))
    h.sync()

    assert await h.reconcile() == set()

    assert all(not gates_of(h.pod(f"g-{i}")) for i in range(5))
    pins = {h.pin(f"g-{i}") for i in range(5)}
    assert pins == {"node-0", "node-1"}
    # The admission, with the very same placement, was written on the PodGroup before any gate lift.
    pg = h.pg()
    assert pg is not None
    record = admission_record.decode(pg["metadata"]["annotations"])
    assert record is not None
    assert record.placement == {
        p["metadata"]["uid"]: h.pin(p["metadata"]["name"]) for p in h.kube.items(r.PODS)
    }
    patches = [w for w in h.kube.writes if w.verb == "patch"]
    assert patches[0].rt == r.PODGROUPS
    assert c.ADMISSION_ANNOTATION in patches[0].body["metadata"]["annotations"]
    assert {w.rt for w in patches[1:6]} == {r.PODS}
    assert h.event_reasons().count("Admitted") == 1


async def test_two_gangs_that_each_fit_alone_admit_exactly_one(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(5, "a"), *gang(5, "b"))
    for _ in range(3):
        await h.step()

    admitted = {g: all(not gates_of(h.pod(f"{g}-{i}")) for i in range(5)) for g in ("a", "b")}
    assert sorted(admitted.values()) == [False, True]
    waiting = "b" if admitted["a"] else "a"
    assert all(gates_of(h.pod(f"{waiting}-{i}")) == [c.GATE] for i in range(5))
    pg = h.pg(waiting)
    assert pg is not None
    assert pg["status"]["phase"] == "Pending"
    assert pg["status"]["reason"] == "InsufficientCapacity"
    assert "needs 5 pods" in pg["status"]["message"]


async def test_two_free_placement_gangs_admit_exactly_one(h: Harness) -> None:
    """Unpinned admitted members keep the room the plan booked for them until they bind."""
    free = {c.PLACEMENT_ANNOTATION: c.PLACEMENT_FREE}
    h.kube.seed(r.PODS, *gang(5, "a", annotations=free), *gang(5, "b", annotations=free))
    await h.step()
    assert sum(1 for g in "ab" for n in range(5) if not gates_of(h.pod(f"{g}-{n}"))) == 5
    for _ in range(2):
        await h.step()  # the first gang's members are released but not bound yet

    lifted = [n for g in "ab" for n in range(5) if not gates_of(h.pod(f"{g}-{n}"))]
    assert len(lifted) == 5  # 10 GPUs' worth of pods released onto 8 GPUs would deadlock both gangs


async def test_growing_before_the_informer_caught_up_keeps_the_earlier_admission(h: Harness) -> None:
    h.kube.seed(r.PODGROUPS, podgroup(min_member=3))
    h.kube.seed(r.PODS, *gang(3))
    await h.step()
    first = {p["metadata"]["uid"] for p in h.kube.items(r.PODS)}
    [late] = h.kube.seed(r.PODS, pod("g-3", min_member=3))  # e.g. elastic growth
    h.sync(r.PODS)  # the pods' events arrive, the PodGroup's not yet

    await h.reconcile()
    h.sync()

    assert not gates_of(h.pod("g-3"))
    pg = h.pg()
    assert pg is not None
    record = admission_record.decode(pg["metadata"]["annotations"])
    assert record is not None
    assert set(record.placement) == first | {late["metadata"]["uid"]}
    assumed = h.store.assumed_admission(KEY)
    assert assumed is None or set(assumed.placement) >= first


async def test_status_is_written_once_and_not_rewritten_by_identical_passes(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(9))  # 9 GPUs never fit on 8
    await h.step()
    pg = h.pg()
    assert pg is not None
    st = pg["status"]
    assert st["phase"] == "Pending"
    assert st["reason"] == "Unschedulable"
    assert (st["members"], st["gated"], st["scheduled"], st["running"]) == (9, 9, 0, 0)
    # Beside Admitted: CapacityRequested=False, the autoscaler cannot see this gang (requests off).
    assert [x["type"] for x in st["conditions"]] == ["Admitted", "CapacityRequested"]
    condition = st["conditions"][0]
    assert condition["status"] == "False"
    assert condition["reason"] == "Unschedulable"
    assert condition["observedGeneration"] == 1
    status_writes = h.kube.writes_to(r.PODGROUPS, "patch")
    assert [w.subresource for w in status_writes] == ["status"]

    mark = h.mark()
    h.clock.advance(30)
    for _ in range(3):
        await h.step()
    assert h.writes_since(mark) == []  # no status rewrite, no second Waiting event


async def test_a_converged_admitted_gang_causes_no_writes(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(5))
    await h.step()
    await h.step()
    pg = h.pg()
    assert pg is not None
    assert pg["status"]["phase"] == "Scheduling"
    assert pg["status"]["conditions"][0]["status"] == "True"

    mark = h.mark()
    for _ in range(3):
        await h.step()
    assert h.writes_since(mark) == []


async def test_the_admitting_pass_writes_an_admitted_status(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(5))
    await h.step()
    pg = h.pg()
    assert pg is not None
    assert pg["status"]["phase"] == "Scheduling"
    assert pg["status"]["conditions"][0]["status"] == "True"


async def test_events_are_emitted_once_per_reason(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(5, "a"), *gang(5, "b"))
    for _ in range(4):
        h.clock.advance(5)
        await h.step()

    events = h.kube.events()
    assert sorted(e["reason"] for e in events) == ["Admitted", "Waiting"]
    by_reason = {e["reason"]: e for e in events}
    assert by_reason["Admitted"]["type"] == "Normal"
    assert by_reason["Waiting"]["message"].startswith("needs 5 pods")
    assert by_reason["Admitted"]["involvedObject"]["kind"] == "PodGroup"
    assert by_reason["Admitted"]["involvedObject"]["uid"]


async def test_a_foreign_gate_is_never_removed(h: Harness) -> None:
    members = gang(2)
    members[0]["spec"]["schedulingGates"].append({"name": FOREIGN})
    h.kube.seed(r.PODS, *members)
    await h.step()
    await h.step()

    assert h.kube.writes_to(r.PODS) == []
    pg = h.pg()
    assert pg is not None
    assert pg["status"]["reason"] == "ForeignGates"
    assert FOREIGN in pg["status"]["message"]

    # The other system lifts its gate: now Phalanx admits, and removes only its own gate.
    def drop_foreign(obj: dict) -> None:
        obj["spec"]["schedulingGates"] = [{"name": c.GATE}]

    h.kube.mutate(r.PODS, NS, "g-0", drop_foreign)
    await h.step()
    assert [gates_of(h.pod(f"g-{i}")) for i in range(2)] == [[], []]


async def test_lifting_keeps_other_systems_gates(h: Harness) -> None:
    """Crash recovery of a gang whose member also carries a foreign gate: only ours goes."""
    h.kube.seed(r.PODS, pod("g-0", min_member=1, gates=(c.GATE, FOREIGN)))
    uid = h.kube.items(r.PODS)[0]["metadata"]["uid"]
    h.kube.seed(
        r.PODGROUPS, podgroup(min_member=1, annotations=admission_annotation(h.clock(), {uid: "node-0"}))
    )
    await h.step()

    assert gates_of(h.pod("g-0")) == [FOREIGN]


async def test_a_pass_before_the_informer_shows_the_lift_does_not_lift_again(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(5))
    h.sync()
    await h.reconcile()
    assert len(h.kube.writes_to(r.PODS, "patch")) == 5

    mark = h.mark()
    h.sync(r.PODGROUPS)  # the admission record is seen; the pods' lifts are not yet
    await h.reconcile()
    h.sync()
    await h.reconcile()

    assert [w for w in h.writes_since(mark) if w.rt == r.PODS] == []
    assert not h.store._lifted  # every lift confirmed by the informer


async def test_restart_finishes_a_half_lifted_admission(h: Harness) -> None:
    """A PodGroup records an admission but only 2 of 5 gates were lifted before a crash."""
    members = gang(5)
    for m in members[:2]:
        m["spec"].pop("schedulingGates")
        m["spec"]["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-0"]}]}
                    ]
                }
            }
        }
    seeded = h.kube.seed(r.PODS, *members)
    placement = {p["metadata"]["uid"]: ("node-0" if i < 4 else "node-1") for i, p in enumerate(seeded)}
    h.kube.seed(r.PODGROUPS, podgroup(annotations=admission_annotation(h.clock() - 5, placement)))

    await h.step()

    patched = [w.name for w in h.kube.writes_to(r.PODS, "patch")]
    assert sorted(patched) == ["g-2", "g-3", "g-4"]
    assert [h.pin(f"g-{i}") for i in range(5)] == ["node-0"] * 4 + ["node-1"]
    assert all(not gates_of(h.pod(f"g-{i}")) for i in range(5))
    # The record is already there: it is not rewritten.
    assert [w for w in h.kube.writes_to(r.PODGROUPS, "patch") if w.subresource is None] == []


async def test_a_gang_outside_opted_in_namespaces_without_gated_members_is_ignored() -> None:
    h = Harness()
    h.cluster(opted_in=False)
    h.kube.seed(r.PODS, *gang(2, gates=()))
    h.kube.seed(r.PODGROUPS, podgroup(min_member=2))  # e.g. made for another scheduler
    await h.step()
    await h.step()

    assert h.kube.writes == []


async def test_a_gang_opted_in_by_its_pods_label_is_served_once_its_gates_are_lifted() -> None:
    """A workload opted in by its own label, in a namespace that is not: its admitted members carry
    no gate, but the label (copied onto them by the webhook) keeps the gang Phalanx's."""
    h = Harness()
    h.cluster(opted_in=False)
    members = gang(2, gates=())
    for member in members:
        member["metadata"].setdefault("labels", {})[c.OPT_IN_LABEL] = c.OPT_IN_VALUE
    h.kube.seed(r.PODS, *members)
    h.kube.seed(r.PODGROUPS, podgroup(min_member=2))
    await h.step()
    await h.step()

    # Its PodGroup's status is kept (where the same gang without the label is ignored, above).
    assert [(w.rt, w.verb, w.subresource, w.name) for w in h.kube.writes] == [
        (r.PODGROUPS, "patch", "status", "g")
    ]


async def test_a_gated_gang_outside_opted_in_namespaces_is_still_served() -> None:
    """The namespace opted out after the webhook gated the pods: they must not be stranded."""
    h = Harness()
    h.cluster(opted_in=False)
    h.kube.seed(r.PODS, *gang(2))
    await h.step()

    assert [gates_of(h.pod(f"g-{i}")) for i in range(2)] == [[], []]


async def test_a_failed_gate_lift_is_retried_by_the_next_pass(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(5))
    h.kube.fail("patch", rt=r.PODS, nth=2)  # the 2nd pod patch fails once

    failed = await h.step()
    assert failed == {KEY}
    assert sum(1 for i in range(5) if gates_of(h.pod(f"g-{i}"))) == 1

    assert await h.step() == set()
    assert all(not gates_of(h.pod(f"g-{i}")) for i in range(5))
    assert len(h.kube.writes_to(r.PODS, "patch")) == 5  # each gate lifted exactly once


async def test_a_gang_admitted_after_a_failed_lift_still_gets_its_admitted_event(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(5))
    h.kube.fail("patch", rt=r.PODS, nth=2)
    await h.step()
    await h.step()

    assert h.event_reasons().count("Admitted") == 1


async def test_a_failed_admission_record_lifts_no_gate_and_frees_the_room(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(5))
    h.kube.fail("patch", rt=r.PODGROUPS, nth=1)  # the admission annotation write fails

    assert await h.step() == {KEY}
    assert h.kube.writes_to(r.PODS) == []
    assert h.store.assumed_admission(KEY) is None

    await h.step()
    assert all(not gates_of(h.pod(f"g-{i}")) for i in range(5))


async def test_podgroup_create_conflict_is_not_an_error(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(5))
    h.sync()
    h.kube.fail("create", ApiError(409, "AlreadyExists", "exists"), rt=r.PODGROUPS)
    assert await h.reconcile(KEY) == set()
    assert h.pg() is None  # someone else's create is on its way through the informer


async def test_a_member_whose_requests_cannot_be_read_is_reported_on_its_podgroup(h: Harness) -> None:
    members = gang(2, min_member=2)
    members[0]["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    h.kube.seed(r.PODGROUPS, podgroup("g", min_member=2))
    h.kube.seed(r.PODS, *members)
    await h.step()
    assert "InvalidMember" in h.event_reasons()
    assert gates_of(h.pod("g-0")) == [c.GATE] and gates_of(h.pod("g-1")) == [c.GATE]  # nothing admitted


def workload_pod(name: str, replica: str) -> dict[str, object]:
    body = pod(name, group=None, owner=None, min_member=None)
    body["spec"]["workloadRef"] = {"name": "train", "podGroup": "workers", "podGroupReplicaKey": replica}
    return body


async def test_each_replica_of_a_workload_pod_group_is_a_gang_of_its_own(h: Harness) -> None:
    h.kube.seed(
        r.WORKLOADS,
        {
            "apiVersion": "scheduling.k8s.io/v1alpha1",
            "kind": "Workload",
            "metadata": {"name": "train", "namespace": NS},
            "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]},
        },
    )
    h.kube.seed(r.PODS, workload_pod("a-0", "a"), workload_pod("a-1", "a"), workload_pod("b-0", "b"))
    await h.step()
    await h.step()

    for name, admitted in (("train-workers-a", True), ("train-workers-b", False)):
        group = h.pg(name)
        assert group is not None
        assert group["spec"]["minMember"] == 2  # the podGroup's minCount, per replica
        assert group["metadata"]["ownerReferences"][0]["kind"] == "Workload"
        assert (group["status"]["phase"] != "Pending") is admitted
    assert not gates_of(h.pod("a-0")) and not gates_of(h.pod("a-1"))
    assert gates_of(h.pod("b-0")) == [c.GATE]  # replica b has 1 of its 2 members


async def test_the_gang_size_is_the_largest_its_members_carry(h: Harness) -> None:
    """mpi-operator's launcher Job may infer 1 for itself; the workers carry the MPIJob's 17.
    Compared as numbers, not strings ("1" < "17" < "9")."""
    launcher = {"apiVersion": "batch/v1", "kind": "Job", "name": "pi-launcher", "uid": "launcher-uid"}
    h.kube.seed(
        r.PODS,
        pod("pi-launcher", owner=launcher, min_member=1),
        pod("pi-worker-0", owner=JOB, min_member=17),
        pod("pi-worker-1", owner=JOB, min_member=9),
    )
    await h.step()
    group = h.pg()
    assert group is not None
    assert group["spec"]["minMember"] == 17


async def test_a_gang_whose_admission_record_cannot_fit_says_so_and_lifts_nothing(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kubernetes holds 256 KiB of annotations per object: a gang too large for its record is not
    admitted without one (a restart could leave it torn), and its PodGroup says why."""
    monkeypatch.setattr(executor, "RECORD_LIMIT", 50)  # five members' record takes more
    h.kube.seed(r.PODS, *gang(5))
    await h.step()  # the pass that finds it out says so
    assert h.pg()["status"]["reason"] == "InvalidSpec"  # type: ignore[index]
    await h.step()  # and the next one does not try again

    status = h.pg()["status"]  # type: ignore[index]
    assert status["reason"] == "InvalidSpec"
    assert status["message"].startswith("5 members are more than Phalanx can admit as one gang")
    assert h.kube.writes_to(r.PODS) == []
    assert c.ADMISSION_ANNOTATION not in (h.pg() or {})["metadata"].get("annotations", {})
    assert h.store.assumed_admission(KEY) is None

    # A gang that changes size is tried again: here it lost a member and now waits for it.
    monkeypatch.setattr(executor, "RECORD_LIMIT", admission_record.RECORD_LIMIT)
    h.kube.remove(r.PODS, NS, "g-4")
    await h.step()
    assert h.pg()["status"]["reason"] == "WaitingForMembers"  # type: ignore[index]
