"""Events off the reconcile path: queued by the pass, posted by their own task."""

from __future__ import annotations

import asyncio

from controller.api import resources as r
from controller.core.model import Pod
from controller.pipeline import events as events_module
from controller.pipeline.events import EventRecorder
from tests.component.controller.fake_kube import FakeKube
from tests.component.controller.harness import FakeClock, until


def member(name: str) -> Pod:
    return Pod(uid=f"uid-{name}", namespace="team", name=name, requests={})


async def test_background_events_are_posted_by_their_own_task_not_by_the_pass() -> None:
    kube = FakeKube()
    recorder = EventRecorder(kube, FakeClock(), "test", background=True)
    await recorder.emit_on_pod(member("a"), "WaitingForPodGroup", "waiting for PodGroup team/g")
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
        await recorder.emit_on_pod(member(name), "Waiting", "waits")
    assert recorder.dropped == 1
    poster = asyncio.create_task(recorder.run())
    try:
        await until(lambda: len(kube.items(r.EVENTS)) == 2)
        assert sorted(e["involvedObject"]["name"] for e in kube.items(r.EVENTS)) == ["b", "c"]
    finally:
        poster.cancel()
    assert events_module.BACKLOG >= 1000
