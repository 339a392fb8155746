"""``placement.domain_order``: the domains of a level that could hold a gang's GPU pods, those
needing the fewest nodes first, then the tightest, then by name — checked against a brute force
over each domain's nodes on arbitrary small clusters."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.capacity import GPU, PODS, Capacity, Topology
from controller.core.placement import Items, domain_order
from controller.core.shapes import Shape

MAX_GPUS = 8


def min_nodes(free_gpus: list[int], per_pod: int, n: int) -> int | None:
    """Fewest of these nodes that hold n pods of per_pod GPUs (None: they cannot)."""
    used = held = 0
    for f in sorted(free_gpus, reverse=True):
        if held >= n:
            break
        if f // per_pod == 0:
            break
        held += f // per_pod
        used += 1
    return used if held >= n else None


def reference(free: list[int], racks: list[int], n_racks: int, items: list[tuple[int, int]]) -> list[int]:
    wanted = sum(g * n for g, n in items)
    rows = []
    for d in range(n_racks):
        mine = [f for f, r in zip(free, racks, strict=True) if r == d]
        room = sum(max(f, 0) for f in mine)
        counts = [min_nodes(mine, g, n) for g, n in items if g]
        if room < wanted or any(c is None for c in counts):
            continue
        rows.append((sum(c for c in counts if c is not None), room, d))
    return [d for _, _, d in sorted(rows)]


def items_of(pairs: list[tuple[int, int]]) -> Items:
    return [(cast(Shape, SimpleNamespace(gpu=g)), n) for g, n in pairs]


@settings(max_examples=300, deadline=None)
@given(
    nodes=st.lists(st.tuples(st.integers(0, MAX_GPUS), st.integers(0, 3)), min_size=1, max_size=24),
    pairs=st.lists(st.tuples(st.integers(0, MAX_GPUS), st.integers(1, 12)), min_size=1, max_size=3),
)
def test_domain_order_matches_a_brute_force_over_each_domains_nodes(
    nodes: list[tuple[int, int]], pairs: list[tuple[int, int]]
) -> None:
    free = [f for f, _ in nodes]
    racks = [r for _, r in nodes]
    labels = [{"rack": f"r{r}"} for r in racks]
    rows = [[0] * 2 for _ in nodes]
    for row, f in zip(rows, free, strict=True):
        row[PODS], row[GPU] = 110, f
    capacity = Capacity(
        [f"n{i}" for i in range(len(nodes))], rows, [True] * len(nodes), MAX_GPUS, Topology(labels)
    )
    level = capacity.level_of("rack")
    assert level is not None
    # domain ids follow the sorted names r0..r3 of the racks present
    domain_order(capacity, level, items_of([(1, 1)]))  # another gang asks first, on the same state
    present = sorted(set(racks))
    expected = [present[d] for d in reference(free, [present.index(r) for r in racks], len(present), pairs)]
    got = [int(capacity.dom_names[level][d][1:]) for d in domain_order(capacity, level, items_of(pairs))]
    assert got == expected
    # asked again on the same state (the memo), the same answer
    again = [int(capacity.dom_names[level][d][1:]) for d in domain_order(capacity, level, items_of(pairs))]
    assert again == expected
