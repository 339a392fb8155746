"""The stall watch names the code that holds the event loop, once per stall."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from controller.runtime.stall import StallWatch


def hold_the_loop(seconds: float) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        pass


def test_a_stalled_loop_is_reported_once_with_the_stack_that_holds_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        watch = StallWatch(asyncio.get_running_loop(), threshold=0.3)
        watch.start()
        await asyncio.sleep(0.2)
        hold_the_loop(1.5)
        await asyncio.sleep(0.5)  # the loop turns again: nothing more to say
        watch.stop()

    with caplog.at_level(logging.WARNING, logger="controller.runtime.stall"):
        asyncio.run(main())
    stalls = [r for r in caplog.records if r.getMessage() == "event loop stalled"]
    assert len(stalls) == 1
    assert "hold_the_loop" in stalls[0].stack  # type: ignore[attr-defined]
    assert stalls[0].seconds >= 0.3  # type: ignore[attr-defined]


def test_a_loop_that_keeps_turning_is_not_reported(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        watch = StallWatch(asyncio.get_running_loop(), threshold=0.3)
        watch.start()
        for _ in range(10):
            hold_the_loop(0.05)
            await asyncio.sleep(0.05)
        watch.stop()

    with caplog.at_level(logging.WARNING, logger="controller.runtime.stall"):
        asyncio.run(main())
    assert not [r for r in caplog.records if r.getMessage() == "event loop stalled"]
