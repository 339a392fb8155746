"""Keep the webhook's memory bounded whatever clients send (docs/operations.md, "Security").

Two things let a client grow the process without bound: many large bodies read at once, and the
C allocator keeping the pages of freed bodies (glibc returns little of a fragmented heap by itself:
aborted 3 MB uploads once took the process from 51 to 509 MB for good). So large bodies share a
budget of bytes, and after large requests the freed heap is handed back to the OS.
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


class BudgetBusy(Exception):
    """No room for a large body came free in time."""


class BodyBudget:
    """Bytes of large bodies held at once, across all connections.

    A body over the small size (or of unknown length) reserves its announced length (the most it
    may grow to, when unknown) before it is read; while the budget has no room for it, it waits
    ``wait`` seconds, then BudgetBusy. Reviews of ordinary objects are small and never reserve, so
    clients holding the budget (slow uploads) delay only other large bodies, never the usual
    admissions; what small bodies hold is bounded by the connection limit instead.
    """

    def __init__(self, limit_bytes: int, wait: float) -> None:
        self.limit_bytes = limit_bytes
        self.free = limit_bytes
        self._wait = wait
        self._waiters: list[asyncio.Future[None]] = []

    @asynccontextmanager
    async def reserve(self, size: int) -> AsyncIterator[None]:
        if self.free < size:
            try:
                async with asyncio.timeout(self._wait):
                    await self._room_for(size)
            except TimeoutError:
                raise BudgetBusy(
                    f"too many large requests being read ({self.limit_bytes - self.free} of "
                    f"{self.limit_bytes} bytes); none finished within {self._wait:g}s"
                ) from None
        self.free -= size
        try:
            yield
        finally:
            self.free += size
            self._wake()

    async def _room_for(self, size: int) -> None:
        loop = asyncio.get_running_loop()
        while self.free < size:
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def _glibc_malloc_trim() -> Callable[[int], int] | None:
    libc = _glibc()
    trim = getattr(libc, "malloc_trim", None)  # glibc only (not musl)
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number
LARGE_ALLOCATION_BYTES = 64 * 1024


def map_large_allocations(threshold: int = LARGE_ALLOCATION_BYTES) -> bool:
    """Have glibc map every allocation of ``threshold`` bytes or more on its own pages, which go
    back to the OS the moment they are freed; True if it took.

    By default glibc raises this threshold (up to 32 MiB) each time a large mapped block is freed,
    so after the first large body every later one comes from the heap, whose freed pages stay with
    the process once other allocations sit among them: after the abuse mix of the Security section,
    94 MiB kept with the default, 58 MiB with this (from 53). Calling ``mallopt`` also turns that
    raising off. Same effect as ``MALLOC_MMAP_THRESHOLD_`` in the environment, without relying on it.
    """
    libc = _glibc()
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, threshold))


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

    @property
    def pending(self) -> bool:
        """A trim (or the follow-up after a burst) is still to come."""
        return self._scheduled or self._follow_up is not None

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
        if follow_up:
            self._follow_up = None
        else:
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
