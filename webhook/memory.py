"""Keep the webhook's memory bounded whatever clients send (docs/operations.md, "Security").

Two things let a client grow the process without bound: many large bodies read at once, and the
C allocator keeping the pages of freed bodies (glibc returns little of a fragmented heap by itself:
aborted 3 MB uploads once took the process from 51 to 509 MB for good). So large bodies are read a
few at a time, and after large requests the freed heap is handed back to the OS.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

log = logging.getLogger("phalanx.webhook")


class SlotsBusy(Exception):
    """No slot for a large body came free in time."""


class BodySlots:
    """At most ``limit`` large bodies are read at once; another waits ``wait`` seconds, then SlotsBusy.

    Reviews of ordinary objects are small and never take a slot, so clients holding every slot
    (slow uploads) delay only other large bodies, never the usual admissions.
    """

    def __init__(self, limit: int, wait: float) -> None:
        self._semaphore = asyncio.Semaphore(limit)
        self._wait = wait

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        try:
            async with asyncio.timeout(self._wait):
                await self._semaphore.acquire()
        except TimeoutError:
            raise SlotsBusy(
                f"too many large requests being read; none finished within {self._wait:g}s"
            ) from None
        try:
            yield
        finally:
            self._semaphore.release()


def _glibc_malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        trim = libc.malloc_trim  # glibc only (not musl)
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim


class HeapTrimmer:
    """After a large request is over, give the freed heap back (``malloc_trim(0)`` on glibc).

    The trim runs a moment later, from the event loop, once the request's buffers (and an aborted
    upload's traceback) are gone; at most once per ``interval`` seconds, since it walks the heap; and
    once more ``settle`` seconds after the last of a burst.
    """

    def __init__(self, threshold_bytes: int, interval: float = 0.2, settle: float = 1.0) -> None:
        self.threshold_bytes = threshold_bytes
        self.interval = interval
        self.settle = settle
        self.trims = 0
        self._trim = _glibc_malloc_trim()
        self._scheduled = False
        self._last = 0.0
        self._follow_up: asyncio.TimerHandle | None = None

    @property
    def available(self) -> bool:
        return self._trim is not None

    def after(self, size: int) -> None:
        """A request of ``size`` body bytes (read or announced) is over."""
        if size < self.threshold_bytes or self._scheduled:
            return
        self._scheduled = True
        delay = max(0.05, self._last + self.interval - time.monotonic())
        asyncio.get_running_loop().call_later(delay, self._run)

    def _run(self, follow_up: bool = False) -> None:
        self._scheduled = False
        self._last = time.monotonic()
        if not follow_up:
            # Once more, ``settle`` seconds after the burst: a dropped connection's buffers can
            # be freed after its request was over (seen under load: 51 -> 149 MiB kept).
            if self._follow_up is not None:
                self._follow_up.cancel()
            self._follow_up = asyncio.get_running_loop().call_later(self.settle, self._run, True)
        # Aborted requests sit in reference cycles (request -> stream -> exception -> traceback ->
        # frame -> request) with their buffers until a full collection: collect them first.
        gc.collect()
        if self._trim is not None:
            self._trim(0)
        self.trims += 1
