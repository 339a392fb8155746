"""Which pending gangs a Phalanx pass of the replay must see: the others provably wait, untouched.

The replay asks the real ``plan()`` about every pending gang at every cycle. With a thousand gangs
queued behind a full cluster, almost all of that work decides, again, that they wait. Where the
replay can prove which gangs would wait *and leave no trace*, it leaves them out of the snapshot;
``plan()`` then gives the gangs it keeps exactly the decisions a full snapshot gives them.

The proof needs (``PhalanxPolicy.prunable`` checks all of it, else every pass is planned whole):
one priority for every job (nothing is preempted, nothing holds room), no schedule timeout and no
starvation reservation (a wait carries no news and reserves nothing), no queues; every gang is one
shape, n pods × q GPUs, asking for nothing but GPUs, on nodes that differ only in free GPUs.

F is the free GPUs per node when the pass starts, and bound(F, q) = Σ floor(F_i / q) is exactly how
many q-GPU pods fit -- the core's own quick bound for the shape. Room only shrinks during such a
pass (admissions book it; nothing is preempted or reserved). So:

- a gang with bound(F, q) = 0 (*inert*) waits wherever it stands in the order, and touches nothing:
  its placement and its shortfall message both stop at the quick bound before booking anything.
  Leaving it out changes no other decision.
- The first K gangs that are not inert (in the core's pass order, ``gang_order``) are planned. With
  F' the room their Admits leave, if every later gang asks for more than bound(F', q), every later
  gang would wait in the full pass too (its room there is at most F'), and after the pass's last
  admission: what it does on the way (its shortfall message books and rolls back, which reorders
  nodes inside the placement index) can no longer change where anybody goes. Otherwise K grows and
  the same pass is planned again (nothing was applied yet).

``tests/unit/simulation/test_pruning.py`` replays mixes both ways and compares them job by job,
nodes included.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from controller.core.ordering import GangOrder

FIRST_PREFIX = 16  # gangs planned first; most passes of a busy replay admit fewer than this


def pod_bounds(level_counts: Sequence[int]) -> list[int]:
    """``bound[q]`` = how many pods of q GPUs fit, from the number of nodes at each free level
    (``level_counts[g]``: nodes with exactly g free GPUs); ``bound[0]`` is unused."""
    top = len(level_counts) - 1
    return [0] + [sum(level_counts[g] * (g // q) for g in range(q, top + 1)) for q in range(1, top + 1)]


class PassOrder:
    """Pending gangs (run indexes) in the core's pass order, each with its shape (pods, GPUs per
    pod), and per GPUs-per-pod how many pending gangs have each pod count (for a quick verdict)."""

    def __init__(self) -> None:
        self.keys: list[tuple[GangOrder, int]] = []
        self.shape: dict[int, tuple[int, int]] = {}  # run index -> (pods, GPUs per pod)
        self.sizes: dict[int, dict[int, int]] = {}  # GPUs per pod -> pods -> pending gangs

    def __len__(self) -> int:
        return len(self.keys)

    def __iter__(self) -> Iterator[int]:
        return (index for _, index in self.keys)

    def add(self, order: GangOrder, index: int, pods: int, per_pod: int) -> None:
        bisect.insort(self.keys, (order, index))
        self.shape[index] = (pods, per_pod)
        counts = self.sizes.setdefault(per_pod, {})
        counts[pods] = counts.get(pods, 0) + 1

    def remove(self, order: GangOrder, index: int) -> None:
        at = bisect.bisect_left(self.keys, (order, index))
        if at >= len(self.keys) or self.keys[at] != (order, index):
            raise AssertionError(f"run {index} is not pending")
        del self.keys[at]
        pods, per_pod = self.shape.pop(index)
        counts = self.sizes[per_pod]
        counts[pods] -= 1
        if not counts[pods]:
            del counts[pods]

    def first_live(self, bound: Sequence[int], count: int) -> tuple[list[int], int]:
        """The first ``count`` gangs that are not inert under ``bound`` (in order), and where in
        the order the rest begins."""
        chosen: list[int] = []
        shape = self.shape
        top = len(bound) - 1
        for at, (_, index) in enumerate(self.keys):
            per_pod = shape[index][1]
            if per_pod <= top and bound[per_pod]:
                chosen.append(index)
                if len(chosen) == count:
                    return chosen, at + 1
        return chosen, len(self.keys)

    def all_wait_from(self, start: int, bound: Sequence[int]) -> bool:
        """Does every gang from ``start`` on ask for more pods than ``bound`` lets fit?"""
        top = len(bound) - 1
        if all(
            per_pod > top or min(counts) > bound[per_pod] for per_pod, counts in self.sizes.items() if counts
        ):
            return True  # true of every pending gang, so of the rest too
        shape = self.shape
        for _, index in self.keys[start:]:
            pods, per_pod = shape[index]
            if per_pod <= top and pods <= bound[per_pod]:
                return False
        return True
