"""Body checks that need no server: the media type, and when freed memory is handed back."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from webhook.body import BodyError, check_content_type
from webhook.memory import BodyBudget, BudgetBusy, HeapTrimmer


@pytest.mark.parametrize(
    "header", ["application/json", "Application/JSON", "application/json; charset=utf-8"]
)
def test_json_media_types_pass(header: str) -> None:
    check_content_type(header)


@pytest.mark.parametrize("header", [None, "", "text/plain", "application/jsonp", "application/x-json"])
def test_anything_else_is_415(header: str | None) -> None:
    with pytest.raises(BodyError) as caught:
        check_content_type(header)
    assert caught.value.status == 415


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():  # noqa: ASYNC110 (the trimmer's own timers make it true)
        await asyncio.sleep(0.01)


async def test_the_heap_is_trimmed_after_a_large_burst_and_once_more_later_never_for_small_ones() -> None:
    trimmer = HeapTrimmer(threshold_bytes=1000, interval=0.05, settle=0.3)
    trimmer.after(999)
    assert not trimmer.pending  # a small request: nothing to give back
    for _ in range(50):
        trimmer.after(5000)
    await _until(lambda: trimmer.trims >= 1)
    # ... one trim for the whole burst, and once more when it has settled (buffers of dropped
    # connections are freed late), then nothing more.
    await _until(lambda: not trimmer.pending)
    assert trimmer.trims == 2


async def test_large_bodies_share_one_budget_of_bytes() -> None:
    budget = BodyBudget(limit_bytes=10, wait=0.05)
    async with budget.reserve(6):
        assert budget.free == 4
        async with budget.reserve(4):
            assert budget.free == 0
            # No room, and none comes free: refused, without waiting for the read to end.
            with pytest.raises(BudgetBusy, match="10 of 10 bytes"):
                async with budget.reserve(1):
                    pass
    assert budget.free == 10


async def test_a_body_waiting_for_room_gets_it_when_another_is_read() -> None:
    budget = BodyBudget(limit_bytes=10, wait=60)
    order: list[str] = []
    first_in = asyncio.Event()
    release = asyncio.Event()

    async def first() -> None:
        async with budget.reserve(8):
            first_in.set()
            await release.wait()
            order.append("first done")

    async def second() -> None:
        await first_in.wait()
        async with budget.reserve(8):
            order.append("second in")

    waiting = asyncio.gather(first(), second())
    await first_in.wait()
    await asyncio.sleep(0)
    assert order == [] and budget.free == 2
    release.set()
    await waiting
    assert order == ["first done", "second in"]
    assert budget.free == 10
