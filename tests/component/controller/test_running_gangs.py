"""A gang that has run for a while: losing members, racing events and stale timestamps.

Each case was a bug found in review: a lost member rolled back a whole healthy gang, a late
PodGroup event gave an admitted member's room away, terminating members rewrote the status on
every pass, and a PodGroup applied long before its workload timed the workload out at once.
"""

from __future__ import annotations

from controller.api import resources as r
from controller.core.config import PlannerConfig
from tests import builders
from tests.component.controller.harness import JOB, NS, Harness, bind, gang, gates_of, pod, podgroup

STS = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "sts-uid"}


async def running_for_an_hour(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(4, min_member=4, owner=STS))
    await h.step()
    for i in range(4):
        bind(h.kube, f"g-{i}", f"node-{i // 2}", phase="Running")
    await h.step()
    assert h.pg()["status"]["phase"] == "Running"  # type: ignore[index]
    h.clock.advance(3600)
    await h.step()


def deleted_pods(h: Harness) -> list[str]:
    return [w.name for w in h.kube.writes_to(r.PODS, "delete")]


async def test_a_running_gang_that_loses_a_member_is_not_rolled_back(h: Harness) -> None:
    await running_for_an_hour(h)

    h.kube.remove(r.PODS, NS, "g-3")  # drained or deleted; not recreated yet
    await h.step()
    await h.step()

    assert deleted_pods(h) == []
    assert "RolledBack" not in h.event_reasons()


def degraded_condition(h: Harness) -> dict[str, str] | None:
    pg = h.pg()
    assert pg is not None
    return next((c for c in pg["status"]["conditions"] if c["type"] == "Degraded"), None)


async def test_a_running_gang_below_min_member_says_degraded_and_is_requeued_whole_after_the_timeout(
    h: Harness,
) -> None:
    await running_for_an_hour(h)
    h.kube.remove(r.PODS, NS, "g-3")  # evicted by something else; its owner cannot place it back
    await h.step()

    pg = h.pg()
    assert pg is not None
    assert (pg["status"]["phase"], pg["status"]["reason"]) == ("Running", "Degraded")
    assert pg["status"]["message"].startswith("3 of 4 members running since ")
    condition = degraded_condition(h)
    assert condition is not None and condition["status"] == "True"
    since = condition["lastTransitionTime"]

    h.clock.advance(299)
    await h.step()
    assert deleted_pods(h) == []
    assert degraded_condition(h)["lastTransitionTime"] == since  # type: ignore[index]

    h.clock.advance(2)
    await h.step()
    assert sorted(deleted_pods(h)) == [f"g-{i}" for i in range(3)]  # the rest, whole
    [event] = [e for e in h.kube.events() if e["reason"] == "RolledBack"]
    assert "ran with 3 of 4 members for 300s" in event["message"]
    assert h.metrics.rollbacks.labels(reason="degraded")._value.get() == 1
    assert h.metrics.rollbacks.labels(reason="bind_timeout")._value.get() == 0


async def test_a_degraded_gang_made_whole_again_is_left_running(h: Harness) -> None:
    await running_for_an_hour(h)
    h.kube.remove(r.PODS, NS, "g-3")
    await h.step()
    assert degraded_condition(h)["status"] == "True"  # type: ignore[index]

    h.kube.seed(r.PODS, pod("g-3", min_member=4, owner=STS))  # its owner recreated it
    await h.step()
    bind(h.kube, "g-3", "node-1", phase="Running")
    h.clock.advance(400)
    await h.step()

    assert deleted_pods(h) == []
    assert degraded_condition(h)["status"] == "False"  # type: ignore[index]
    assert h.pg()["status"]["reason"] == "Admitted"  # type: ignore[index]


async def test_the_degraded_timeout_can_be_turned_off() -> None:
    h = Harness(degraded_timeout=0)
    h.cluster()
    await running_for_an_hour(h)
    h.kube.remove(r.PODS, NS, "g-3")
    await h.step()
    h.clock.advance(3600)
    await h.step()
    assert deleted_pods(h) == []
    assert h.pg()["status"]["reason"] == "Degraded"  # type: ignore[index]


async def test_a_replacement_gets_its_own_bind_timeout(h: Harness) -> None:
    await running_for_an_hour(h)
    h.kube.remove(r.PODS, NS, "g-3")
    h.kube.seed(r.PODS, pod("g-3", min_member=4, owner=STS))  # recreated, gated

    await h.step()
    assert not gates_of(h.pod("g-3"))  # admitted as a replacement
    h.clock.advance(59)
    await h.step()
    assert deleted_pods(h) == []  # the scheduler has 60 s to bind it, counted from its admission

    h.clock.advance(2)
    await h.step()
    assert sorted(deleted_pods(h)) == [f"g-{i}" for i in range(4)]  # below minMember: whole gang
    assert "RolledBack" in h.event_reasons()


async def test_members_stuck_terminating_do_not_rewrite_the_status_every_pass(h: Harness) -> None:
    await running_for_an_hour(h)
    for i in range(4):  # the node is lost: deleted, but no kubelet confirms it
        h.kube.mutate(
            r.PODS,
            NS,
            f"g-{i}",
            lambda o: o["metadata"].__setitem__("deletionTimestamp", "2023-11-14T23:00:00Z"),
        )
    h.clock.advance(30)
    await h.step()
    status = h.pg()["status"]  # type: ignore[index]
    assert status["phase"] == "Pending"  # nothing is being scheduled: not "Scheduling"

    mark = h.mark()
    for _ in range(4):
        h.clock.advance(30)
        await h.step()
    assert [w for w in h.writes_since(mark) if w.rt == r.PODGROUPS] == []


async def test_a_podgroup_applied_long_before_its_job_times_out_from_the_first_member() -> None:
    """No wait before the first member: the controller's own timer passes over an empty PodGroup
    without timing it out, and the real timeout later is reported and acted on."""
    h = Harness(timeout_action="release")
    h.cluster()
    h.kube.seed(r.JOBS, builders.job(JOB["name"]).namespace(NS).uid(JOB["uid"]).parallelism(4).build())
    group = podgroup("g", min_member=4)
    group["spec"]["scheduleTimeoutSeconds"] = 600
    h.kube.seed(r.PODGROUPS, group)
    await h.step()
    h.clock.advance(601)
    await h.step()  # a pass with no member, past created + timeout
    status = h.pg()["status"]  # type: ignore[index]
    assert (status["phase"], status["reason"]) == ("Pending", "WaitingForMembers")
    assert "scheduleStartTime" not in status
    assert "TimedOut" not in h.event_reasons()

    h.clock.advance(3000)
    h.kube.seed(r.PODS, *gang(4, min_member=4, gpus=4))  # 16 GPUs on 8: waits
    await h.step()
    status = h.pg()["status"]  # type: ignore[index]
    assert (status["phase"], status["reason"]) == ("Pending", "Unschedulable")
    h.clock.advance(601)
    await h.step()
    await h.step()
    assert h.pg()["status"]["reason"] == "SchedulingTimeout"  # type: ignore[index]
    assert h.event_reasons().count("TimedOut") == 1
    assert h.kube.obj(r.JOBS, NS, "train")["spec"]["suspend"] is True  # type: ignore[index]


async def test_each_wait_can_time_out_again(h: Harness) -> None:
    """A gang whose members are recreated waits anew, and its new wait is reported when it times out."""
    group = podgroup("g", min_member=4)
    group["spec"]["scheduleTimeoutSeconds"] = 60
    h.kube.seed(r.PODGROUPS, group)
    h.kube.seed(r.PODS, *gang(4, min_member=4, gpus=4))  # never fits on 8 GPUs
    await h.step()
    h.clock.advance(61)
    await h.step()
    assert h.event_reasons().count("TimedOut") == 1

    for i in range(4):  # the owner recreates its pods: a new wait
        h.kube.remove(r.PODS, NS, f"g-{i}")
    h.clock.advance(100)
    h.kube.seed(r.PODS, *gang(4, min_member=4, gpus=4))
    await h.step()
    assert h.pg()["status"]["phase"] == "Pending"  # type: ignore[index]
    h.clock.advance(61)
    await h.step()
    assert h.pg()["status"]["reason"] == "SchedulingTimeout"  # type: ignore[index]
    assert h.event_reasons().count("TimedOut") == 2


async def test_a_late_podgroup_event_does_not_undo_an_admission(h: Harness) -> None:
    """The informer lags behind the controller's own patches: an event carrying an older admission
    record must not make the store forget members admitted since."""
    elastic = podgroup("g", min_member=2)
    elastic["spec"]["maxMember"] = 4
    h.kube.seed(r.PODGROUPS, elastic)
    h.kube.seed(r.PODS, *gang(2, min_member=2, owner=None))
    await h.step()
    bind(h.kube, "g-0", "node-0", phase="Running")
    bind(h.kube, "g-1", "node-0", phase="Running")
    await h.step()
    h.sync()
    h.kube.mutate(r.PODGROUPS, NS, "g", lambda o: o["status"].__setitem__("running", 2))
    stale = h.kube.events_since(r.PODGROUPS, h._cursor[r.PODGROUPS])[0][1]["object"]  # admits g-0, g-1

    h.kube.seed(r.PODS, pod("g-2", min_member=2, owner=None), pod("g-3", min_member=2, owner=None))
    h.sync(r.PODS)
    await h.reconcile()
    assert not gates_of(h.pod("g-2")) and not gates_of(h.pod("g-3"))  # the gang grew to 4
    h.sinks[str(r.PODGROUPS)].upsert(stale)  # only the older event arrives
    h.sync(r.PODS)

    h.kube.seed(r.PODS, *gang(5, "other", min_member=5, owner=None))  # 5 GPUs; 4 are free
    h.sync(r.PODS)
    await h.reconcile()
    await h.reconcile()
    assert all(gates_of(h.kube.obj(r.PODS, NS, f"other-{i}")) for i in range(5))


async def test_a_gang_that_ran_before_its_namespace_opted_in_is_not_timed_out_when_it_loses_a_member() -> (
    None
):
    """No admission record, all members bound long ago: a gated replacement waits from its own
    creation, and the running members are never given up on."""
    h = Harness(timeout_action="release")
    h.cluster()
    group = podgroup("g", min_member=4)
    group["spec"]["scheduleTimeoutSeconds"] = 600
    h.kube.seed(r.PODGROUPS, group)
    running = [pod(f"g-{i}", min_member=4, owner=STS, gates=(), node_name=f"node-{i // 2}") for i in range(4)]
    for p in running:
        p["status"] = {"phase": "Running"}
    blockers = [
        pod(f"other-{n}", group=None, owner=None, gates=(), gpus=gpus, node_name=f"node-{n}", phase="Running")
        for n, gpus in ((0, 2), (1, 3))
    ]
    h.kube.seed(r.PODS, *running[:3], *blockers)  # g-3 was drained; its room was taken
    h.clock.advance(3600)
    h.kube.seed(r.PODS, pod("g-3", min_member=4, owner=STS))  # the replacement, gated
    await h.step()
    h.clock.advance(300)
    await h.step()

    status = h.pg()["status"]  # type: ignore[index]
    assert status["reason"] != "SchedulingTimeout", status
    assert "TimedOut" not in h.event_reasons() and "GaveUp" not in h.event_reasons()
    h.kube.remove(r.PODS, NS, "other-1")  # room returns: the replacement joins
    await h.step()
    assert not gates_of(h.pod("g-3"))


async def test_an_empty_podgroup_does_not_time_out_under_a_default_timeout() -> None:
    h = Harness(planner=PlannerConfig(default_schedule_timeout=600, starvation_age_seconds=None))
    h.cluster()
    h.kube.seed(r.PODGROUPS, podgroup("g", min_member=4))
    await h.step()
    h.clock.advance(3600)
    await h.step()
    assert h.pg()["status"]["reason"] == "WaitingForMembers"  # type: ignore[index]
    assert "TimedOut" not in h.event_reasons()
