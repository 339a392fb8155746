"""Starvation reservations, and whether a demand could ever fit on an empty cluster.

A gang that has waited longer than ``starvation_age_seconds`` and still cannot fit would wait
forever behind a stream of smaller gangs that keep taking the room it needs. The pass therefore
reserves for it a set of nodes where it *would* fit once the pods running there end (room of pods
that never end, DaemonSets, stays taken), preferring nodes with the most free room now so the wait is
short. For the rest of the pass (only gangs of equal or lower priority follow) those nodes are
invisible: nothing new lands on them, so they drain. The next pass computes the reservation again
from scratch; because reserved nodes only drain, it keeps choosing them.

Only the first starving gang in planning order (highest priority, then oldest) gets a reservation
per pass: two reservations would each keep the other's nodes from draining.
"""

from __future__ import annotations

from collections.abc import Sequence

from controller.core.capacity import GPU, PODS, fits_count
from controller.core.placement import Items
from controller.core.state import PassState


def _greedy(
    rows: Sequence[list[int]], items: Items, order: Sequence[Sequence[int]] | None
) -> tuple[int, dict[int, int]]:
    """Place items greedily on `rows` (not modified), nodes in `order[k]` for item k (default: the
    shape's candidate nodes). Returns pods placed and pods per node."""
    width = len(rows[0]) if rows else 0
    taken: dict[int, list[int]] = {}
    per_node: dict[int, int] = {}
    placed = 0
    for k, (shape, n) in enumerate(items):
        if shape.missing:
            continue
        vec = shape.vec
        rem = n
        for i in order[k] if order is not None else shape.mask.indices:
            room = rows[i]
            used = taken.get(i)
            f = fits_count([room[r] - used[r] for r in range(width)] if used else room, vec)
            if f <= 0:
                continue
            c = f if f < rem else rem
            used = taken.setdefault(i, [0] * width)
            for r, a in vec:
                used[r] += a * c
            per_node[i] = per_node.get(i, 0) + c
            placed += c
            rem -= c
            if rem == 0:
                break
    return placed, per_node


def ever_fits(state: PassState, items: Items) -> tuple[bool, int]:
    """Could `items` fit on the Ready, schedulable nodes if only never-ending pods ran there?
    Returns (fits, how many pods fit)."""
    total = sum(n for _, n in items)
    placed, _ = _greedy(state.drained(), items, None)
    if placed < total and len(items) > 1:  # the same retry, smallest first, as `place` makes
        placed = max(placed, _greedy(state.drained(), items[::-1], None)[0])
    return placed >= total, placed


def ever_fits_on(state: PassState, items: Items, nodes: Sequence[int]) -> tuple[bool, int]:
    """``ever_fits`` on ``nodes`` only (one topology domain)."""
    allowed = set(nodes)
    order = [[i for i in shape.mask.indices if i in allowed] for shape, _ in items]
    total = sum(n for _, n in items)
    placed, _ = _greedy(state.drained(), items, order)
    if placed < total and len(items) > 1:
        placed = max(placed, _greedy(state.drained(), items[::-1], order[::-1])[0])
    return placed >= total, placed


def largest_single_fit(state: PassState, items: Items) -> int | None:
    """Index of the first item no candidate node could ever hold even one pod of, or None."""
    drained = state.drained()
    for k, (shape, _) in enumerate(items):
        if not any(fits_count(drained[i], shape.vec) > 0 for i in shape.mask.indices):
            return k
    return None


def reserve(state: PassState, items: Items) -> list[int] | None:
    """Nodes (sorted) where `items` fit once running pods end, preferring nodes with most free room
    now; None when no set of visible nodes would ever do."""
    capacity = state.capacity
    free = capacity.free
    visible = capacity.visible
    order = []
    for shape, _ in items:
        key_r = GPU if shape.gpu else next((r for r, _ in shape.vec if r != PODS), PODS)
        nodes = [i for i in shape.mask.indices if visible[i]]
        nodes.sort(key=lambda i: (-max(free[i][key_r], 0), i))
        order.append(nodes)
    placed, per_node = _greedy(state.drained(), items, order)
    if placed < sum(n for _, n in items):
        return None
    return sorted(per_node)
