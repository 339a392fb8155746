"""Say where the event loop is stuck while it is stuck.

Everything the controller does runs on one event loop, leader election included: a callback that
runs for seconds delays every renewal and every watch event behind it. A thread beside the loop
notices when the loop has not come round for ``threshold`` seconds and logs, once per stall, the
stack the loop is running: the line to look at when the controller logs ``event loop busy`` or
loses its leadership with nothing else going on.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback

log = logging.getLogger(__name__)


class StallWatch:
    def __init__(self, loop: asyncio.AbstractEventLoop, threshold: float = 5.0) -> None:
        self.loop = loop
        self.threshold = threshold
        self._beat = time.monotonic()
        self._loop_thread = threading.get_ident()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="stall watch", daemon=True)

    def start(self) -> None:
        self._tick()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _tick(self) -> None:
        self._beat = time.monotonic()
        if not self._stop.is_set():
            self.loop.call_later(self.threshold / 5, self._tick)

    def _watch(self) -> None:
        told = self._beat
        while not self._stop.wait(self.threshold / 5):
            beat = self._beat
            stalled = time.monotonic() - beat
            if stalled < self.threshold or beat == told:
                continue
            told = beat  # once per stall
            frame = sys._current_frames().get(self._loop_thread)
            stack = "".join(traceback.format_stack(frame)[-12:]) if frame is not None else ""
            log.warning("event loop stalled", extra={"seconds": round(stalled, 1), "stack": stack})
