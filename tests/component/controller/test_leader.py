"""LeaderElector on a coordination.k8s.io Lease in the FakeKube, with a fake clock."""

from __future__ import annotations

import asyncio
import types
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controller import leader
from controller.kube import ApiError
from controller.leader import LeaderElector
from controller.resources import LEASES
from tests.component.controller.fake_kube import FakeKube
from tests.component.controller.harness import FakeClock

NS, NAME = "phalanx-system", "phalanx-controller"


def lease(holder: str, renewed: float, duration: int = 15) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "renewTime": leader._micro(renewed),
            "acquireTime": leader._micro(renewed),
            "leaseTransitions": 3,
        },
    }


def spec(kube: FakeKube) -> dict[str, Any]:
    found = kube.obj(LEASES, NS, NAME)
    assert found is not None
    return dict(found["spec"])


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def kube(clock: FakeClock) -> FakeKube:
    return FakeKube(clock)


def elector(kube: Any, clock: FakeClock, identity: str = "me", renew: float = 0.01) -> LeaderElector:
    return LeaderElector(kube, NS, NAME, identity, clock, duration=15.0, renew=renew)


@pytest.fixture
async def running(kube: FakeKube, clock: FakeClock) -> AsyncIterator[LeaderElector]:
    me = elector(kube, clock)
    task = asyncio.create_task(me.run())
    yield me
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_acquires_a_free_lease(kube: FakeKube, running: LeaderElector) -> None:
    await asyncio.wait_for(running.is_leader.wait(), 2)
    held = spec(kube)
    assert held["holderIdentity"] == "me"
    assert held["leaseDurationSeconds"] == 15
    assert held["leaseTransitions"] == 0


async def test_keeps_renewing_its_own_lease(kube: FakeKube, clock: FakeClock, running: LeaderElector) -> None:
    await asyncio.wait_for(running.is_leader.wait(), 2)
    clock.advance(10)
    await asyncio.sleep(0.05)
    assert leader._parse(spec(kube)["renewTime"]) == clock()
    assert spec(kube)["leaseTransitions"] == 0
    assert len(kube.writes_to(LEASES, "replace")) >= 1


async def test_does_not_take_a_lease_another_holder_renewed(kube: FakeKube, clock: FakeClock) -> None:
    kube.seed(LEASES, lease("other", clock() - 5))
    assert await elector(kube, clock)._try() is False
    assert spec(kube)["holderIdentity"] == "other"
    assert kube.writes == []


async def test_takes_over_once_the_other_holders_lease_expires(kube: FakeKube, clock: FakeClock) -> None:
    kube.seed(LEASES, lease("other", clock() - 5))
    me = elector(kube, clock)
    task = asyncio.create_task(me.run())
    try:
        await asyncio.sleep(0.05)
        assert not me.is_leader.is_set()
        clock.advance(10.5)  # renewed 15.5 s ago with a 15 s duration
        await asyncio.wait_for(me.is_leader.wait(), 2)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    held = spec(kube)
    assert held["holderIdentity"] == "me"
    assert held["leaseTransitions"] == 4
    assert leader._parse(held["acquireTime"]) == clock()


async def test_loses_a_race_for_the_lease_on_conflict(kube: FakeKube, clock: FakeClock) -> None:
    kube.seed(LEASES, lease("other", clock() - 60))
    kube.fail("replace", ApiError(409, "Conflict", "modified"), rt=LEASES)
    assert await elector(kube, clock)._try() is False
    kube.fail("create", ApiError(409, "AlreadyExists", "exists"), rt=LEASES)
    kube.remove(LEASES, NS, NAME)
    assert await elector(kube, clock)._try() is False


class Partitioned:
    """A Kube whose lease calls fail once ``cut`` (this replica lost the API server)."""

    def __init__(self, kube: FakeKube) -> None:
        self.kube = kube
        self.cut = False

    def __getattr__(self, name: str) -> Any:
        if self.cut and name in ("get", "create", "replace"):

            async def fail(*_: Any, **__: Any) -> Any:
                raise OSError("connection refused")

            return fail
        return getattr(self.kube, name)


async def test_steps_down_when_it_cannot_renew_within_the_renew_deadline(
    kube: FakeKube, clock: FakeClock
) -> None:
    link = Partitioned(kube)
    me = elector(link, clock)  # type: ignore[arg-type]
    task = asyncio.create_task(me.run())
    try:
        await asyncio.wait_for(me.is_leader.wait(), 2)
        link.cut = True
        clock.advance(9)  # the renew deadline is 2/3 of the 15 s lease: 10 s
        await asyncio.sleep(0.05)
        assert not me.lost.is_set()
        clock.advance(2)
        await asyncio.wait_for(me.lost.wait(), 2)
        await asyncio.wait_for(task, 2)  # run() returns: the process exits and restarts as standby
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_partitioned_leader_steps_down_before_another_can_take_over(
    kube: FakeKube, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_sleep = asyncio.sleep

    async def fake_sleep(delay: float) -> None:  # time passes only when the elector sleeps
        clock.advance(delay)
        await real_sleep(0.005)

    monkeypatch.setattr(leader, "asyncio", types.SimpleNamespace(Event=asyncio.Event, sleep=fake_sleep))
    link = Partitioned(kube)
    old = LeaderElector(link, NS, NAME, "old", clock, duration=15.0, renew=5.0)  # type: ignore[arg-type]
    new = LeaderElector(kube, NS, NAME, "new", clock, duration=15.0, renew=5.0)
    start = clock()  # "old" renews at +0 s, then every 5 s, and fails from then on
    task = asyncio.create_task(old.run())
    taken_at: float | None = None
    try:
        await asyncio.wait_for(old.is_leader.wait(), 2)
        link.cut = True
        async with asyncio.timeout(5):
            while not old.lost.is_set():
                if taken_at is None and await new._try():
                    taken_at = clock() - start
                await real_sleep(0.001)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    stepped_down_at = clock() - start
    assert taken_at is None or taken_at >= stepped_down_at, (
        f"'new' took the lease at +{taken_at:.0f}s, 'old' led until +{stepped_down_at:.0f}s"
    )
