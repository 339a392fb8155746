"""A de-duplicating, rate-limited work queue of gang keys (client-go's workqueue, in asyncio).

A key added many times before it is processed is processed once. Failed keys come back with
per-key exponential backoff; ``add_after`` schedules timers (timeouts). ``get_batch`` hands the
reconciler everything that is due, after a short settling delay so a burst of watch events (a Job
creating 64 pods) becomes one planning pass instead of 64.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
from collections.abc import Callable, Hashable

Clock = Callable[[], float]


class WorkQueue:
    def __init__(
        self,
        clock: Clock,
        base_delay: float = 0.05,
        max_delay: float = 30.0,
        settle: float = 0.02,
    ) -> None:
        self._clock = clock
        self._dirty: set[Hashable] = set()
        self._timers: list[tuple[float, int, Hashable]] = []
        self._deadlines: dict[Hashable, float] = {}  # the one live timer of each key (the earliest)
        self._seq = itertools.count()
        self._failures: dict[Hashable, int] = {}
        self._base = base_delay
        self._max = max_delay
        self._settle = settle
        self._wake = asyncio.Event()

    def __len__(self) -> int:
        return len(self._dirty)

    @property
    def depth(self) -> int:
        return len(self._dirty | set(self._deadlines))

    @property
    def scheduled(self) -> int:
        """Keys waiting on a timer (at most one timer per key)."""
        return len(self._deadlines)

    def add(self, key: Hashable) -> None:
        self._dirty.add(key)
        self._wake.set()

    def add_after(self, key: Hashable, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        due = self._clock() + delay
        if self._deadlines.get(key, float("inf")) <= due:
            return  # an earlier timer for this key is already set
        self._deadlines[key] = due
        heapq.heappush(self._timers, (due, next(self._seq), key))
        self._wake.set()

    def add_rate_limited(self, key: Hashable) -> None:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        # The exponent is capped: 2.0 ** 1024 overflows, and a key can fail that often.
        self.add_after(key, min(self._base * 2.0 ** min(failures, 60), self._max))

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def _promote_due(self) -> float | None:
        now = self._clock()
        while self._timers and self._timers[0][0] <= now:
            due, _, key = heapq.heappop(self._timers)
            if self._deadlines.get(key) == due:  # superseded entries are skipped
                del self._deadlines[key]
                self._dirty.add(key)
        while self._timers and self._deadlines.get(self._timers[0][2]) != self._timers[0][0]:
            heapq.heappop(self._timers)  # drop stale heads so the next wake-up is right
        return self._timers[0][0] - now if self._timers else None

    async def get_batch(self) -> set[Hashable]:
        while True:
            next_timer = self._promote_due()
            if self._dirty:
                await asyncio.sleep(self._settle)
                self._promote_due()
                batch, self._dirty = self._dirty, set()
                return batch
            self._wake.clear()
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for drops a cancellation that
            # arrives in the tick the wake-up does, and the reconciler would never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(next_timer):
                    await self._wake.wait()
