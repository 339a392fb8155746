"""Preemption: which strictly lower-priority work to evict so that a gang fits.

Candidates (built once per pass):

- running gangs (members bound), as whole gangs; a gang running more members than its
  ``min_member`` first offers its elastic members above the minimum (youngest first) as a separate,
  cheaper candidate — evicting the rest of the gang always evicts those too;
- a running gang with disruption mode Single offers each of its pods as a candidate of its own:
  as many of them go as the preemptor needs, and the rest keeps running;
- non-gang pods in namespaces opted in to gang scheduling, one candidate each.

Never a candidate: ``preemptible`` False (on the gang or any of its pods), members running shorter
than ``preemption_min_runtime_seconds`` (or not started), work whose eviction would exceed the
``disruptions_allowed`` of a PodDisruptionBudget covering its pods (counted over the whole victim
set), work of equal or higher priority, or work not on a node the preemptor could use (for a preemptor
held to one topology domain: a node without its label; for a sliced one: a node without its slice
level's label).

The placement tried on the room the victims leave is the preemptor's own: inside one domain of its
required level, and, for a sliced gang, every slice inside one domain of its slice level
(``topology.place_sliced``) -- so victims are chosen for room its slices can use, not for GPUs
scattered where no slice fits.

Cost order: elastic slices first, then lowest priority, fewest GPUs, youngest (latest start), name.

Search: remove the cheapest candidates until the real placement succeeds (exponential then binary
search over the prefix length), keep that placement, then add back, most expensive first, every
removed candidate the placement does not need: one that touches no resource the placement uses on
its nodes is added back for free; otherwise the placement is re-run once more with that candidate
restored (a bounded number of times). Everything is journaled and rolled back: the search leaves
the capacity as it found it.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator
from dataclasses import dataclass, field

from controller.core import topology
from controller.core.capacity import GPU, Capacity, Vector
from controller.core.model import DisruptionMode, Gang, GangKey, Pod
from controller.core.placement import Assignment, Domain, Items, Within, place
from controller.core.state import PassState, is_live
from controller.core.topology import Slices

MAX_REPLACEMENTS = 16  # re-placements tried during add-back, per search

# Places items on a capacity (booked) as the preemptor's topology request says, or nothing.
Placer = Callable[[Capacity, Items], tuple[list[Assignment], Domain | None] | None]


def placer(attempts: int, within: Within | None, slices: Slices | None) -> Placer:
    """The preemptor's own placement: inside one domain of ``within``, in ``slices`` if sliced."""
    if slices is None:
        return lambda capacity, items: place(capacity, items, None, attempts, within)
    return lambda capacity, items: topology.place_sliced(capacity, items, slices, within)


@dataclass(slots=True, eq=False)
class Candidate:
    gang: GangKey | None
    namespace: str
    label: str  # "namespace/name" for messages
    priority: int
    uids: tuple[str, ...]
    bookings: tuple[tuple[int, Vector], ...]
    gpus: int
    youngest: float  # latest start among its pods
    elastic: bool
    budgets: tuple[tuple[str, int], ...]  # PodDisruptionBudget -> pods of this candidate it covers
    partner: Candidate | None = None  # the other half of a gang split into elastic slice + rest
    queue: str | None = None  # the gang's queue (Gang.queue)
    taken: bool = False  # already a victim of an earlier preemptor in this pass
    single: bool = False  # one pod of a gang with disruption mode Single: the rest keeps running
    sort_key: tuple[object, ...] = field(default=())


def _budgets(pods: list[Pod]) -> tuple[tuple[str, int], ...]:
    counts: dict[str, int] = {}
    for pod in pods:
        if pod.disruption_budget:
            counts[pod.disruption_budget] = counts.get(pod.disruption_budget, 0) + 1
    return tuple(sorted(counts.items()))


class Preemption:
    def __init__(self, state: PassState) -> None:
        self.state = state
        self.searches = 0
        self._candidates: list[Candidate] | None = None
        self._by_queue: dict[str, list[Candidate]] = {}
        self._gang_candidates: dict[GangKey, list[Candidate]] = {}
        self._queue_gangs: dict[str, list[Gang]] | None = None
        # (scope, demand) -> highest priority that failed
        self._failed: dict[tuple[str, Hashable], int] = {}

    # ---- candidates --------------------------------------------------------------------------

    def _old_enough(self, pods: list[Pod]) -> bool:
        min_runtime = self.state.config.preemption_min_runtime_seconds
        if min_runtime <= 0:
            return True
        now = self.state.now
        return all(p.started is not None and now - p.started >= min_runtime for p in pods if p.bound)

    def _candidate(self, gang: Gang | None, pods: list[Pod], priority: int, elastic: bool) -> Candidate:
        booked = self.state.booked
        requests = self.state.booked_requests
        # Released in uid order: the order room comes back in decides ties between equal nodes,
        # and it must not depend on the order the snapshot listed the members in.
        pods = sorted(pods, key=lambda p: p.uid)
        bookings = tuple((booked[p.uid], requests[p.uid]) for p in pods)
        gpus = sum(a for _, vec in bookings for r, a in vec if r == GPU)
        youngest = max((p.started if p.started is not None else p.created) for p in pods)
        first = pods[0]
        label = str(gang.key) if gang is not None else f"{first.namespace}/{first.name}"
        cand = Candidate(
            queue=gang.queue if gang is not None else None,
            gang=gang.key if gang is not None else None,
            namespace=first.namespace,
            label=label,
            priority=priority,
            uids=tuple(sorted(p.uid for p in pods)),
            bookings=bookings,
            gpus=gpus,
            youngest=youngest,
            elastic=elastic,
            budgets=_budgets(pods),
        )
        cand.sort_key = (0 if elastic else 1, priority, gpus, -youngest, label, cand.uids)
        return cand

    def _of_gang(self, gang: Gang) -> list[Candidate]:
        """The gang's candidates (built once per pass: every list shares them, and their ``taken``)."""
        found = self._gang_candidates.get(gang.key)
        if found is not None:
            return found
        state = self.state
        out: list[Candidate] = []
        self._gang_candidates[gang.key] = out
        pods = [m for m in gang.members if is_live(m) and m.uid in state.booked]
        if not pods or not any(m.bound for m in pods):
            return out
        if not gang.preemptible or not all(m.preemptible for m in pods) or not self._old_enough(pods):
            return out
        if gang.disruption_mode == DisruptionMode.SINGLE:
            for pod in sorted(pods, key=lambda p: p.uid):
                cand = self._candidate(gang, [pod], gang.priority, elastic=False)
                cand.single = True
                out.append(cand)
            return out
        extra = len(pods) - max(gang.min_member, 1)
        if extra > 0:
            by_age = sorted(
                pods, key=lambda p: (p.started if p.started is not None else p.created, p.name, p.uid)
            )
            rest = self._candidate(gang, by_age[:-extra], gang.priority, elastic=False)
            piece = self._candidate(gang, by_age[-extra:], gang.priority, elastic=True)
            rest.partner, piece.partner = piece, rest
            out.extend((piece, rest))
        else:
            out.append(self._candidate(gang, pods, gang.priority, elastic=False))
        return out

    def candidates(self) -> list[Candidate]:
        if self._candidates is not None:
            return self._candidates
        state = self.state
        out: list[Candidate] = []
        for gang in state.gangs:
            out.extend(self._of_gang(gang))
        opted_in = state.snapshot.opted_in_namespaces
        seen: set[str] = set()
        for pod in state.snapshot.pods:
            if (
                pod.group is None
                and pod.namespace in opted_in
                and pod.uid in state.booked
                and pod.uid not in seen
                and is_live(pod)
                and pod.preemptible
                and self._old_enough([pod])
            ):
                seen.add(pod.uid)
                out.append(self._candidate(None, [pod], pod.priority, elastic=False))
        out.sort(key=lambda c: c.sort_key)
        self._candidates = out
        return out

    def _of_queues(self, queues: Collection[str]) -> Iterable[Candidate]:
        """Candidates of gangs of these queues only, in cost order (built per queue, on demand)."""
        if self._queue_gangs is None:
            self._queue_gangs = {}
            for gang in self.state.gangs:
                if gang.queue is not None:
                    self._queue_gangs.setdefault(gang.queue, []).append(gang)
        lists = []
        for q in sorted(queues):
            found = self._by_queue.get(q)
            if found is None:
                found = [c for gang in self._queue_gangs.get(q, ()) for c in self._of_gang(gang)]
                found.sort(key=lambda c: c.sort_key)
                self._by_queue[q] = found
            if found:
                lists.append(found)
        return lists[0] if len(lists) == 1 else heapq.merge(*lists, key=lambda c: c.sort_key)

    # ---- search --------------------------------------------------------------------------------

    def search(
        self,
        gang: Gang,
        items: Items,
        signature: Hashable,
        eligible: Callable[[Candidate], bool] | None = None,
        scope: str = "",
        queues: Collection[str] | None = None,
        within: Within | None = None,
        slices: Slices | None = None,
    ) -> tuple[list[Candidate], list[Assignment]] | None:
        """Victims and the placement they make possible, or None. Leaves the capacity unchanged.

        ``eligible`` (queues) replaces the "strictly lower priority" test; it is asked in cost order,
        once per candidate that passes every other test, as far down the order as the search goes.
        ``scope`` keeps its failures apart. ``queues``: only candidates of these queues (checked
        first, it is cheap). ``within``: the preemptor must be placed inside one domain of it, so
        only victims on nodes of some domain of it count (and the placement stays in one).
        ``slices``: every slice of the preemptor inside one domain of its level, so only victims on
        nodes of that level count. ``signature`` keys the failures: the demand, its ``within`` and
        its slices."""
        capacity = self.state.capacity
        memo_key = (scope, signature)
        failed = self._failed.get(memo_key)
        if failed is not None and gang.priority <= failed:
            return None
        usable = self._usable_nodes(items, within, slices)
        cands = Eligible(self._eligible(gang, usable, eligible, queues))
        need_gpus = sum(shape.gpu * n for shape, n in items)
        found = None
        if cands.extend_to(1) and cands.cover(need_gpus - capacity.sums[GPU]):
            self.searches += 1
            place_as_asked = placer(self.state.config.topology_attempts, within, slices)
            found = self._search(capacity, items, cands, need_gpus, place_as_asked)
        if found is None:  # it fails again for this demand at this priority or lower
            self._failed[memo_key] = max(gang.priority, failed if failed is not None else gang.priority)
        return found

    def _usable_nodes(self, items: Items, within: Within | None, slices: Slices | None) -> bytearray:
        """Per node: may some pod of ``items`` go there (constraints, visibility, the topology
        domains it must stay inside)?"""
        capacity = self.state.capacity
        usable = bytearray(len(capacity.free))
        slice_of: list[int] | None = None
        keys = {key for key, _ in slices.parts} if slices is not None else set()
        if len(keys) == 1 and None not in keys:  # every slice held to one level: nodes without it never help
            slice_level = capacity.level_of(str(keys.pop()))
            if slice_level is None:
                return usable  # no node carries the slice level: nowhere
            slice_of = capacity.dom_of[slice_level]
        domain_of: list[int] | None = None
        only = -1  # the one domain allowed, or -1: any
        if within is not None:
            level = capacity.level_of(within.key)
            if level is None:
                return usable  # no node carries the label: nowhere
            domain_of = capacity.dom_of[level]
            if within.value is not None:
                found = capacity.domain_of(within.key, within.value)
                if found is None:
                    return usable
                only = found[1]
        for shape, _ in items:
            flags = shape.mask.flags
            for i in shape.mask.indices:
                if flags[i] and capacity.visible[i]:
                    if domain_of is not None and (domain_of[i] < 0 or (only >= 0 and domain_of[i] != only)):
                        continue
                    if slice_of is not None and slice_of[i] < 0:
                        continue
                    usable[i] = 1
        return usable

    def _eligible(
        self,
        gang: Gang,
        usable: bytearray,
        eligible: Callable[[Candidate], bool] | None,
        queues: Collection[str] | None,
    ) -> Iterator[Candidate]:
        """The candidates that may go, in cost order, within the disruption budgets."""
        allowed = self.state.snapshot.disruptions_allowed
        spent: dict[str, int] = {}
        accepted: set[int] = set()
        for cand in self.candidates() if queues is None else self._of_queues(queues):
            if cand.taken or (eligible is None and cand.priority >= gang.priority):
                continue
            if queues is not None and cand.queue not in queues:
                continue
            partner = cand.partner
            if cand.elastic:
                halves = cand.bookings + (partner.bookings if partner is not None else ())
                if not any(usable[i] for i, _ in halves):
                    continue
            else:
                if not any(usable[i] for i, _ in cand.bookings):
                    continue
                if partner is not None and not partner.taken and id(partner) not in accepted:
                    continue  # never evict a gang's core without its elastic members
            if any(spent.get(b, 0) + n > allowed.get(b, 0) for b, n in cand.budgets):
                continue
            if eligible is not None and not eligible(cand):
                continue
            for b, n in cand.budgets:
                spent[b] = spent.get(b, 0) + n
            accepted.add(id(cand))
            yield cand

    def _search(
        self, capacity: Capacity, items: Items, cands: Eligible, need_gpus: int, place_as_asked: Placer
    ) -> tuple[list[Candidate], list[Assignment]] | None:
        """The shortest prefix of ``cands`` whose eviction lets ``items`` fit, then the add-back."""
        base = capacity.mark()
        prefixes = _Prefixes(capacity, items, cands, place_as_asked)
        high = prefixes.shortest(_first_prefix(capacity, cands, need_gpus))
        placed = None
        if high is not None:
            prefixes.evict(high)
            placed = place_as_asked(capacity, items)
        if placed is None:  # no prefix fits (placed is never None after a prefix that fits)
            capacity.rollback(base)
            return None
        chosen, assignments = self._add_back(capacity, items, cands.found[:high], placed[0], place_as_asked)
        capacity.rollback(base)
        return chosen, assignments

    def _add_back(
        self,
        capacity: Capacity,
        items: Items,
        removed: list[Candidate],
        assignments: list[Assignment],
        place_as_asked: Placer,
    ) -> tuple[list[Candidate], list[Assignment]]:
        """Restore every removed candidate the placement can do without (most expensive first)."""

        def used_resources(assignments: list[Assignment]) -> dict[int, set[int]]:
            used: dict[int, set[int]] = {}
            for (shape, _), assignment in zip(items, assignments, strict=True):
                for i, _ in assignment:
                    used.setdefault(i, set()).update(r for r, _ in shape.vec)
            return used

        used = used_resources(assignments)
        victim = {id(c): True for c in removed}
        replacements = 0
        for cand in reversed(removed):
            partner = cand.partner
            if cand.elastic and partner is not None and victim.get(id(partner), False):
                continue  # the rest of its gang goes: the elastic members go with it
            mark = capacity.mark()
            for i, vec in cand.bookings:
                capacity.book(i, vec)
            free = capacity.free
            if all(free[i][r] >= 0 for i, _ in cand.bookings for r in used.get(i, ())):
                victim[id(cand)] = False
                continue
            moved = None
            if replacements < MAX_REPLACEMENTS and capacity.sums[GPU] >= cand.gpus:
                replacements += 1
                for (shape, _), assignment in zip(items, assignments, strict=True):
                    for i, n in assignment:
                        capacity.unbook(i, shape.vec, n)
                moved = place_as_asked(capacity, items)
            if moved is not None:
                assignments = moved[0]
                used = used_resources(assignments)
                victim[id(cand)] = False
            else:
                capacity.rollback(mark)
        # An elastic slice whose rest stays may go alone; a rest always takes its slice along
        # (slices sort before every rest, so a removed rest's slice was removed too).
        return [c for c in removed if victim[id(c)]], assignments


class Eligible:
    """The eligible candidates in cost order, taken from ``stream`` only as far as asked: a search
    that fits after a few victims does not judge the thousands behind them."""

    def __init__(self, stream: Iterator[Candidate]) -> None:
        self.stream = stream
        self.found: list[Candidate] = []
        self.gpus = 0  # of the candidates found
        self.exhausted = False

    def extend_to(self, k: int) -> int:
        """Find candidates until there are ``k`` (or no more); how many there are."""
        found = self.found
        while len(found) < k and not self.exhausted:
            cand = next(self.stream, None)
            if cand is None:
                self.exhausted = True
            else:
                found.append(cand)
                self.gpus += cand.gpus
        return len(found)

    def cover(self, gpus: int) -> bool:
        """Find candidates until they hold at least ``gpus`` GPUs; do they (all of them, at worst)?"""
        while self.gpus < gpus and not self.exhausted:
            self.extend_to(len(self.found) + 1)
        return self.gpus >= gpus


def _first_prefix(capacity: Capacity, cands: Eligible, need_gpus: int) -> int:
    """The shortest prefix of ``cands`` whose GPUs could cover what is missing (no shorter one can
    let the gang fit), at least 1. ``search`` found candidates enough to cover it already."""
    found = cands.found
    first = 1
    if need_gpus:
        deficit = need_gpus - capacity.sums[GPU]
        got = 0
        while first < len(found) and got + found[first - 1].gpus < deficit:
            got += found[first - 1].gpus
            first += 1
    return first


class _Prefixes:
    """The capacity with the first k candidates (of the cost order) evicted, k moving up and down."""

    def __init__(self, capacity: Capacity, items: Items, cands: Eligible, place_as_asked: Placer) -> None:
        self.capacity = capacity
        self.items = items
        self.cands = cands
        self.place_as_asked = place_as_asked
        self.current = 0  # candidates evicted now

    def evict(self, k: int) -> None:
        """Evict exactly the first ``k`` candidates (journaled: the caller rolls back)."""
        capacity = self.capacity
        found = self.cands.found
        if k > self.current:
            for cand in found[self.current : k]:
                for i, vec in cand.bookings:
                    capacity.unbook(i, vec)
        else:
            for cand in found[k : self.current]:
                for i, vec in cand.bookings:
                    capacity.book(i, vec)
        self.current = k

    def fits(self, k: int) -> bool:
        self.evict(k)
        mark = self.capacity.mark()
        ok = self.place_as_asked(self.capacity, self.items) is not None
        self.capacity.rollback(mark)
        return ok

    def shortest(self, first: int) -> int | None:
        """The shortest prefix that fits: doubling from ``first``, then bisecting; None if even
        all candidates are not enough."""
        low, high = 0, -1
        k = first
        while not self.fits(k):
            low = k
            longer = max(k + 1, k * 2)
            found = self.cands.extend_to(longer)
            if k >= found:
                return None  # k was every candidate there is
            k = min(found, longer)
        high = k
        while high - low > 1:
            mid = (low + high) // 2
            if self.fits(mid):
                high = mid
            else:
                low = mid
        return high
