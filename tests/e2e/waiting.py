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
