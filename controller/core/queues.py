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
- **grants** (namespaces are the platform engineer's to label): a namespace bound to a queue may
  name only the queues granted to it; any other namespace may name its granted queues and those
  granted to no namespace. A gang naming any other queue waits (QueueNotAllowed) and is charged to
  no queue. Pods that hold room outside Phalanx (skipped, bound at creation, not in a gang) in a
  namespace bound to a queue are charged to that queue, as its usage.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from controller.core import messages as msg
from controller.core.model import Gang, GangKey, Pod, Queue, QueueGrant, QueueReport, QueueResource, Reason
from controller.core.ordering import GangOrder, gang_order

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


def refusals(gangs: Iterable[Gang], grants: Mapping[str, QueueGrant]) -> dict[GangKey, str]:
    """Gang -> why its namespace may not use the queue it names, for the gangs that may not: a
    namespace bound to a queue uses only the queues granted to it; any other namespace its granted
    queues and those granted to no namespace."""
    granted = frozenset(q for grant in grants.values() for q in grant.queues)
    allowed = {ns: frozenset(grant.queues) for ns, grant in grants.items()}
    out: dict[GangKey, str] = {}
    for gang in gangs:
        queue = gang.queue
        if queue is None:
            continue
        namespace = gang.key.namespace
        grant = grants.get(namespace)
        if grant is None:
            if queue in granted:
                out[gang.key] = msg.queue_not_allowed(queue, namespace, (), False)
            continue
        if queue in allowed[namespace] or (grant.bound is None and queue not in granted):
            continue
        out[gang.key] = msg.queue_not_allowed(queue, namespace, grant.queues, grant.bound is not None)
    return out


def outside_usage(
    pods: Iterable[Pod], gangs: Iterable[Gang], grants: Mapping[str, QueueGrant], tree: QueueTree
) -> dict[str, Amounts]:
    """Leaf queue -> what pods outside Phalanx's gangs hold in the namespaces bound to it: pods that
    skipped, were bound at creation or belong to no gang still count against their namespace's queue."""
    bound = {ns: g.bound for ns, g in grants.items() if g.bound and tree.why_not(g.bound) is None}
    if not bound:
        return {}
    in_gangs = {(gang.key.namespace, gang.key.name) for gang in gangs}
    counts: dict[str, RequestCounts] = {}
    for pod in pods:  # every pod of the cluster: the cheap tests first
        if pod.node_name is None and pod.nominated_node is None:
            continue
        queue = bound.get(pod.namespace)
        if queue is None or pod.terminating or pod.phase == "Succeeded" or pod.phase == "Failed":  # noqa: PLR1714
            continue
        if pod.group is not None and (pod.namespace, pod.group) in in_gangs:
            continue  # a member: counted with its gang
        held = counts.get(queue)
        if held is None:
            held = counts[queue] = {}
        key = tuple(pod.requests.items())
        held[key] = held.get(key, 0) + 1
    return {queue: _amounts(held) for queue, held in counts.items()}


class QueueBook:
    """Queue state for one pass: usage (changing as the pass admits and evicts), fair shares."""

    def __init__(
        self,
        queues: Mapping[str, Queue],
        gangs: Sequence[Gang],
        free: Mapping[str, int],
        gpu_resource: str,
        grants: Mapping[str, QueueGrant] | None = None,
        pods: Iterable[Pod] = (),
    ) -> None:
        """``free``: the free room of Ready, schedulable nodes (what every pod leaves); ``grants``:
        the queues each namespace may use; ``pods``: every pod (those outside gangs are charged)."""
        self.tree = QueueTree(queues)
        self.gpu_resource = gpu_resource
        grants = grants or {}
        # Gangs naming a queue their namespace may not use wait, and count in no queue.
        self.refused = refusals(gangs, grants) if grants else {}
        if self.refused:
            gangs = [replace(g, queue=None) if g.key in self.refused else g for g in gangs]
        self._gangs = gangs
        self._valid: dict[str, bool] = {}  # queue name -> a leaf that takes gangs
        self._limits: dict[str, list[tuple[str, str, int]]] = {}  # leaf -> (queue, resource, limit)
        self._asked: dict[str, Amounts] = {}  # queue -> room asked of the autoscaler in this pass
        # Declared resources take part in fairness; the GPU always does.
        names = {gpu_resource}
        for spec in self.tree.queues.values():
            names.update(spec.resources)
        self.resources = sorted(names - {"pods"})
        scan = _Scan(self, gangs)
        self._turns = scan.turns
        self._holding_n = scan.holding_n
        self.leaves_in_use = frozenset(scan.leaves)
        # Subtrees: each leaf's sums added to it and its ancestors once.
        self.usage: dict[str, Amounts] = {name: {} for name in self.tree.queues}
        self.requested: dict[str, Amounts] = {name: {} for name in self.tree.queues}
        for leaf in sorted(set(scan.holding_of) | set(scan.asking_of)):
            for q in self.tree.path(leaf):
                add(self.usage[q], scan.holding_of.get(leaf, {}))
                add(self.requested[q], scan.holding_of.get(leaf, {}))
                add(self.requested[q], scan.asking_of.get(leaf, {}))
        self.outside: dict[str, Amounts] = {name: {} for name in self.tree.queues}
        for leaf, held in sorted(outside_usage(pods, gangs, grants, self.tree).items()):
            for q in self.tree.path(leaf):
                for into in (self.usage[q], self.requested[q], self.outside[q]):
                    add(into, held)
        # What queues share: the free room plus what queued gangs hold themselves.
        self.capacity: Amounts = {name: max(0, amount) for name, amount in free.items()}
        for root in self.tree.roots:
            add(self.capacity, self.usage[root])
        self.fair = fair_shares(self.tree, self.requested, self.capacity, self.resources)

    # ---- membership --------------------------------------------------------------------------------

    def blocked(self, gang: Gang) -> tuple[Reason, str] | None:
        """A gang naming a queue that cannot take it, or that its namespace may not use, waits,
        saying why."""
        refused = self.refused.get(gang.key)
        if refused is not None:
            return Reason.QUEUE_NOT_ALLOWED, refused
        if gang.queue is None:
            return None
        why = self.tree.why_not(gang.queue)
        return None if why is None else (Reason.QUEUE_NOT_FOUND, why)

    def leaf(self, queue: str | None) -> str | None:
        """``queue`` (a gang's ``queue``) if it is a leaf that takes gangs, else None."""
        if queue is None:
            return None
        ok = self._valid.get(queue)
        if ok is None:
            ok = self._valid[queue] = self.tree.why_not(queue) is None
        return queue if ok else None

    # ---- limits ----------------------------------------------------------------------------------

    def _limits_of(self, queue: str) -> list[tuple[str, str, int]]:
        """(queue, resource, limit) of ``queue`` and its ancestors."""
        limits = self._limits.get(queue)
        if limits is None:
            limits = self._limits[queue] = [
                (q, resource, spec.limit)
                for q in self.tree.path(queue)
                for resource, spec in sorted(self.tree.queues[q].resources.items())
                if spec.limit is not None
            ]
        return limits

    def over_limit(self, queue: str, request: Mapping[str, int]) -> str | None:
        """Why ``request`` would take ``queue`` or an ancestor beyond a limit, or None."""
        for q, resource, limit in self._limits_of(queue):
            amount = request.get(resource, 0)
            used = self.usage[q].get(resource, 0)
            if amount > 0 and used + amount > limit:
                return msg.queue_limit(q, queue, resource, used, limit, amount)
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

    def ask(self, queue: str, request: Mapping[str, int]) -> bool:
        """May a gang of ``queue`` waiting for capacity ask the autoscaler for ``request``, beside
        what gangs before it in this pass asked for? Records the ask when it may: ten gangs that each
        fit a queue's limit must not together ask for ten times the room it allows."""
        for q, resource, limit in self._limits_of(queue):
            amount = request.get(resource, 0)
            used = self.usage[q].get(resource, 0) + self._asked.get(q, {}).get(resource, 0)
            if amount > 0 and used + amount > limit:
                return False
        for q in self.tree.path(queue):
            add(self._asked.setdefault(q, {}), request)
        return True

    def book(self, queue: str, request: Mapping[str, int], sign: int = 1) -> None:
        for q in self.tree.path(queue):
            add(self.usage[q], request, sign)

    # ---- order -----------------------------------------------------------------------------------

    def order(self) -> list[Gang]:
        """The gangs the book was built from (in today's order), queued gangs re-ranked among their
        places by fairness."""
        out = list(self._gangs)
        if not self._turns:
            return out
        per_leaf: dict[str, list[tuple[GangOrder, Gang, Amounts]]] = {}
        for position, leaf, asking in self._turns:
            gang = out[position]
            per_leaf.setdefault(leaf, []).append((gang_order(gang), gang, asking))
        turns = _Turns(self, per_leaf)
        for position, _, _ in self._turns:  # the places queued gangs hold, in order
            out[position] = turns.take()
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

    def report(self, admitted: Iterable[Gang], waiting: Iterable[Gang]) -> dict[str, QueueReport]:
        """Per queue after the pass. ``admitted``: gangs the pass admitted; ``waiting``: gangs told
        to wait or preempting. A gang holding room counts as admitted, never as waiting."""
        per_leaf = {"admitted": dict(self._holding_n), "waiting": {}}
        for gangs, kind in ((admitted, "admitted"), (waiting, "waiting")):
            counts = per_leaf[kind]
            for gang in gangs:
                leaf = self.leaf(gang.queue)
                if leaf is not None and not holds_room(gang):  # counted already
                    counts[leaf] = counts.get(leaf, 0) + 1
        totals = {kind: dict.fromkeys(self.tree.queues, 0) for kind in per_leaf}
        for kind, counts in per_leaf.items():
            for leaf, n in counts.items():
                for q in self.tree.path(leaf):
                    totals[kind][q] += n
        return {
            q: QueueReport(
                allocated=dict(sorted(self.usage[q].items())),
                requested=dict(sorted(self.requested[q].items())),
                fair_share={r: self.fair[q].get(r, 0.0) for r in self.resources},
                admitted_gangs=totals["admitted"][q],
                waiting_gangs=totals["waiting"][q],
                outside=dict(sorted(self.outside[q].items())),
            )
            for q in sorted(self.tree.queues)
        }


def holds_room(gang: Gang) -> bool:
    """Does a live member hold room (bound, nominated, or admitted and not bound yet)?"""
    admitted = gang.admitted
    for pod in gang.members:
        if pod.phase == "Succeeded" or pod.phase == "Failed" or pod.terminating:  # noqa: PLR1714
            continue
        if pod.node_name is not None or pod.nominated_node is not None or pod.uid in admitted:
            return True
    return False


def _amounts(counts: Mapping[tuple[tuple[str, int], ...], int]) -> Amounts:
    """Requests summed, from how many pods asked for each (requests as items) ("pods" left out)."""
    out: Amounts = {}
    for requests, n in counts.items():
        for name, amount in requests:
            out[name] = out.get(name, 0) + amount * n
    out.pop("pods", None)
    return out


RequestCounts = dict[tuple[tuple[str, int], ...], int]  # requests (as items) -> pods asking for them


class _Scan:
    """One walk over the gangs of a pass and their members: per leaf queue, what its gangs hold and
    ask for; which gangs hold room; which take turns in the fair order (they have members waiting)."""

    def __init__(self, book: QueueBook, gangs: Sequence[Gang]) -> None:
        self.turns: list[tuple[int, str, Amounts]] = []  # (position, leaf, what it asks for)
        self.holding_n: dict[str, int] = {}  # leaf -> how many of its gangs hold room (holds_room)
        self.asking_of: dict[str, Amounts] = {}
        held_per_leaf: dict[str, RequestCounts] = {}
        leaf_of = book.leaf
        for position, gang in enumerate(gangs):
            leaf = leaf_of(gang.queue)
            if leaf is None:
                continue
            held = held_per_leaf.get(leaf)
            if held is None:
                held = held_per_leaf[leaf] = {}
            holds, asked = self._count(gang, held)
            if holds:
                self.holding_n[leaf] = self.holding_n.get(leaf, 0) + 1
            if not asked:
                continue
            asking = _amounts(asked)
            if asking:  # only gangs with members waiting take turns; a running gang keeps its place
                self.turns.append((position, leaf, asking))
            add(self.asking_of.setdefault(leaf, {}), asking)
        self.leaves = set(held_per_leaf)
        self.holding_of = {leaf: _amounts(counts) for leaf, counts in held_per_leaf.items()}

    @staticmethod
    def _count(gang: Gang, held: RequestCounts) -> tuple[bool, RequestCounts]:
        """Count the gang's live members that hold room into ``held``; return whether there were
        any, and the counts of its gated members waiting."""
        admitted = gang.admitted
        holds = False
        asked: RequestCounts = {}
        for pod in gang.members:  # the hot loop (every member of every queued gang)
            phase = pod.phase
            if phase == "Succeeded" or phase == "Failed" or pod.terminating:  # noqa: PLR1714
                continue
            if pod.node_name is not None or pod.nominated_node is not None or pod.uid in admitted:
                key = tuple(pod.requests.items())
                held[key] = held.get(key, 0) + 1
                holds = True
            elif pod.gated:
                key = tuple(pod.requests.items())
                asked[key] = asked.get(key, 0) + 1
        return holds, asked


class _Turns:
    """The state of ``QueueBook.order``: from the root down, the child queue furthest below its fair
    share goes next (ties by its next gang's order); each gang taken counts as admitted."""

    def __init__(self, book: QueueBook, per_leaf: dict[str, list[tuple[GangOrder, Gang, Amounts]]]) -> None:
        tree = book.tree
        names = book.resources
        self.per_leaf = per_leaf
        self.index = {name: k for k, name in enumerate(names)}  # resource -> its place in the rows
        self.heads = dict.fromkeys(per_leaf, 0)
        self.kids = {q: tree.kids(q) for q in tree.queues}
        self.roots = tree.roots
        self.paths = {leaf: tree.path(leaf) for leaf in per_leaf}
        # usage as it would be with the gangs taken so far, and the fair shares, per resource index
        self.projected = {q: [book.usage[q].get(r, 0) for r in names] for q in tree.queues}
        self.fair = {q: [book.fair[q].get(r, 0.0) for r in names] for q in tree.queues}
        # per queue with gangs left in its subtree: its next gang, and its rank among its siblings
        self.next_of: dict[str, tuple[GangOrder, Gang, Amounts] | None] = {}
        self.rank: dict[str, tuple[float, GangOrder, str] | None] = {}
        valid = [q for q in tree.queues if q not in tree.broken]
        for q in sorted(valid, key=lambda name: (-len(tree.path(name)), name)):  # leaves up
            self.refresh(q)

    def ratio(self, queue: str) -> float:
        """How far the queue is from its fair share: usage over share on its most used resource."""
        worst = 0.0
        for used, share in zip(self.projected[queue], self.fair[queue], strict=True):
            if used <= 0:
                continue
            ratio = used / share if share > 0 else INFINITE
            worst = max(worst, ratio)
        return worst

    def pick(self, candidates: Sequence[str]) -> str | None:
        best = None
        rank = self.rank
        for q in candidates:
            key = rank.get(q)
            if key is not None and (best is None or key < best):
                best = key
        return None if best is None else best[2]

    def refresh(self, q: str) -> None:
        children = self.kids[q]
        if children:
            best = self.pick(children)
            head = None if best is None else self.next_of[best]
        else:
            waiting = self.per_leaf.get(q, ())
            k = self.heads.get(q, 0)
            head = waiting[k] if k < len(waiting) else None
        self.next_of[q] = head
        self.rank[q] = None if head is None else (self.ratio(q), head[0], q)

    def take(self) -> Gang:
        """The next gang; its queue and the queues above it count it as admitted."""
        leaf = self.pick(self.roots)
        while leaf is not None and self.kids[leaf]:
            leaf = self.pick(self.kids[leaf])
        assert leaf is not None  # a queued gang is left, so some leaf has one
        _, gang, asking = self.per_leaf[leaf][self.heads[leaf]]
        self.heads[leaf] += 1
        index = self.index
        adds = [(index[name], amount) for name, amount in asking.items() if amount and name in index]
        for q in self.paths[leaf]:
            row = self.projected[q]
            for k, amount in adds:
                row[k] += amount
            self.refresh(q)
        return gang


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
