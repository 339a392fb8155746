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
- **order**: gangs with a queue are re-ranked among the places they hold in today's order (so a
  gang without a queue keeps its place): from the root down, the child queue furthest below its
  fair share goes next (its usage over its fair share, on the resource where that ratio is
  highest; ties by its next gang's priority, then age), its gangs by priority, then age. Each gang
  taken is assumed admitted for the rest of the ordering.
- **limits**: a gang is admitted only if its queue and every ancestor stay within their limits.
- **reclaim**: a gang whose queue stays within its quota may evict whole gangs of queues using
  more than their fair share, never taking a victim queue -- or an ancestor it does not share
  with the reclaimer -- below its quota.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from controller.core import messages as msg
from controller.core.model import Gang, GangKey, Pod, Queue, QueueReport, QueueResource, Reason, Snapshot
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

    def __init__(self, snapshot: Snapshot, gangs: Sequence[Gang], gpu_resource: str) -> None:
        self.tree = QueueTree(snapshot.queues)
        self.gpu_resource = gpu_resource
        self.usage: dict[str, Amounts] = {name: {} for name in self.tree.queues}
        self.requested: dict[str, Amounts] = {name: {} for name in self.tree.queues}
        self.waiting: dict[GangKey, Amounts] = {}  # what each queued gang still asks for
        self.queue_of: dict[GangKey, str] = {}  # gangs of a valid leaf queue
        queued_uids: set[str] = set()
        for gang in gangs:
            if gang.queue is None or self.tree.why_not(gang.queue) is not None:
                continue
            self.queue_of[gang.key] = gang.queue
            holding: Amounts = {}
            asking: Amounts = {}
            for pod in gang.members:
                queued_uids.add(pod.uid)
                if pod.finished or pod.terminating:
                    continue
                if pod.holds_capacity or pod.uid in gang.admitted:
                    add(holding, pod.requests)
                elif pod.gated:
                    add(asking, pod.requests)
            self.waiting[gang.key] = asking
            for q in self.tree.path(gang.queue):
                add(self.usage[q], holding)
                add(self.requested[q], holding)
                add(self.requested[q], asking)
        # Declared resources take part in fairness; the GPU always does.
        names = {gpu_resource}
        for queue in self.tree.queues.values():
            names.update(queue.resources)
        self.resources = sorted(names - {"pods"})
        self.capacity = self._capacity(snapshot, queued_uids)
        self.fair = fair_shares(self.tree, self.requested, self.capacity, self.resources)
        self.reclaimed: dict[str, int] = {}

    def _capacity(self, snapshot: Snapshot, queued: set[str]) -> Amounts:
        """Allocatable of Ready, schedulable nodes, minus what pods outside every queue hold."""
        total: Amounts = {}
        usable = set()
        for node in snapshot.nodes:
            if node.ready and not node.unschedulable and node.name not in usable:
                usable.add(node.name)
                add(total, node.allocatable)
        for pod in snapshot.pods:
            if (
                pod.uid not in queued
                and pod.holds_capacity
                and (pod.node_name or pod.nominated_node) in usable
            ):
                add(total, pod.requests, -1)
        return {name: max(0, amount) for name, amount in total.items()}

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
        for i, gang in enumerate(gangs):
            q = self.queue_of.get(gang.key)
            if q is not None:
                per_queue.setdefault(q, []).append(gang)
                places.append(i)
        if not places:
            return list(gangs)
        projected = {q: dict(amounts) for q, amounts in self.usage.items()}
        heads = {q: 0 for q in per_queue}
        # Per queue: its subtree still has gangs to take -> the next one (for ties).
        next_of: dict[str, Gang | None] = {}

        def refresh(q: str) -> None:
            kids = self.tree.kids(q)
            if not kids:
                lst = per_queue.get(q, [])
                k = heads.get(q, 0)
                next_of[q] = lst[k] if k < len(lst) else None
                return
            best = self._pick(kids, projected, next_of)
            next_of[q] = None if best is None else next_of[best]

        valid = [q for q in self.tree.queues if q not in self.tree.broken]
        for q in sorted(valid, key=lambda name: (-len(self.tree.path(name)), name)):  # leaves up
            refresh(q)
        out = list(gangs)
        for place in places:
            leaf = self._pick(self.tree.roots, projected, next_of)
            while leaf is not None and self.tree.kids(leaf):
                leaf = self._pick(self.tree.kids(leaf), projected, next_of)
            assert leaf is not None  # a queued gang is left, so some leaf has one
            gang = per_queue[leaf][heads[leaf]]
            heads[leaf] += 1
            out[place] = gang
            for q in self.tree.path(leaf):
                add(projected[q], self.waiting.get(gang.key, {}))
                refresh(q)
        return out

    def _pick(
        self, candidates: Sequence[str], projected: Mapping[str, Amounts], next_of: Mapping[str, Gang | None]
    ) -> str | None:
        best: tuple[float, tuple[int, float, str, str], str] | None = None
        for q in candidates:
            head = next_of.get(q)
            if head is None:
                continue
            key = (self._ratio(q, projected[q]), gang_order(head), q)
            if best is None or key < best:
                best = key
        return None if best is None else best[2]

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

    def accepts(self, queue: str | None, request: Mapping[str, int]) -> bool:
        book = self.book
        if queue is None or queue in self.shared:
            return False
        if not self._above_fair_share(queue):
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
