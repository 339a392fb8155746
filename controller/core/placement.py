"""All-or-nothing gang placement on a Capacity.

Packing, to limit fragmentation:

- shapes are placed biggest first;
- for each shape, while some pods remain: if one node can take all remaining pods, take the one
  that is left with the least room (best fit); otherwise fill the node that takes the most (so the
  gang spans few nodes) and go on;
- a gang of several pods is first tried inside one domain of each level it is given
  (core/topology.py: its preferred level and the wider ones, or, for a gang that needs GPUs, its
  topology's levels, the narrowest first; by default the pass's preferred levels, for GPU gangs
  only), and only then across the cluster.
  Candidate domains are the ones whose GPU levels could hold it; those needing the fewest nodes,
  then the tightest, first (best fit: the wholly free domains stay free for big gangs);
- a gang that requires one domain of a label key (``Within``) is placed inside one domain of it or
  not at all: every candidate domain is tried in the same order, and nodes without the label are
  never used.

Cluster-wide placement of a GPU shape walks the GPU buckets (O(levels) per step); a shape limited
to few nodes, a CPU-only shape or a domain scans its candidate nodes once and sorts them.

A ``FitMemo`` remembers, within a pass, what did not fit. Capacity only shrinks during a pass (bookings,
reservations), so what failed once fails again: a shape × n that failed fails for any count ≥ n.
What failed cluster-wide fails inside any domain; what failed inside domains is kept apart, by ``Within``.
Whoever grows capacity temporarily (victim search, reservation check) must pass no memo (or its own).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from controller.core.capacity import GPU, Capacity, fits_count
from controller.core.shapes import Shape

Assignment = list[tuple[int, int]]  # (node index, pods of the shape placed there)
Items = Sequence[tuple[Shape, int]]  # what to place: shape × count, biggest shape first
Domain = tuple[int, int]  # (capacity level, domain id)


@dataclass(frozen=True, slots=True)
class Within:
    """Where a gang must be placed: inside one domain of node label ``key`` -- any one of them, or
    the one labelled ``value`` (where an admitted gang already runs)."""

    key: str
    value: str | None = None


class FitMemo:
    def __init__(self) -> None:
        self.failed_min: dict[int, int] = {}  # shape id -> smallest count known not to fit
        self.failed: set[tuple[tuple[int, int], ...]] = set()  # multi-shape demands known not to fit
        # Demands known not to fit inside one domain (they may still fit across domains).
        self.failed_within: set[tuple[Within, tuple[tuple[int, int], ...]]] = set()

    def known_failure(self, items: Items, within: Within | None = None) -> bool:
        for shape, n in items:
            smallest = self.failed_min.get(shape.id)
            if smallest is not None and n >= smallest:
                return True
        if within is not None and (within, signature(items)) in self.failed_within:
            return True
        return len(items) > 1 and signature(items) in self.failed

    def record_within(self, items: Items, within: Within) -> None:
        self.failed_within.add((within, signature(items)))

    def record(self, items: Items, single: Shape | None, n: int) -> None:
        if single is not None:
            smallest = self.failed_min.get(single.id)
            if smallest is None or n < smallest:
                self.failed_min[single.id] = n
        else:
            self.failed.add(signature(items))


def signature(items: Items) -> tuple[tuple[int, int], ...]:
    return tuple([(shape.id, n) for shape, n in items])


def sort_items(items: Items) -> list[tuple[Shape, int]]:
    return sorted(items, key=lambda item: item[0].size)


def _fill_buckets(capacity: Capacity, shape: Shape, n: int, out: Assignment) -> int:
    """Cluster-wide fill of a GPU shape through the GPU buckets. Returns the pods placed."""
    vec = shape.vec
    q = shape.gpu
    flags = shape.mask.flags
    free = capacity.free
    buckets = capacity.buckets
    top = capacity.max_level
    rem = n
    while rem > 0:
        lo = rem * q
        chosen = -1
        for lvl in range(lo, top + 1):
            for i in buckets[lvl]:
                if flags[i] and fits_count(free[i], vec) >= rem:
                    chosen = i
                    break
            if chosen >= 0:
                break
        if chosen >= 0:
            capacity.book(chosen, vec, rem)
            out.append((chosen, rem))
            return n
        best, best_fit = -1, 0
        for lvl in range(top, q - 1, -1):  # levels >= lo too: other resources may limit them
            level_cap = lvl // q
            if level_cap <= best_fit:
                break
            for i in buckets[lvl]:
                if flags[i]:
                    f = fits_count(free[i], vec)
                    if f > best_fit:
                        best, best_fit = i, f
                        if f >= level_cap:
                            break
        if best < 0:
            break
        capacity.book(best, vec, best_fit)
        out.append((best, best_fit))
        rem -= best_fit
    return n - rem


def _fill_scan(capacity: Capacity, shape: Shape, n: int, nodes: Sequence[int], out: Assignment) -> int:
    """Fill over an explicit node list: fits computed once, then greedy on the sorted list."""
    vec = shape.vec
    flags = shape.mask.flags
    visible = capacity.visible
    free = capacity.free
    cands: list[tuple[int, int]] = []
    for i in nodes:
        if flags[i] and visible[i]:
            f = fits_count(free[i], vec)
            if f > 0:
                cands.append((f, i))
    if not cands:
        return 0
    cands.sort()
    fits = [f for f, _ in cands]
    hi = len(cands)
    rem = n
    while rem > 0 and hi > 0:
        j = bisect_left(fits, rem, 0, hi)
        if j < hi:
            i = cands[j][1]
            capacity.book(i, vec, rem)
            out.append((i, rem))
            return n
        hi -= 1
        f, i = cands[hi]
        capacity.book(i, vec, f)
        out.append((i, f))
        rem -= f
    return n - rem


def _quick_bound(capacity: Capacity, shape: Shape) -> int:
    """An upper bound on how many pods of `shape` fit on visible nodes."""
    if shape.missing or not shape.mask.count:
        return 0
    sums = capacity.sums
    bound = 1 << 62
    for r, a in shape.vec:
        b = sums[r] // a
        if b < bound:  # noqa: PLR1730 - hot path
            bound = b
    if shape.gpu:
        b = capacity.gpu_upper_bound(shape.gpu)
        if b < bound:  # noqa: PLR1730 - hot path
            bound = b
    return bound


def fill(
    capacity: Capacity, shape: Shape, n: int, nodes: Sequence[int] | None = None, partial: bool = False
) -> tuple[Assignment, int]:
    """Place up to `n` pods of `shape` (booked). All or none unless `partial`."""
    out: Assignment = []
    if n <= 0:
        return out, 0
    if _quick_bound(capacity, shape) < (1 if partial else n):
        return out, 0
    mark = capacity.mark()
    if nodes is not None:
        placed = _fill_scan(capacity, shape, n, nodes, out)
    elif shape.gpu and shape.mask.count * 8 >= capacity.n_visible:
        placed = _fill_buckets(capacity, shape, n, out)
    else:
        placed = _fill_scan(capacity, shape, n, shape.mask.indices, out)
    if placed < n and not partial:
        capacity.rollback(mark)
        return [], 0
    return out, placed


def _demand_fits_sums(capacity: Capacity, items: Items) -> bool:
    need = [0] * len(capacity.sums)
    for shape, n in items:
        for r, a in shape.vec:
            need[r] += a * n
    return all(need[r] <= capacity.sums[r] for r in range(len(need)) if need[r])


class DomainFit:
    """How well one domain of level ``t`` holds ``items``: (nodes needed, free GPUs, domain), the
    sort key of ``domain_order``, or None when its GPU levels cannot hold them. Worked out from the
    domain's count of nodes at each GPU level, never its nodes (this runs for every domain)."""

    def __init__(self, capacity: Capacity, t: int, items: Items) -> None:
        per_pod = [(shape.gpu, n) for shape, n in items if shape.gpu]
        self.gpus = sum(g * n for g, n in per_pod)
        self.dom_gpus = capacity.dom_gpus[t]
        self.dom_counts = capacity.dom_counts[t]
        # The fewest nodes that hold n pods of g GPUs take the domain's fullest GPU levels first.
        self.descending = [(n, range(capacity.max_level, g - 1, -1), g) for g, n in per_pod]

    def key(self, d: int) -> tuple[int, int, int] | None:
        free_gpus = self.dom_gpus[d]
        if free_gpus < self.gpus:
            return None
        counts = self.dom_counts[d]
        nodes = 0
        for n, levels, g in self.descending:
            rem = n
            for lvl in levels:
                c = counts[lvl]
                if c:
                    each = lvl // g
                    if c * each >= rem:
                        nodes += -(-rem // each)
                        break
                    nodes += c
                    rem -= c * each
            else:
                return None  # the domain's nodes cannot hold these pods
        return nodes, free_gpus, d


def domain_order(capacity: Capacity, t: int, items: Items) -> tuple[int, ...]:
    """The domains of level `t` whose GPU levels could hold `items`: those needing the fewest
    nodes first, then the tightest (fewest free GPUs), then by name."""
    # Only the GPU counts and the free room decide the order, so gangs that wait on one state (most
    # of a busy pass) share it.
    per_pod = tuple((shape.gpu, n) for shape, n in items if shape.gpu)
    key = (capacity.version, t, per_pod)
    memo = capacity.domain_orders
    found = memo.get(key)
    if found is not None:
        return found
    key_of = DomainFit(capacity, t, items).key
    candidates = [fit for d in range(len(capacity.dom_gpus[t])) if (fit := key_of(d)) is not None]
    candidates.sort()
    order = tuple(d for _, _, d in candidates)
    if len(memo) >= 4096:  # keys of states long gone
        memo.clear()
    memo[key] = order
    return order


def _place_in_domain(
    capacity: Capacity, items: Items, attempts: int, levels: Sequence[int]
) -> tuple[list[Assignment], Domain] | None:
    for t in levels:
        for d in domain_order(capacity, t, items)[:attempts]:
            members = capacity.dom_members[t][d]
            mark = capacity.mark()
            result: list[Assignment] = []
            for shape, n in items:
                out, placed = fill(capacity, shape, n, members)
                if placed < n:
                    capacity.rollback(mark)
                    break
                result.append(out)
            else:
                return result, (t, d)
    return None


def _place_within(capacity: Capacity, items: Items, within: Within) -> tuple[list[Assignment], Domain] | None:
    """Every item inside one domain of ``within`` (each candidate domain tried, best first)."""
    domains: Sequence[int]
    if within.value is not None:
        found = capacity.domain_of(within.key, within.value)
        if found is None:
            return None
        t, domains = found[0], (found[1],)
    else:
        level = capacity.level_of(within.key)
        if level is None:
            return None
        t, domains = level, domain_order(capacity, level, items)
    for d in domains:
        members = capacity.dom_members[t][d]
        result, failed_at = _fill_in_order(capacity, items, range(len(items)), members)
        if result is None and failed_at > 0:  # the same retry, smallest first, as cluster-wide
            result, _ = _fill_in_order(capacity, items, range(len(items) - 1, -1, -1), members)
        if result is not None:
            return result, (t, d)
    return None


def place(
    capacity: Capacity,
    items: Items,
    memo: FitMemo | None = None,
    topology_attempts: int = 8,
    within: Within | None = None,
    levels: Sequence[int] | None = None,
) -> tuple[list[Assignment], Domain | None] | None:
    """Place every item (sorted biggest first) or nothing, inside one domain of ``within`` if
    given, else inside one domain of the first of ``levels`` (default: the capacity's preferred
    ones) that can hold it, else anywhere. On success the room is booked and the result is one
    Assignment per item plus the topology domain (level, domain) it was kept in."""
    if memo is not None and memo.known_failure(items, within):
        return None
    for shape, n in items:
        if _quick_bound(capacity, shape) < n:
            if memo is not None:
                memo.record(items, shape, n)
            return None
    if len(items) > 1 and not _demand_fits_sums(capacity, items):
        if memo is not None:
            memo.record(items, None, 0)
        return None
    if within is not None:
        found = _place_within(capacity, items, within)
        if found is None and memo is not None:
            memo.record_within(items, within)
        return found
    total = sum(n for _, n in items)
    # The pass's default levels serve GPU gangs only; levels the caller names (a gang's own request,
    # core/topology.py levels_to_try) are tried whatever the gang needs.
    named = levels is not None
    levels = capacity.preferred if levels is None else levels
    if total > 1 and levels and (named or any(shape.gpu for shape, _ in items)):
        found = _place_in_domain(capacity, items, topology_attempts, levels)
        if found is not None:
            return found
    result, failed_at = _fill_in_order(capacity, items, range(len(items)))
    if result is None and failed_at > 0:
        # Biggest first is greedy: a mixed gang (an 8-GPU worker and a 60-CPU launcher) can fit
        # only the other way round. One retry, smallest first, before calling it a failure.
        result, _ = _fill_in_order(capacity, items, range(len(items) - 1, -1, -1))
    if result is None:
        if memo is not None:
            memo.record(items, items[0][0] if failed_at == 0 else None, items[failed_at][1])
        return None
    return result, None


def _fill_in_order(
    capacity: Capacity, items: Items, order: Iterable[int], nodes: Sequence[int] | None = None
) -> tuple[list[Assignment] | None, int]:
    """Fill the items in ``order`` (booked) on ``nodes`` (default: anywhere), all or nothing: (one
    Assignment per item in the items' own order, or None and the index of the item that did not fit)."""
    mark = capacity.mark()
    result: list[Assignment] = [[] for _ in items]
    for k in order:
        shape, n = items[k]
        out, placed = fill(capacity, shape, n, nodes)
        if placed < n:
            capacity.rollback(mark)
            return None, k
        result[k] = out
    return result, -1


def place_extra(
    capacity: Capacity, items: Items, domain: Domain | None, confined: bool = False
) -> list[Assignment]:
    """Place as many of each item as fit (elastic members), inside `domain` first (only there when
    `confined`: the gang requires it). Booked."""
    result: list[Assignment] = []
    for shape, n in items:
        out: Assignment = []
        placed = 0
        if domain is not None:
            out, placed = fill(capacity, shape, n, capacity.dom_members[domain[0]][domain[1]], partial=True)
        if placed < n and not confined:
            more, _ = fill(capacity, shape, n - placed, partial=True)
            out.extend(more)
        result.append(out)
    return result


def best_partial(
    capacity: Capacity, items: Items, nodes: Sequence[int] | None = None
) -> tuple[int, dict[int, int]]:
    """How many pods of `items` fit at most (greedy) on `nodes` (default: anywhere) and where:
    nothing stays booked."""
    mark = capacity.mark()
    per_node: dict[int, int] = {}
    placed = 0
    for shape, n in items:
        out, k = fill(capacity, shape, n, nodes, partial=True)
        placed += k
        for i, c in out:
            per_node[i] = per_node.get(i, 0) + c
    capacity.rollback(mark)
    return placed, per_node


def binding_resource(capacity: Capacity, shape: Shape, names: Sequence[str]) -> int:
    """The resource that limits `shape` most (fewest pods by free room), preferring GPUs on ties."""
    best = (1 << 62, 1, "")
    pick = GPU if shape.gpu else 0
    for r, a in shape.vec:
        key = (capacity.sums[r] // a, 0 if r == GPU else (2 if r == 0 else 1), names[r])
        if key < best:
            best, pick = key, r
    return pick
