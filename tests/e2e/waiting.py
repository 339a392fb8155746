"""Polling helpers for e2e tests: short timeouts, and a useful message when they run out."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(
    probe: Callable[[], T | None], timeout: float = 30.0, interval: float = 0.25, what: str = ""
) -> T:
    """Call ``probe`` until it returns something truthy; return that, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    error: Exception | None = None
    while True:
        try:
            last = probe()
            if last:
                return last
        except Exception as err:  # transient API errors while objects appear
            error = err
        if time.monotonic() >= deadline:
            detail = f"; last value {last!r}" + (f"; last error {error!r}" if error else "")
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what or probe}{detail}")
        time.sleep(interval)


def stays(probe: Callable[[], bool], duration: float, interval: float = 0.25, what: str = "") -> None:
    """Assert that ``probe`` holds for the whole of ``duration`` seconds."""
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        assert probe(), f"stopped holding: {what or probe}"
        time.sleep(interval)


def held(
    probe: Callable[[], bool],
    passes: Callable[[], int],
    replan: Callable[[], None],
    what: str = "",
    timeout: float = 60.0,
    interval: float = 0.25,
) -> None:
    """Assert that ``probe`` holds until the controller has re-planned every gang at least once
    after this call, rather than for a fixed time that may fall between two passes.

    ``passes`` counts the controller's finished planning passes; ``replan`` makes it start one. A
    pass still running now may have read the state from before; the one after it has not: so the
    probe must hold until two more have finished. Each is triggered at once instead of waiting for
    the periodic resync.
    """
    start = seen = passes()
    replan()
    deadline = time.monotonic() + timeout
    while True:
        assert probe(), f"stopped holding: {what or probe}"
        now = passes()
        if now >= start + 2:
            break
        if now > seen:  # the one triggered may have been folded into the pass that was running
            seen = now
            replan()
        assert time.monotonic() < deadline, f"no planning pass within {timeout:.0f}s ({what})"
        time.sleep(interval)
    assert probe(), f"stopped holding: {what or probe}"
