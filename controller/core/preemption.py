"""Whole-gang preemption: which strictly lower-priority work to evict so that a gang fits.

Candidates (built once per pass):

- running gangs (members bound), as whole gangs; a gang running more members than its
  ``min_member`` first offers its elastic members above the minimum (youngest first) as a separate,
  cheaper candidate — evicting the rest of the gang always evicts those too;
- non-gang pods in namespaces opted in to gang scheduling, one candidate each.

Never a candidate: ``preemptible`` False (on the gang or any of its pods), members running shorter
than ``preemption_min_runtime_seconds`` (or not started), work whose eviction would exceed the
``disruptions_allowed`` of a PodDisruptionBudget covering its pods (counted over the whole victim
set), work of equal or higher priority, or work not on a node the preemptor could use.

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
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from controller.core.capacity import GPU, Capacity, Vector
from controller.core.model import Gang, GangKey, Pod
from controller.core.placement import Assignment, Items, place
from controller.core.state import PassState, is_live

MAX_REPLACEMENTS = 16  # re-placements tried during add-back, per search


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
        self._failed: dict[tuple[str, tuple[tuple[int, int], ...]], int] = {}

    # ---- candidates --------------------------------------------------------------------------

    def _old_enough(self, pods: list[Pod]) -> bool:
        min_runtime = self.state.config.preemption_min_runtime_seconds
        if min_runtime <= 0:
            return True
        now = self.state.now
        return all(p.started is not None and now - p.started >= min_runtime for p in pods if p.bound)

    def _candidate(self, gang: Gang | None, pods: list[Pod], priority: int, elastic: bool) -> Candidate:
        booked = self.state.booked
        # Released in uid order: the order room comes back in decides ties between equal nodes,
        # and it must not depend on the order the snapshot listed the members in.
        pods = sorted(pods, key=lambda p: p.uid)
        bookings = tuple(booked[p.uid] for p in pods)
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
        st = self.state
        out: list[Candidate] = []
        self._gang_candidates[gang.key] = out
        pods = [m for m in gang.members if is_live(m) and m.uid in st.booked]
        if not pods or not any(m.bound for m in pods):
            return out
        if not gang.preemptible or not all(m.preemptible for m in pods) or not self._old_enough(pods):
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
        st = self.state
        out: list[Candidate] = []
        for gang in st.gangs:
            out.extend(self._of_gang(gang))
        opted_in = st.snapshot.opted_in_namespaces
        seen: set[str] = set()
        for pod in st.snapshot.pods:
            if (
                pod.group is None
                and pod.namespace in opted_in
                and pod.uid in st.booked
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
        signature: tuple[tuple[int, int], ...],
        eligible: Callable[[Candidate], bool] | None = None,
        scope: str = "",
        queues: Collection[str] | None = None,
    ) -> tuple[list[Candidate], list[Assignment]] | None:
        """Victims and the placement they make possible, or None. Leaves the capacity unchanged.

        ``eligible`` (queues) replaces the "strictly lower priority" test; it is asked in cost order,
        once per candidate that passes every other test. ``scope`` keeps its failures apart.
        ``queues``: only candidates of these queues (checked first, it is cheap)."""
        st = self.state
        cap = st.capacity
        memo_key = (scope, signature)
        failed = self._failed.get(memo_key)
        if failed is not None and gang.priority <= failed:
            return None
        usable = bytearray(len(cap.free))
        for shape, _ in items:
            flags = shape.mask.flags
            for i in shape.mask.indices:
                if flags[i] and cap.visible[i]:
                    usable[i] = 1
        allowed = st.snapshot.disruptions_allowed
        spent: dict[str, int] = {}
        cands: list[Candidate] = []
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
            cands.append(cand)
        need_gpus = sum(shape.gpu * n for shape, n in items)
        if not cands or need_gpus > cap.sums[GPU] + sum(c.gpus for c in cands):
            self._failed[memo_key] = max(gang.priority, failed if failed is not None else gang.priority)
            return None
        self.searches += 1
        found = self._search(cap, items, cands, need_gpus)
        if found is None:
            self._failed[memo_key] = max(gang.priority, failed if failed is not None else gang.priority)
        return found

    def _search(
        self, cap: Capacity, items: Items, cands: list[Candidate], need_gpus: int
    ) -> tuple[list[Candidate], list[Assignment]] | None:
        attempts = self.state.config.topology_attempts
        base = cap.mark()
        current = 0

        def set_prefix(k: int) -> None:
            nonlocal current
            if k > current:
                for cand in cands[current:k]:
                    for i, vec in cand.bookings:
                        cap.unbook(i, vec)
            else:
                for cand in cands[k:current]:
                    for i, vec in cand.bookings:
                        cap.book(i, vec)
            current = k

        def fits(k: int) -> bool:
            set_prefix(k)
            mark = cap.mark()
            ok = place(cap, items, None, attempts) is not None
            cap.rollback(mark)
            return ok

        total = len(cands)
        first = 1
        if need_gpus:
            deficit = need_gpus - cap.sums[GPU]
            got = 0
            while first < total and got + cands[first - 1].gpus < deficit:
                got += cands[first - 1].gpus
                first += 1
        low, high = 0, -1
        k = first
        while True:
            if fits(k):
                high = k
                break
            low = k
            if k >= total:
                cap.rollback(base)
                return None
            k = min(total, max(k + 1, k * 2))
        while high - low > 1:
            mid = (low + high) // 2
            if fits(mid):
                high = mid
            else:
                low = mid
        set_prefix(high)
        placed = place(cap, items, None, attempts)
        if placed is None:  # pragma: no cover - fits(high) just succeeded on this very state
            cap.rollback(base)
            return None
        chosen, assignments = self._add_back(cap, items, cands[:high], placed[0])
        cap.rollback(base)
        return chosen, assignments

    def _add_back(
        self, cap: Capacity, items: Items, removed: list[Candidate], assignments: list[Assignment]
    ) -> tuple[list[Candidate], list[Assignment]]:
        """Restore every removed candidate the placement can do without (most expensive first)."""
        attempts = self.state.config.topology_attempts

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
            mark = cap.mark()
            for i, vec in cand.bookings:
                cap.book(i, vec)
            free = cap.free
            if all(free[i][r] >= 0 for i, _ in cand.bookings for r in used.get(i, ())):
                victim[id(cand)] = False
                continue
            moved = None
            if replacements < MAX_REPLACEMENTS and cap.sums[GPU] >= cand.gpus:
                replacements += 1
                for (shape, _), assignment in zip(items, assignments, strict=True):
                    for i, n in assignment:
                        cap.unbook(i, shape.vec, n)
                moved = place(cap, items, None, attempts)
            if moved is not None:
                assignments = moved[0]
                used = used_resources(assignments)
                victim[id(cand)] = False
            else:
                cap.rollback(mark)
        # An elastic slice whose rest stays may go alone; a rest always takes its slice along
        # (slices sort before every rest, so a removed rest's slice was removed too).
        return [c for c in removed if victim[id(c)]], assignments
