"""While a gang's members are still being created (fewer than its minMember exist), their arrival
plans it at most once per FILLING_PASS_SECONDS instead of once per member -- and the member that
completes it is planned at once. A new gated pod moves no capacity, so it re-plans nothing else."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

from controller.api import resources as r
from controller.api.store import GangKey
from controller.pipeline.reconciler import FILLING_PASS_SECONDS, REPLAN

from .harness import NS, Harness, gang, gates_of, podgroup

KEY = GangKey(NS, "g")


async def due(h: Harness) -> set[Hashable]:
    """What the work queue hands the reconciler now (empty when nothing is due yet)."""
    try:
        return await asyncio.wait_for(h.queue.get_batch(), 0.05)
    except TimeoutError:
        return set()


async def test_a_filling_gang_is_planned_once_per_interval_and_at_once_when_complete() -> None:
    h = Harness()
    h.cluster(nodes=2, gpus=4)
    h.kube.seed(r.PODGROUPS, podgroup(min_member=4))
    members = gang(4, gpus=1)
    h.kube.seed(r.PODS, members[0])
    await h.step()
    await due(h)  # what the first sync queued

    h.kube.seed(r.PODS, members[1])
    h.sync()
    h.kube.seed(r.PODS, members[2])
    h.sync()
    assert await due(h) == set()  # two new members, no pass yet: not one per member
    assert h.queue.scheduled == 1  # ... but one is due (the gang is not forgotten)
    h.clock.advance(FILLING_PASS_SECONDS)
    assert await due(h) == {KEY}

    h.kube.seed(r.PODS, members[3])  # the gang is complete: planned now
    h.sync()
    assert await due(h) == {KEY}
    await h.reconcile(KEY)
    assert all(not gates_of(h.pod(f"g-{i}")) for i in range(4))


async def test_a_new_gated_pod_does_not_replan_every_gang() -> None:
    h = Harness()
    h.cluster(nodes=2, gpus=4)
    h.sync()
    assert REPLAN in await due(h)  # new nodes: every gang may fit now
    h.kube.seed(r.PODS, *gang(2, gpus=1))
    h.sync()
    assert await due(h) == {KEY}
