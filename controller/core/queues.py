"""Queues: quotas, limits, hierarchical fair share and the order across queues. Pure.

A queue has an optional parent (department -> team) and, per resource, a quota (guaranteed), a
limit (never exceeded; None: unlimited) and an over-quota weight. Gangs belong to leaf queues
(``Gang.queue``); a queue's usage is its subtree's.

- **usage** (allocated): requests of gang members that hold room -- bound, nominated, or admitted
  and not yet bound; **requested**: usage plus every gated member still waiting.
- **fair share**, per resource, by hierarchical water-filling: the capacity (allocatable of Ready,
  schedulable nodes minus what pods outside every queue use) is split among the root queues, then
  each queue's share among its children, the same way at every level: first the quotas (each
  capped at what the queue requests and at its limit; scaled down by quota when they exceed the
  total), then what is left, in proportion to the over-quota weights, each capped at its request
  and limit, re-spread until nothing is left or nobody can take more.
- **order**: gangs with a queue and gated members waiting are re-ranked among the places they
  hold in today's order (so a gang without a queue, or with nothing waiting, keeps its place):
  from the root down, the child queue furthest below its fair share goes next (its usage over
  its fair share, on the resource where that ratio is highest; ties by its next gang's priority,
  then age), its gangs by priority, then age. Each gang taken is assumed admitted for the rest of
  the ordering.
- **limits**: a gang is admitted only if its queue and every ancestor stay within their limits.
- **reclaim**: a gang whose queue stays within its quota may evict whole gangs of queues using
  more than their fair share, never taking a victim queue -- or an ancestor it does not share
  with the reclaimer -- below its quota.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from controller.core import messages as msg
from controller.core.model import Gang, GangKey, Pod, Queue, QueueReport, QueueResource, Reason
from controller.core.ordering import gang_order

Amounts = dict[str, int]
NO_LIMITS = QueueResource()
INFINITE = math.inf


def add(into: Amounts, requests: Mapping[str, int], sign: int = 1) -> None:
    for name, amount in requests.items():
        if name != "pods" and amount:
            into[name] = into.get(name, 0) + sign * amount


def total_requests(pods: Iterable[Pod]) -> Amounts:
    out: Amounts = {}
    for pod in pods:
        add(out, pod.requests)
    return out


def water_fill(total: float, claims: Sequence[tuple[float, float]]) -> list[float]:
    """Split ``total`` among claims (cap, weight) in proportion to weight, none beyond its cap;
    what a capped claim cannot take is re-spread among the others."""
    shares = [0.0] * len(claims)
    active = [i for i, (cap, weight) in enumerate(claims) if cap > 0 and weight > 0]
    left = float(total)
    while active and left > 1e-9:
        weights = sum(claims[i][1] for i in active)
        capped = [i for i in active if claims[i][0] - shares[i] <= left * claims[i][1] / weights]
        if not capped:
            for i in active:
                shares[i] += left * claims[i][1] / weights
            break
        for i in capped:
            left -= claims[i][0] - shares[i]
            shares[i] = claims[i][0]
        active = [i for i in active if i not in capped]
    return shares


class QueueTree:
    """The hierarchy: children per parent, and why a queue cannot take gangs (if so)."""

    def __init__(self, queues: Mapping[str, Queue]) -> None:
        self.queues = dict(queues)
        self.children: dict[str | None, list[str]] = {}
        self.broken: dict[str, str] = {}
        for name in sorted(self.queues):
            parent = self.queues[name].parent or None
            self.children.setdefault(parent, []).append(name)
        for name in sorted(self.queues):
            seen = {name}
            parent = self.queues[name].parent or None
            while parent is not None:
                if parent not in self.queues:
                    self.broken[name] = msg.queue_parent_missing(name, parent)
                    break
                if parent in seen:
                    self.broken[name] = msg.queue_loop(name)
                    break
                seen.add(parent)
                parent = self.queues[parent].parent or None
        # Queues in a loop or under a missing parent are left out of the tree walk.
        self.roots = [q for q in self.children.get(None, []) if q not in self.broken]

    def path(self, name: str) -> list[str]:
        """The queue and its ancestors, leaf first."""
        out = []
        current: str | None = name
        while current is not None:
            out.append(current)
            current = self.queues[current].parent or None
        return out

    def resource(self, name: str, resource: str) -> QueueResource:
        return self.queues[name].resources.get(resource, NO_LIMITS)

    def kids(self, name: str | None) -> list[str]:
        return self.children.get(name, [])

    def why_not(self, name: str) -> str | None:
        """Why gangs cannot go to queue ``name``, or None."""
        if name not in self.queues:
            return msg.queue_not_found(name)
        if name in self.broken:
            return self.broken[name]
        if self.kids(name):
            return msg.queue_not_leaf(name, self.kids(name))
        return None


def fair_shares(
    tree: QueueTree, requested: Mapping[str, Amounts], capacity: Mapping[str, int], resources: Iterable[str]
) -> dict[str, dict[str, float]]:
    """Queue -> resource -> fair share, by hierarchical water-filling (see the module doc)."""
    out: dict[str, dict[str, float]] = {name: {} for name in tree.queues}
    for resource in sorted(resources):
        # What each queue can use at most: its request, capped by its limit and its children's.
        claim: dict[str, float] = {}

        def claim_of(q: str, resource: str = resource, claim: dict[str, float] = claim) -> float:
            kids = tree.kids(q)
            want = sum(claim_of(k) for k in kids) if kids else float(requested.get(q, {}).get(resource, 0))
            limit = tree.resource(q, resource).limit
            claim[q] = want if limit is None else min(want, float(limit))
            return claim[q]

        for root in tree.roots:
            claim_of(root)
        pending: list[tuple[list[str], float]] = [(tree.roots, float(capacity.get(resource, 0)))]
        while pending:
            siblings, total = pending.pop()
            if not siblings:
                continue
            caps = [claim[q] for q in siblings]
            quotas = [float(tree.resource(q, resource).quota) for q in siblings]
            first = water_fill(
                total, [(min(quota, cap), quota) for quota, cap in zip(quotas, caps, strict=True)]
            )
            rest = total - sum(first)
            weights = [tree.resource(q, resource).over_quota_weight for q in siblings]
            second = water_fill(
                rest, [(cap - got, w) for cap, got, w in zip(caps, first, weights, strict=True)]
            )
            for q, a, b in zip(siblings, first, second, strict=True):
                out[q][resource] = a + b
                pending.append((tree.kids(q), a + b))
    return out


class QueueBook:
    """Queue state for one pass: usage (changing as the pass admits and evicts), fair shares."""

    def __init__(
        self, queues: Mapping[str, Queue], gangs: Sequence[Gang], free: Mapping[str, int], gpu_resource: str
    ) -> None:
        """``free``: the free room of Ready, schedulable nodes (what every pod leaves)."""
        self.tree = QueueTree(queues)
        self.gpu_resource = gpu_resource
        self.waiting: dict[GangKey, Amounts] = {}  # what each queued gang still asks for
        self.queue_of: dict[GangKey, str] = {}  # gangs of a valid leaf queue
        self.holding: set[GangKey] = set()  # queued gangs with members that hold room
        holding_of: dict[str, Amounts] = {}
        asking_of: dict[str, Amounts] = {}
        valid: dict[str, bool] = {}
        for gang in gangs:
            queue = gang.queue
            if queue is None:
                continue
            ok = valid.get(queue)
            if ok is None:
                ok = valid[queue] = self.tree.why_not(queue) is None
            if not ok:
                continue
            self.queue_of[gang.key] = queue
            holding = holding_of.setdefault(queue, {})
            asking: Amounts = {}
            admitted = gang.admitted
            held = False
            for pod in gang.members:
                phase = pod.phase
                if phase == "Succeeded" or phase == "Failed" or pod.terminating:  # noqa: PLR1714
                    continue
                if pod.node_name is not None or pod.nominated_node is not None or pod.uid in admitted:
                    add(holding, pod.requests)
                    held = True
                elif pod.gated:
                    add(asking, pod.requests)
            self.waiting[gang.key] = asking
            if held:
                self.holding.add(gang.key)
            add(asking_of.setdefault(queue, {}), asking)
        self.leaves_in_use = frozenset(self.queue_of.values())
        # Subtrees: each leaf's sums added to it and its ancestors once.
        self.usage: dict[str, Amounts] = {name: {} for name in self.tree.queues}
        self.requested: dict[str, Amounts] = {name: {} for name in self.tree.queues}
        for leaf in sorted(set(holding_of) | set(asking_of)):
            for q in self.tree.path(leaf):
                add(self.usage[q], holding_of.get(leaf, {}))
                add(self.requested[q], holding_of.get(leaf, {}))
                add(self.requested[q], asking_of.get(leaf, {}))
        # Declared resources take part in fairness; the GPU always does.
        names = {gpu_resource}
        for spec in self.tree.queues.values():
            names.update(spec.resources)
        self.resources = sorted(names - {"pods"})
        # What queues share: the free room plus what queued gangs hold themselves.
        self.capacity: Amounts = {name: max(0, amount) for name, amount in free.items()}
        for root in self.tree.roots:
            add(self.capacity, self.usage[root])
        self.fair = fair_shares(self.tree, self.requested, self.capacity, self.resources)

    # ---- membership --------------------------------------------------------------------------------

    def blocked(self, gang: Gang) -> tuple[Reason, str] | None:
        """A gang naming a queue that cannot take it waits, saying why."""
        if gang.queue is None:
            return None
        why = self.tree.why_not(gang.queue)
        return None if why is None else (Reason.QUEUE_NOT_FOUND, why)

    def queue(self, key: GangKey | None) -> str | None:
        return None if key is None else self.queue_of.get(key)

    # ---- limits ----------------------------------------------------------------------------------

    def over_limit(self, queue: str, request: Mapping[str, int]) -> str | None:
        """Why ``request`` would take ``queue`` or an ancestor beyond a limit, or None."""
        for q in self.tree.path(queue):
            used = self.usage[q]
            for resource, amount in sorted(request.items()):
                limit = self.tree.resource(q, resource).limit
                if resource == "pods" or amount <= 0 or limit is None:
                    continue
                if used.get(resource, 0) + amount > limit:
                    return msg.queue_limit(q, queue, resource, used.get(resource, 0), limit, amount)
        return None

    def within_limit(self, queue: str, base: Mapping[str, int], pods: Sequence[Pod]) -> list[Pod]:
        """The longest prefix of ``pods`` that fits under the limits on top of ``base``."""
        request = dict(base)
        out = []
        for pod in pods:
            add(request, pod.requests)
            if self.over_limit(queue, request) is not None:
                break
            out.append(pod)
        return out

    def book(self, queue: str, request: Mapping[str, int], sign: int = 1) -> None:
        for q in self.tree.path(queue):
            add(self.usage[q], request, sign)

    # ---- order -----------------------------------------------------------------------------------

    def _ratio(self, queue: str, usage: Mapping[str, int]) -> float:
        """How far the queue is from its fair share: usage over share on its most used resource."""
        worst = 0.0
        fair = self.fair[queue]
        for resource in self.resources:
            used = usage.get(resource, 0)
            if used <= 0:
                continue
            share = fair.get(resource, 0.0)
            ratio = used / share if share > 0 else INFINITE
            worst = max(worst, ratio)
        return worst

    def order(self, gangs: Sequence[Gang]) -> list[Gang]:
        """``gangs`` (in today's order) with queued gangs re-ranked among their places by fairness."""
        per_queue: dict[str, list[Gang]] = {}
        places = []
        waiting = self.waiting
        for i, gang in enumerate(gangs):
            q = self.queue_of.get(gang.key)
            # Only gangs with members waiting take turns; a running gang keeps its place.
            if q is not None and waiting.get(gang.key):
                per_queue.setdefault(q, []).append(gang)
                places.append(i)
        if not places:
            return list(gangs)
        order_of = {gang.key: gang_order(gang) for lst in per_queue.values() for gang in lst}
        projected = {q: dict(amounts) for q, amounts in self.usage.items()}
        heads = dict.fromkeys(per_queue, 0)
        # Per queue with gangs left in its subtree: its next gang, and its rank among its siblings
        # (how far below its fair share, then that gang's priority and age).
        next_of: dict[str, Gang | None] = {}
        rank: dict[str, tuple[float, tuple[int, float, str, str], str] | None] = {}
        kids = self.tree.kids
        ratio = self._ratio

        def pick(candidates: Sequence[str]) -> str | None:
            best = None
            for q in candidates:
                key = rank.get(q)
                if key is not None and (best is None or key < best):
                    best = key
            return None if best is None else best[2]

        def refresh(q: str) -> None:
            children = kids(q)
            if children:
                best = pick(children)
                head = None if best is None else next_of[best]
            else:
                lst = per_queue.get(q, [])
                k = heads.get(q, 0)
                head = lst[k] if k < len(lst) else None
            next_of[q] = head
            rank[q] = None if head is None else (ratio(q, projected[q]), order_of[head.key], q)

        valid = [q for q in self.tree.queues if q not in self.tree.broken]
        for q in sorted(valid, key=lambda name: (-len(self.tree.path(name)), name)):  # leaves up
            refresh(q)
        paths = {leaf: self.tree.path(leaf) for leaf in per_queue}
        out = list(gangs)
        for place in places:
            leaf = pick(self.tree.roots)
            while leaf is not None and kids(leaf):
                leaf = pick(kids(leaf))
            assert leaf is not None  # a queued gang is left, so some leaf has one
            gang = per_queue[leaf][heads[leaf]]
            heads[leaf] += 1
            out[place] = gang
            asking = self.waiting.get(gang.key)
            for q in paths[leaf]:
                if asking:
                    add(projected[q], asking)
                refresh(q)
        return out

    # ---- reclaim ---------------------------------------------------------------------------------

    def may_reclaim(self, queue: str, request: Mapping[str, int]) -> bool:
        """The queue stays within its quota on every resource it declares, this gang included."""
        declared = self.tree.queues[queue].resources
        counted = [r for r, a in request.items() if a > 0 and r in declared]
        if not counted:
            return False
        used = self.usage[queue]
        return all(used.get(r, 0) + request[r] <= declared[r].quota for r in counted)

    def reclaim_filter(self, reclaimer: str) -> VictimFilter:
        return VictimFilter(self, reclaimer)

    def report(self, admitted: set[GangKey], waiting: set[GangKey]) -> dict[str, QueueReport]:
        admitted_n = dict.fromkeys(self.tree.queues, 0)
        waiting_n = dict.fromkeys(self.tree.queues, 0)
        for key, queue in self.queue_of.items():
            counts = admitted_n if key in admitted else waiting_n if key in waiting else None
            if counts is not None:
                for q in self.tree.path(queue):
                    counts[q] += 1
        return {
            q: QueueReport(
                allocated=dict(sorted(self.usage[q].items())),
                requested=dict(sorted(self.requested[q].items())),
                fair_share={r: self.fair[q].get(r, 0.0) for r in self.resources},
                admitted_gangs=admitted_n[q],
                waiting_gangs=waiting_n[q],
            )
            for q in sorted(self.tree.queues)
        }


class VictimFilter:
    """Which gangs a reclaimer may evict, in cost order: of other queues above their fair share, as
    long as no victim queue (nor an ancestor the reclaimer does not share) drops below its quota."""

    def __init__(self, book: QueueBook, reclaimer: str) -> None:
        self.book = book
        self.shared = set(book.tree.path(reclaimer))
        self.taken: dict[str, Amounts] = {}
        # Leaf queues that may give room back: not the reclaimer's, above their fair share.
        self.queues = frozenset(
            q for q in book.leaves_in_use if q not in self.shared and self._above_fair_share(q)
        )

    def room(self, resource: str) -> int:
        """At most this much of ``resource`` can be reclaimed (what victim queues hold above quota)."""
        book = self.book
        return sum(
            max(0, book.usage[q].get(resource, 0) - book.tree.resource(q, resource).quota)
            for q in self.queues
        )

    def accepts(self, queue: str | None, request: Mapping[str, int]) -> bool:
        book = self.book
        if queue is None or queue not in self.queues:
            return False
        branch = [q for q in book.tree.path(queue) if q not in self.shared]
        for q in branch:
            used = book.usage[q]
            taken = self.taken.get(q, {})
            for resource, amount in request.items():
                spec = book.tree.resource(q, resource)
                if amount > 0 and resource in book.tree.queues[q].resources:
                    left = used.get(resource, 0) - taken.get(resource, 0) - amount
                    if left < spec.quota:
                        return False
        for q in branch:
            add(self.taken.setdefault(q, {}), request)
        return True

    def _above_fair_share(self, queue: str) -> bool:
        fair = self.book.fair[queue]
        used = self.book.usage[queue]
        return any(used.get(r, 0) > fair.get(r, 0.0) + 1e-9 for r in self.book.resources)
