"""WorkQueue on a fake clock: de-duplication, timers, per-key backoff."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

import pytest

from controller.pipeline.workqueue import WorkQueue
from tests.component.controller.harness import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(0.0)


@pytest.fixture
def queue(clock: FakeClock) -> WorkQueue:
    return WorkQueue(clock, base_delay=1.0, max_delay=8.0, settle=0)


async def due(queue: WorkQueue) -> set[Hashable]:
    """What the queue hands out right now (empty when nothing is due)."""
    try:
        return await asyncio.wait_for(queue.get_batch(), 0.02)
    except TimeoutError:
        return set()


async def test_a_key_added_many_times_is_handed_out_once(queue: WorkQueue) -> None:
    for key in ("a", "b", "a", "a"):
        queue.add(key)
    assert len(queue) == 2
    assert await due(queue) == {"a", "b"}
    assert await due(queue) == set()


async def test_add_after_hands_keys_out_in_deadline_order(queue: WorkQueue, clock: FakeClock) -> None:
    queue.add_after("late", 5)
    queue.add_after("early", 1)
    queue.add_after("now", 0)
    assert await due(queue) == {"now"}
    assert await due(queue) == set()
    clock.advance(1)
    assert await due(queue) == {"early"}
    clock.advance(3.9)
    assert await due(queue) == set()
    clock.advance(0.1)
    assert await due(queue) == {"late"}
    assert queue.depth == 0


async def test_a_waiting_consumer_wakes_for_a_new_key(queue: WorkQueue) -> None:
    waiter = asyncio.create_task(queue.get_batch())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    queue.add("k")
    assert await asyncio.wait_for(waiter, 1) == {"k"}


async def test_rate_limited_backoff_doubles_up_to_the_cap_and_forget_resets(
    queue: WorkQueue, clock: FakeClock
) -> None:
    for delay in (1, 2, 4, 8, 8):
        queue.add_rate_limited("k")
        clock.advance(delay - 0.25)
        assert await due(queue) == set()
        clock.advance(0.25)
        assert await due(queue) == {"k"}

    queue.forget("k")
    queue.add_rate_limited("k")
    clock.advance(1)
    assert await due(queue) == {"k"}


async def test_backoff_is_per_key(queue: WorkQueue, clock: FakeClock) -> None:
    for _ in range(3):
        queue.add_rate_limited("slow")  # 1, 2 and 4 s: one timer per key, the earliest wins
    queue.add_rate_limited("fresh")
    clock.advance(1)
    assert await due(queue) == {"slow", "fresh"}
    queue.add_rate_limited("slow")  # its 4th failure: 8 s
    queue.add_rate_limited("fresh")  # its 2nd: 2 s
    clock.advance(2)
    assert await due(queue) == {"fresh"}
    clock.advance(6)
    assert await due(queue) == {"slow"}


async def test_re_arming_a_timer_keeps_one_per_key(queue: WorkQueue) -> None:
    for _ in range(10):
        queue.add_after("k", 30)
    assert queue.depth == 1


async def test_a_key_that_never_stops_failing_stays_at_the_cap(queue: WorkQueue, clock: FakeClock) -> None:
    """2 ** 1024 overflows a float: a key retried that often must not crash the reconciler."""
    for _ in range(2000):
        queue.add_rate_limited("stuck")
        clock.advance(8.0)
        assert await due(queue) == {"stuck"}


@pytest.mark.parametrize("ticks", range(4))
async def test_a_cancel_that_meets_a_new_key_still_stops_the_consumer(queue: WorkQueue, ticks: int) -> None:
    # A key added in the very tick the reconciler is cancelled: the cancellation must win (on
    # Python 3.11 asyncio.wait_for dropped it when its waiter finished in the same tick).
    async def consume() -> None:
        while True:
            await queue.get_batch()

    queue.add_after("later", 100)  # a timer pending: the consumer waits for a wake-up or for it
    consumer = asyncio.create_task(consume())
    await asyncio.sleep(0.01)
    queue.add("k")
    for _ in range(ticks):
        await asyncio.sleep(0)
    consumer.cancel()
    done, _ = await asyncio.wait({consumer}, timeout=1)
    assert done == {consumer}, "the consumer kept running after it was cancelled"
    assert consumer.cancelled()
