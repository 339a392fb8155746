"""Events off the reconcile path: queued by the pass, posted by their own task."""

from __future__ import annotations

import asyncio

from controller.api import resources as r
from controller.core.model import EventReason, Pod
from controller.pipeline import events as events_module
from controller.pipeline.events import EventRecorder, event_name
from tests.component.controller.fake_kube import FakeKube
from tests.component.controller.harness import FakeClock, Harness, gang, podgroup, until


def member(name: str) -> Pod:
    return Pod(uid=f"uid-{name}", namespace="team", name=name, requests={})


async def test_background_events_are_posted_by_their_own_task_not_by_the_pass() -> None:
    kube = FakeKube()
    recorder = EventRecorder(kube, FakeClock(), "test", background=True)
    await recorder.emit_on_pod(member("a"), EventReason.WAITING_FOR_POD_GROUP, "waiting for PodGroup team/g")
    assert kube.items(r.EVENTS) == []  # the pass went on without waiting for the API server
    poster = asyncio.create_task(recorder.run())
    try:
        await until(lambda: len(kube.items(r.EVENTS)) == 1)
        assert kube.items(r.EVENTS)[0]["involvedObject"]["name"] == "a"
    finally:
        poster.cancel()


async def test_a_full_backlog_drops_the_oldest_event() -> None:
    kube = FakeKube()
    recorder = EventRecorder(kube, FakeClock(), "test", background=True)
    recorder._backlog = asyncio.Queue(2)
    for name in ("a", "b", "c"):
        await recorder.emit_on_pod(member(name), EventReason.WAITING, "waits")
    assert recorder.dropped == 1
    poster = asyncio.create_task(recorder.run())
    try:
        await until(lambda: len(kube.items(r.EVENTS)) == 2)
        assert sorted(e["involvedObject"]["name"] for e in kube.items(r.EVENTS)) == ["b", "c"]
    finally:
        poster.cancel()
    assert events_module.BACKLOG >= 1000


# ---- one Event per (object, reason), counted, across restarts ------------------------------------


def event_writes(kube: FakeKube) -> list[tuple[str, str]]:
    return [(w.verb, w.name) for w in kube.writes_to(r.EVENTS)]


async def test_a_repeat_counts_on_the_same_event() -> None:
    kube, clock = FakeKube(), FakeClock()
    recorder = EventRecorder(kube, clock, "phalanx-controller-7d9f-abcde")
    await recorder.emit_on_pod(member("a"), EventReason.WAITING, "needs 8 GPUs; 4 free")
    clock.advance(30)
    await recorder.emit_on_pod(member("a"), EventReason.WAITING, "needs 8 GPUs; 4 free")  # the same
    await recorder.emit_on_pod(member("a"), EventReason.WAITING, "needs 8 GPUs; 6 free")
    [(_, name)] = {(w.verb, w.name) for w in kube.writes_to(r.EVENTS, "create")}
    assert event_writes(kube) == [("create", name), ("patch", name)]
    [event] = kube.items(r.EVENTS)
    assert event["count"] == 2
    assert event["message"] == "needs 8 GPUs; 6 free"
    assert event["firstTimestamp"] != event["lastTimestamp"]
    assert event["reportingComponent"] == "phalanx.io/controller"
    assert event["reportingInstance"] == "phalanx-controller-7d9f-abcde"
    assert event["source"] == {"component": "phalanx-controller"}
    # Another reason on the same object is another Event.
    await recorder.emit_on_pod(member("a"), EventReason.GATE_BYPASSED, "bound without admission")
    assert len(kube.items(r.EVENTS)) == 2


async def test_a_new_leader_goes_on_counting_its_predecessors_event() -> None:
    kube, clock = FakeKube(), FakeClock()
    first = EventRecorder(kube, clock, "replica-a")
    await first.emit_on_pod(member("a"), EventReason.ROLLED_BACK, "rolled back: only 2 of 4 bound")
    await first.emit_on_pod(member("a"), EventReason.ROLLED_BACK, "rolled back: only 3 of 4 bound")
    # Failover: a replica with no memory of what was said.
    second = EventRecorder(kube, clock, "replica-b")
    await second.emit_on_pod(member("a"), EventReason.ROLLED_BACK, "rolled back: only 3 of 4 bound")
    # Its create is refused (the Event exists); it reads it back: said already, not counted again.
    assert [v for v, _ in event_writes(kube)] == ["create", "patch"]
    await second.emit_on_pod(member("a"), EventReason.ROLLED_BACK, "rolled back: only 1 of 4 bound")
    [event] = kube.items(r.EVENTS)
    assert event["count"] == 3
    assert event["reportingInstance"] == "replica-b"
    assert [v for v, _ in event_writes(kube)] == ["create", "patch", "patch"]


async def test_an_expired_event_starts_anew() -> None:
    kube, clock = FakeKube(), FakeClock()
    recorder = EventRecorder(kube, clock, "replica-a")
    await recorder.emit_on_pod(member("a"), EventReason.WAITING, "one")
    [event] = kube.items(r.EVENTS)
    kube.remove(r.EVENTS, "team", event["metadata"]["name"])  # the API server's event TTL
    await recorder.emit_on_pod(member("a"), EventReason.WAITING, "two")
    [event] = kube.items(r.EVENTS)
    assert (event["count"], event["message"]) == (1, "two")


async def test_event_names_are_stable_and_valid_for_long_object_names() -> None:
    long = "x" * 253
    name = event_name(long, "uid-1", "Waiting")
    assert len(name) <= 253 and name == event_name(long, "uid-1", "Waiting")
    assert name != event_name(long, "uid-2", "Waiting") != event_name(long, "uid-1", "Admitted")


async def test_a_gang_that_can_never_be_admitted_says_invalid_spec_in_its_event_and_status() -> None:
    """One word for one thing: the Event's reason is the condition's reason."""
    h = Harness()
    h.cluster(nodes=2, gpus=4)
    group = podgroup("g", min_member=3)
    group["spec"]["maxMember"] = 2
    h.kube.seed(r.PODGROUPS, group)
    h.kube.seed(r.PODS, *gang(3, "g"))
    await h.step()
    status = h.pg("g")["status"]  # type: ignore[index]
    assert (status["phase"], status["reason"]) == ("Failed", "InvalidSpec")
    [event] = [e for e in h.kube.events() if e["involvedObject"]["kind"] == "PodGroup"]
    assert (event["reason"], event["type"]) == ("InvalidSpec", "Warning")
    assert event["message"] == status["message"]
