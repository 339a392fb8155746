"""LeaderElector on a coordination.k8s.io Lease in the FakeKube, with a fake clock."""

from __future__ import annotations

import asyncio
import time
import types
from collections.abc import AsyncIterator
from typing import Any

import pytest

from controller.api.kube import ApiError
from controller.api.records import parse_time
from controller.api.resources import LEASES
from controller.runtime import leader
from controller.runtime.leader import LeaderElector
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
    return LeaderElector(kube, NS, NAME, identity, clock, duration=15.0, renew=renew, monotonic=clock)


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
    assert parse_time(spec(kube)["renewTime"]) == clock()
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
        clock.advance(14)  # unchanged for 14 s since this replica first saw it: not yet
        await asyncio.sleep(0.05)
        assert not me.is_leader.is_set()
        clock.advance(1.5)  # 15.5 s without a renewal, as seen from here
        await asyncio.wait_for(me.is_leader.wait(), 2)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    held = spec(kube)
    assert held["holderIdentity"] == "me"
    assert held["leaseTransitions"] == 4
    assert parse_time(held["acquireTime"]) == clock()


async def test_a_standby_whose_clock_runs_ahead_does_not_steal_a_healthy_lease(
    kube: FakeKube, clock: FakeClock
) -> None:
    """Expiry is timed here, from when the lease last changed, not from the holder's renewTime."""
    kube.seed(LEASES, lease("other", clock() - 30))  # "other"'s clock is 30 s behind ours
    me = elector(kube, clock)
    assert await me._try() is False
    clock.advance(5)
    kube.mutate(LEASES, NS, NAME, lambda o: o["spec"].__setitem__("renewTime", leader._micro(clock() - 30)))
    assert await me._try() is False  # it was renewed: the 15 s start again
    clock.advance(14)
    assert await me._try() is False
    clock.advance(2)
    assert await me._try() is True  # 16 s without a renewal


async def test_a_released_lease_is_taken_at_once(kube: FakeKube, clock: FakeClock) -> None:
    old = elector(kube, clock, identity="old")
    assert await old._try() is True
    old.is_leader.set()
    await old.release()
    assert not old.is_leader.is_set()
    assert spec(kube)["holderIdentity"] == ""
    assert await elector(kube, clock, identity="new")._try() is True
    assert spec(kube)["holderIdentity"] == "new"


class Hanging:
    """A Kube whose lease reads hang (a half-open connection) once ``stuck``."""

    def __init__(self, kube: FakeKube) -> None:
        self.kube = kube
        self.stuck = False

    def __getattr__(self, name: str) -> Any:
        if self.stuck and name == "get":

            async def hang(*_: Any, **__: Any) -> Any:
                await asyncio.Event().wait()

            return hang
        return getattr(self.kube, name)


async def test_a_renewal_that_hangs_is_cut_off_at_the_renew_deadline(kube: FakeKube) -> None:
    """Real time, short lease: the leader must stop leading by the deadline, not after the hang."""
    link = Hanging(kube)
    me = LeaderElector(link, NS, NAME, "me", time.time, duration=0.6, renew=0.1)  # type: ignore[arg-type]
    task = asyncio.create_task(me.run())
    try:
        await asyncio.wait_for(me.is_leader.wait(), 2)
        link.stuck = True
        started = time.monotonic()
        await asyncio.wait_for(me.lost.wait(), 2)
        assert not me.is_leader.is_set()
        assert time.monotonic() - started <= me.renew_deadline + 0.2
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


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

    monkeypatch.setattr(
        leader,
        "asyncio",
        types.SimpleNamespace(Event=asyncio.Event, sleep=fake_sleep, timeout=asyncio.timeout),
    )
    link = Partitioned(kube)
    old = LeaderElector(link, NS, NAME, "old", clock, 15.0, 5.0, monotonic=clock)  # type: ignore[arg-type]
    new = LeaderElector(kube, NS, NAME, "new", clock, 15.0, 5.0, monotonic=clock)
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
