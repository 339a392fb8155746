"""Bind timeout (rollback), schedule timeout, give-up and preemption, on a fake clock."""

from __future__ import annotations

from controller.api import resources as r
from controller.core.config import PlannerConfig
from controller.core.model import GangKey
from controller.pipeline.executor import REQUEUED_LABEL
from shared import constants as c
from tests import builders
from tests.component.controller.harness import (
    JOB,
    NS,
    Harness,
    bind,
    gang,
    gates_of,
    pod,
    podgroup,
)

TIMEOUT = {c.SCHEDULE_TIMEOUT_ANNOTATION: "30"}
# An owner that recreates deleted pods (Jobs are suspended instead, see the Job tests below).
STS = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "train", "uid": "sts-uid"}


async def admitted_then_partly_bound(h: Harness, owner: dict[str, str] = STS) -> dict[str, str]:
    """5 members (4 owned by a workload, 1 bare) admitted; the scheduler binds only 2 of them."""
    h.kube.seed(r.PODS, *gang(4, min_member=5, owner=owner), pod("g-4", owner=None))
    await h.step()
    assert all(not gates_of(h.pod(f"g-{i}")) for i in range(5))
    bind(h.kube, "g-0", "node-0")
    bind(h.kube, "g-1", "node-0")
    await h.step()
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in h.kube.items(r.PODS)}


async def test_bind_timeout_deletes_owned_members_by_uid_and_spares_bare_pods(h: Harness) -> None:
    uids = await admitted_then_partly_bound(h)
    h.clock.advance(59)
    await h.step()
    assert h.kube.writes_to(r.PODS, "delete") == []  # not due yet

    h.clock.advance(2)
    await h.step()

    deletes = h.kube.writes_to(r.PODS, "delete")
    assert sorted((w.name, w.uid) for w in deletes) == sorted((f"g-{i}", uids[f"g-{i}"]) for i in range(4))
    assert h.pod("g-4") is not None  # bare pods are never deleted
    pg = h.pg()
    assert pg is not None
    assert c.ADMISSION_ANNOTATION not in pg["metadata"]["annotations"]
    [event] = [e for e in h.kube.events() if e["reason"] == "RolledBack"]
    assert event["type"] == "Warning"
    assert "only 2 of 5 admitted members bound within 60s" in event["message"]
    assert "deleted 4 other owned members" in event["message"]
    assert "left as they are: g-4" in event["message"]
    assert h.metrics.rollbacks.labels(reason="bind_timeout")._value.get() == 1


async def test_rollback_never_deletes_a_newer_pod_of_the_same_name(h: Harness) -> None:
    uids = await admitted_then_partly_bound(h)
    # The Job controller replaced g-2 meanwhile; the controller has not seen it yet.
    h.kube.remove(r.PODS, NS, "g-2")
    [fresh] = h.kube.seed(r.PODS, pod("g-2", owner=STS))
    h.clock.advance(61)

    await h.reconcile()

    still = h.pod("g-2")
    assert still is not None
    assert still["metadata"]["uid"] == fresh["metadata"]["uid"] != uids["g-2"]
    assert sorted(w.name for w in h.kube.writes_to(r.PODS, "delete")) == ["g-0", "g-1", "g-3"]


async def test_a_pass_before_the_podgroup_event_arrives_does_not_roll_back_again(h: Harness) -> None:
    await admitted_then_partly_bound(h)
    h.clock.advance(61)
    await h.step()
    assert len(h.kube.writes_to(r.PODS, "delete")) == 4

    # The Job controller recreates its pods, gated; the pod events arrive before the PodGroup's.
    h.kube.seed(r.PODS, *gang(4, min_member=5, owner=STS))
    h.sync(r.PODS)
    mark = h.mark()
    await h.reconcile()
    await h.step()

    assert [w for w in h.writes_since(mark) if w.verb == "delete"] == []
    assert h.event_reasons().count("RolledBack") == 1


def running_job(name: str = "train") -> dict[str, object]:
    """A Job of 4 pods, all running, whose uid is the one ``pod()``'s owner names."""
    running = builders.job(name).namespace(NS).uid(JOB["uid"]).labels({}).parallelism(4).build()
    return {**running, "status": {"active": 4}}


async def test_a_rolled_back_jobs_pods_are_released_by_suspending_it_not_deleted() -> None:
    """Deleting a Job's pods counts them as failed against backoffLimit and arms its backoff;
    suspending it does neither. The Job is resumed once its pods are gone."""
    h = Harness()
    h.cluster()
    h.kube.seed(r.JOBS, running_job())
    await admitted_then_partly_bound(h, owner=JOB)
    h.clock.advance(61)
    await h.step()

    assert h.kube.writes_to(r.PODS, "delete") == []  # none of the Job's pods; the bare one is spared
    job = h.kube.obj(r.JOBS, NS, "train")
    assert job is not None
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"][REQUEUED_LABEL] == "rolled-back"
    [event] = [e for e in h.kube.events() if e["reason"] == "RolledBack"]
    assert "suspended 1 Jobs until their pods are gone" in event["message"]

    await h.step()  # its pods are still there: not resumed yet
    assert h.kube.obj(r.JOBS, NS, "train")["spec"]["suspend"] is True  # type: ignore[index]

    for i in range(4):  # what the Job controller does to a suspended Job's pods
        h.kube.remove(r.PODS, NS, f"g-{i}")
    h.kube.mutate(r.JOBS, NS, "train", lambda j: j.update(status={"active": 0}))
    await h.step()
    job = h.kube.obj(r.JOBS, NS, "train")
    assert job is not None
    assert job["spec"]["suspend"] is False
    assert REQUEUED_LABEL not in job["metadata"]["labels"]


async def test_jobs_suspended_by_an_earlier_version_are_resumed_too() -> None:
    h = Harness()
    h.cluster()
    old = running_job("old")
    old["metadata"]["labels"] = {"phalanx.io/preempted": "true"}  # type: ignore[index]
    old["spec"]["suspend"] = True  # type: ignore[index]
    old["status"] = {"active": 0}
    h.kube.seed(r.JOBS, old)
    await h.step()
    job = h.kube.obj(r.JOBS, NS, "old")
    assert job is not None
    assert job["spec"]["suspend"] is False and "phalanx.io/preempted" not in job["metadata"]["labels"]


async def test_rollback_clears_the_admitted_time_from_the_status(h: Harness) -> None:
    await admitted_then_partly_bound(h)
    pg = h.pg()
    assert pg is not None
    assert "admittedTime" in pg["status"]
    h.clock.advance(61)
    await h.step()
    await h.step()

    pg = h.pg()
    assert pg is not None
    assert pg["status"]["conditions"][0]["status"] == "False"
    assert "admittedTime" not in pg["status"]


def blocked_gang(h: Harness) -> None:
    """5 one-GPU members with a 30 s schedule timeout; another workload holds 4 of the 8 GPUs."""
    h.kube.seed(
        r.PODS,
        pod(
            "other",
            group=None,
            gates=(),
            owner=None,
            min_member=None,
            gpus=4,
            node_name="node-0",
            phase="Running",
        ),
        *gang(5, annotations=TIMEOUT),
    )


async def test_schedule_timeout_fails_the_podgroup_and_warns_once(h: Harness) -> None:
    blocked_gang(h)
    await h.step()
    pg = h.pg()
    assert pg is not None
    assert pg["spec"]["scheduleTimeoutSeconds"] == 30
    assert (pg["status"]["phase"], pg["status"]["reason"]) == ("Pending", "InsufficientCapacity")

    h.clock.advance(31)
    await h.step()
    pg = h.pg()
    assert pg is not None
    assert (pg["status"]["phase"], pg["status"]["reason"]) == ("Failed", "SchedulingTimeout")
    assert pg["status"]["message"].startswith("schedule timeout of 30s passed; needs 5 pods")

    mark = h.mark()
    for _ in range(3):
        h.clock.advance(10)
        await h.step()
    assert h.writes_since(mark) == []
    assert h.event_reasons() == ["Waiting", "TimedOut"]
    assert h.metrics.timeouts.labels(queue="")._value.get() == 1
    assert all(gates_of(h.pod(f"g-{i}")) == [c.GATE] for i in range(5))

    # "report": a timed-out gang still starts when room appears.
    h.kube.remove(r.PODS, NS, "other")
    await h.step()
    assert all(not gates_of(h.pod(f"g-{i}")) for i in range(5))


def releasing_with_a_blocked_job() -> Harness:
    """timeout action "release"; the blocked gang's pods belong to the Job "train"."""
    h = Harness(timeout_action="release")
    h.cluster()
    h.kube.seed(r.JOBS, builders.job(JOB["name"]).namespace(NS).uid(JOB["uid"]).parallelism(5).build())
    blocked_gang(h)
    return h


async def test_schedule_timeout_with_release_suspends_the_job() -> None:
    h = releasing_with_a_blocked_job()
    await h.step()
    h.clock.advance(31)
    await h.step()
    await h.step()

    job = h.kube.obj(r.JOBS, NS, "train")
    assert job is not None
    assert job["spec"]["suspend"] is True
    assert h.event_reasons().count("GaveUp") == 1
    assert h.kube.writes_to(r.PODS, "delete") == []  # the suspended Job removes its own pods


async def test_release_suspends_the_jobs_and_deletes_the_members_other_owners_recreate() -> None:
    h = releasing_with_a_blocked_job()
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "ps", "uid": "sts-uid"}
    h.kube.seed(r.PODS, pod("ps-0", owner=sts, annotations=TIMEOUT), pod("chief", owner=None))
    await h.step()
    h.clock.advance(31)
    await h.step()

    assert h.kube.obj(r.JOBS, NS, "train")["spec"]["suspend"] is True  # type: ignore[index]
    assert [w.name for w in h.kube.writes_to(r.PODS, "delete")] == ["ps-0"]  # never the bare chief
    [gave_up] = [e for e in h.kube.events() if e["reason"] == "GaveUp"]
    assert "suspended Jobs: train; deleted owned pods: 1" in gave_up["message"]


async def test_identical_passes_over_a_waiting_gang_keep_one_timer(h: Harness) -> None:
    blocked_gang(h)
    for _ in range(5):
        await h.step()
    assert h.queue.scheduled == 1


def low_gang_running_high_gang_waiting(schedule_timeout: int | None = None) -> Harness:
    """A running 8-pod gang fills both nodes; a 4-pod gang of higher priority waits at the gate."""
    h = Harness(planner=PlannerConfig(starvation_age_seconds=None, preemption_min_runtime_seconds=0))
    h.cluster()
    low = gang(8, "low", gates=(), owner=None)
    for i, p in enumerate(low):
        p["spec"]["nodeName"] = f"node-{i // 4}"
        p["status"] = {"phase": "Running", "startTime": "2023-11-14T20:00:00Z"}
    high = gang(4, "high")
    for p in high:
        p["spec"]["priority"] = 100
    low_group = podgroup("low", min_member=8)
    if schedule_timeout is not None:
        low_group["spec"]["scheduleTimeoutSeconds"] = schedule_timeout
    h.kube.seed(r.PODGROUPS, low_group)
    h.kube.seed(r.PODS, *low, *high)
    return h


async def test_a_higher_priority_gang_preempts_a_running_one_whole() -> None:
    h = low_gang_running_high_gang_waiting()

    failed = await h.step()

    evicted = sorted(w.name for w in h.kube.writes_to(r.PODS, "evict"))
    assert evicted == [f"low-{i}" for i in range(8)]  # the whole victim gang
    assert not failed
    reasons = h.event_reasons()
    assert "Preempted" in reasons
    assert "Preempting" in reasons
    assert all(gates_of(h.pod(f"high-{i}")) == [c.GATE] for i in range(4))
    # The cost on both sides: 8 GPUs evicted for 4 gained.
    said = {e["reason"]: e["message"] for e in h.kube.events()}
    assert said["Preempted"] == (
        f"evicted whole (8 pods, 8 {c.GPU_RESOURCE}) to make room for {NS}/high (priority 100): "
        f"evicts 8 {c.GPU_RESOURCE} for 4 gained"
    )
    assert said["Preempting"].endswith(f"; evicts 8 {c.GPU_RESOURCE} for 4 gained")
    assert h.metrics.preemption_gpus_evicted._value.get() == 8
    assert h.metrics.preemption_gpus_gained._value.get() == 4


async def test_a_budget_the_snapshot_did_not_know_stops_the_whole_preemption() -> None:
    h = low_gang_running_high_gang_waiting()
    h.kube.pdb_protected.add((NS, "low-7"))  # the dry-run eviction of one member is refused

    failed = await h.step()

    assert h.kube.writes_to(r.PODS, "evict") == []  # never half a gang
    assert failed == {GangKey(NS, "high")}  # retried with backoff
    assert "PreemptionBlocked" in h.event_reasons()
    assert all(gates_of(h.pod(f"high-{i}")) == [c.GATE] for i in range(4))


async def test_a_gang_given_up_stays_timed_out_when_its_pods_are_gone() -> None:
    """The wait's start is kept on the PodGroup, so it survives the members it was measured from."""
    h = Harness(timeout_action="release")
    h.cluster()
    blocked_gang(h)
    h.clock.advance(20)  # the controller starts late: its PodGroup is younger than the members
    await h.step()
    pg = h.pg()
    assert pg is not None
    started = pg["status"]["scheduleStartTime"]
    h.clock.advance(11)
    await h.step()
    assert h.event_reasons().count("GaveUp") == 1

    for i in range(5):  # the suspended Job's controller removes its pods
        h.kube.remove(r.PODS, NS, f"g-{i}")
    await h.step()
    await h.step()

    pg = h.pg()
    assert pg is not None
    assert (pg["status"]["phase"], pg["status"]["reason"]) == ("Failed", "SchedulingTimeout")
    assert pg["status"]["scheduleStartTime"] == started
    assert pg["status"]["members"] == 0


async def test_a_preempted_gang_waits_again_with_its_whole_timeout() -> None:
    """Losing the admission starts a new wait: a victim is not reported timed out at once."""
    h = low_gang_running_high_gang_waiting(schedule_timeout=30)
    await h.step()  # the low gang is Running
    h.clock.advance(3600)

    await h.step()  # the high gang preempts it
    assert len(h.kube.writes_to(r.PODS, "evict")) == 8  # gone; the owner has not recreated them yet
    await h.step()
    await h.step()

    status = h.pg("low")["status"]  # type: ignore[index]
    assert (status["phase"], status["reason"]) == ("Pending", "WaitingForMembers"), status
    preempted_at = status["scheduleStartTime"]
    h.clock.advance(29)
    await h.step()
    assert h.pg("low")["status"]["phase"] == "Pending"  # type: ignore[index]
    h.clock.advance(2)
    await h.step()
    status = h.pg("low")["status"]  # type: ignore[index]
    assert (status["phase"], status["reason"]) == ("Failed", "SchedulingTimeout")
    assert status["scheduleStartTime"] == preempted_at
