"""The planning pass runs with Python's cyclic garbage collector paused.

A pass over 10,000 gangs allocates about a million short-lived objects (shapes, demands, sort
keys) and frees them by reference counting: none sits in a reference cycle. Left on, the cyclic
collector still runs a full collection over the store's long-lived records every few passes, a
tenth of a second each on the 10,000-gang benchmark, and the main source of its jitter. The pass
is synchronous (no await between the snapshot and the plan), so nothing else runs meanwhile; the
collector resumes, and catches up, as soon as it ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    if not gc.isenabled():  # paused by a caller already: leave it to them
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
