"""A PodGroup's status follows its members at a pace: counts alone (members arriving, binding) are
written at most once a second per gang, every change of phase, reason or condition at once -- and
a count held back is written once the second is over, never lost."""

from __future__ import annotations

import asyncio

from controller.api import resources as r
from controller.api.store import GangKey
from controller.pipeline.reconciler import STATUS_PROGRESS_SECONDS, StatusDue
from shared.jsonread import JsonObject

from .harness import NS, Harness, gang

KEY = GangKey(NS, "g")


def members_written(h: Harness) -> int | None:
    pg = h.pg()
    return None if pg is None else (pg.get("status") or {}).get("members")


async def count_held_back(h: Harness, four: list[JsonObject]) -> None:
    """Two of four members written; the third arrives in the same second: only a count changed."""
    h.cluster(nodes=2, gpus=4)
    h.kube.seed(r.PODS, *four[:2])
    await h.step()
    assert members_written(h) == 2
    h.kube.seed(r.PODS, four[2])
    await h.step()
    assert members_written(h) == 2


async def test_counts_alone_wait_for_the_second_a_new_reason_does_not() -> None:
    h = Harness()
    four = gang(4, gpus=1)
    await count_held_back(h, four)
    h.clock.advance(STATUS_PROGRESS_SECONDS)
    await h.step()  # the second is over: the count held back is written
    assert members_written(h) == 3

    h.kube.seed(r.PODS, four[3])  # the same second, but the gang is whole and admitted: written now
    await h.step()
    pg = h.pg()
    assert pg is not None and pg["status"]["reason"] != "WaitingForMembers"
    assert pg["status"]["members"] == 4


async def test_a_held_back_count_is_written_by_itself_without_planning_again() -> None:
    h = Harness()
    await count_held_back(h, gang(4, gpus=1))
    h.clock.advance(STATUS_PROGRESS_SECONDS)
    due = await asyncio.wait_for(h.queue.get_batch(), 1)
    assert StatusDue(KEY) in due
    passes = h.reconciler.passes
    await h.reconciler.reconcile({StatusDue(KEY)})
    assert members_written(h) == 3
    assert h.reconciler.passes == passes  # written from the last pass's status: no planning
