"""One planning pass: snapshot in, plan out. Pure and deterministic.

Gangs are considered in order (priority desc, created asc, namespace/name). Each gang the pass
admits books its room, so later gangs see it; a gang that does not fit does not block the smaller
ones behind it (backfill), except through a starvation reservation.

Per gang (not yet admitted):
  Reject InvalidSpec        min_member < 1, max_member < min_member, creatable < min_member
  Wait WaitingForMembers    fewer than min_member live (not finished, not terminating) members
  Wait ForeignGates         a live member carries another system's scheduling gate
  Admit                     the first min_member gated members all fit (and the elastic ones that fit)
  Wait Unschedulable        they could never fit, not even on an empty cluster
  Wait Preempting           it preempted earlier and its victims are still terminating
  Preempt                   they fit once strictly lower-priority work is evicted
  Wait BlockedByReservation they would fit but for the room reserved for a starving gang
  Wait Reserved             it starves: nodes are reserved for it
  Wait InsufficientCapacity otherwise ("needs 8 pods × 1 nvidia.com/gpu; best placement fits 5: ...")
Any Wait of a gang past its schedule timeout has timed_out=True (a timed-out gang that fits is still
admitted, but it neither preempts nor reserves).

Already admitted gangs (admission recorded or members bound): new gated members (replacements,
elastic growth up to max_member) are admitted one by one as they fit. No new member fits (or there
is none): no decision — an admitted gang never gets a Wait.

Gangs sharing a ``parent`` (KAI parentPodGroup) start together: each child at its own minimum,
placed jointly, all or nothing. The parent PodGroup's min_member (when it exists) is the number of
children that must be ready; without it, all children present and at least two. Once a child runs,
the others are admitted on their own.
"""

from __future__ import annotations

from collections.abc import Sequence

from controller.core import messages as msg
from controller.core.capacity import GPU
from controller.core.config import PlannerConfig
from controller.core.model import (
    Admit,
    Decision,
    Gang,
    GangKey,
    Placement,
    Plan,
    Pod,
    Preempt,
    QueueReport,
    Reason,
    Reject,
    Snapshot,
    Victim,
    Wait,
)
from controller.core.ordering import member_order
from controller.core.placement import (
    Assignment,
    FitMemo,
    best_partial,
    binding_resource,
    place,
    place_extra,
    signature,
    sort_items,
)
from controller.core.preemption import Candidate, Preemption
from controller.core.queues import add, total_requests
from controller.core.reservation import ever_fits, largest_single_fit, reserve
from controller.core.shapes import Shape
from controller.core.state import PassState, is_live

Groups = dict[int, tuple[Shape, list[Pod]]]  # shape id -> (shape, pods of that shape, in order)


def plan(snapshot: Snapshot, config: PlannerConfig | None = None) -> Plan:
    """Decide, for every gang of the snapshot, what to do now."""
    return PlanningPass(snapshot, config or PlannerConfig()).run()


def invalid_spec(gang: Gang) -> str | None:
    """Why the gang's spec can never be satisfied, or None."""
    if gang.min_member < 1:
        return msg.invalid_min_member(gang.min_member)
    if gang.max_member is not None and gang.max_member < gang.min_member:
        return msg.invalid_max_member(gang.max_member, gang.min_member)
    if gang.creatable is not None and gang.creatable < gang.min_member:
        return msg.invalid_creatable(gang.creatable, gang.min_member)
    return None


class PlanningPass:
    """One pass: building it derives the state (nodes, shapes, free room); ``run()`` decides every
    gang in order. ``decide(gang)`` decides one gang against the current state (benchmarks, tests)."""

    def __init__(self, snapshot: Snapshot, config: PlannerConfig) -> None:
        self.st = PassState(snapshot, config)
        self.cfg = config
        self.now = snapshot.now
        self.cap = self.st.capacity
        self.preemption = Preemption(self.st)
        self.reservation: tuple[Gang, list[int]] | None = None
        self.unblocked_memo = FitMemo()
        self.victims: set[GangKey] = set()
        self._shortfalls: dict[tuple[tuple[tuple[int, int], ...], int], str] = {}
        self._never: dict[tuple[tuple[int, int], ...], str | None] = {}
        self._unblocked: dict[tuple[tuple[tuple[int, int], ...], int], bool] = {}
        self._requests: dict[int, dict[str, int]] = {}  # candidate id -> its request (queues)
        self._reclaims = 0  # reclaim attempts in this pass (at most max_preemption_searches)

    # ---- driver ------------------------------------------------------------------------------

    def run(self) -> Plan:
        decisions: list[Decision] = []
        gangs = self.st.gangs
        families: dict[tuple[str, str], list[Gang]] = {}
        for gang in gangs:
            if gang.parent and gang.parent != gang.key.name:
                families.setdefault((gang.key.namespace, gang.parent), []).append(gang)
        parents = {GangKey(ns, parent) for ns, parent in families}
        done: set[tuple[str, str]] = set()
        for gang in gangs:
            if parents and gang.key in parents:
                continue  # a parent PodGroup only groups its children
            self.st.book_held_before(gang)
            if gang.parent and gang.parent != gang.key.name:
                family = (gang.key.namespace, gang.parent)
                if family in done:
                    continue
                done.add(family)
                decisions.extend(self._family(family[1], families[family]))
                continue
            decision = self._gang(gang)
            if decision is not None:
                decisions.append(decision)
        return Plan(tuple(decisions), self._queue_report(decisions))

    def _queue_report(self, decisions: list[Decision]) -> dict[str, QueueReport]:
        book = self.st.queues
        if book is None:
            return {}
        admitted = {d.gang for d in decisions if isinstance(d, Admit)} | book.holding
        waiting = {d.gang for d in decisions if isinstance(d, Wait | Preempt)} - admitted
        return book.report(admitted, waiting)

    def decide(self, gang: Gang) -> Decision | None:
        self.st.book_held_before(gang)
        return self._gang(gang)

    # ---- helpers -----------------------------------------------------------------------------

    def _groups(self, pods: Sequence[Pod]) -> Groups:
        groups: Groups = {}
        shapes = self.st.shapes
        for pod in pods:
            shape = shapes.of(pod)
            entry = groups.get(shape.id)
            if entry is None:
                groups[shape.id] = (shape, [pod])
            else:
                entry[1].append(pod)
        return groups

    @staticmethod
    def _items(groups: Groups) -> list[tuple[Shape, int]]:
        return sort_items([(shape, len(pods)) for shape, pods in groups.values()])

    @staticmethod
    def _assign(
        groups: Groups, items: Sequence[tuple[Shape, int]], result: Sequence[Assignment]
    ) -> dict[str, int]:
        """pod uid -> node index, pods of a shape taken in order."""
        out: dict[str, int] = {}
        for (shape, _), assignment in zip(items, result, strict=True):
            pods = groups[shape.id][1]
            k = 0
            for node, count in assignment:
                for pod in pods[k : k + count]:
                    out[pod.uid] = node
                k += count
        return out

    def _timeout(self, gang: Gang) -> float | None:
        return (
            gang.schedule_timeout if gang.schedule_timeout is not None else self.cfg.default_schedule_timeout
        )

    def _timed_out(self, gang: Gang) -> bool:
        if not gang.members and gang.waiting_since is None:
            return False  # no member has ever been seen: nothing waits yet
        timeout = self._timeout(gang)
        return timeout is not None and self.now > gang.wait_start + timeout

    def _wait(self, gang: Gang, reason: Reason, text: str, timed_out: bool, **extra: tuple[str, ...]) -> Wait:
        timeout = self._timeout(gang)
        if timed_out and timeout is not None:
            text = msg.timed_out(text, timeout)
        return Wait(gang.key, reason, text, timed_out, **extra)

    def _is_admitted(self, gang: Gang) -> bool:
        """Admitted and still running: new gated members join it one by one. Once no admitted member
        is alive (a run that ended, failed or was evicted), new members must form the gang whole.
        A gang Phalanx never admitted counts as running only with minMember members bound (it ran
        before its namespace opted in); one ungated pod that got bound does not make a gang."""
        if gang.admitted_at is not None or any(is_live(m) and m.uid in gang.admitted for m in gang.members):
            return True
        return sum(1 for m in gang.members if is_live(m) and m.bound) >= max(gang.min_member, 1)

    def _parts(self, items: Sequence[tuple[Shape, int]]) -> list[tuple[int, int, str]]:
        names = self.st.resources.names
        parts = []
        for shape, n in items:
            if shape.missing:
                missing = shape.missing[0]
                parts.append((n, dict(shape.requests)[missing], missing))
                continue
            r = binding_resource(self.cap, shape, names)
            parts.append((n, next((a for rr, a in shape.vec if rr == r), 1), names[r]))
        return parts

    # ---- messages about what is missing -------------------------------------------------------

    def _never_fits(self, items: Sequence[tuple[Shape, int]]) -> str | None:
        """Why these pods can never fit (constraints, or too big even for an empty cluster)."""
        sig = signature(items)
        if sig in self._never:
            return self._never[sig]
        parts = self._parts(items)
        why: str | None = None
        for shape, _ in items:
            if shape.missing:
                why = msg.missing_resource(parts, shape.missing)
                break
            if not shape.mask.count:
                why = msg.no_eligible_node(parts, self.st.eligibility.explain(shape.cons))
                break
        if why is None:
            fits, most = ever_fits(self.st, items)
            if not fits:
                k = largest_single_fit(self.st, items)
                if k is not None:
                    shape = items[k][0]
                    drained = self.st.drained()
                    names = self.st.resources.names
                    # Name the resource no node has enough of, whatever is busy right now.
                    largest = {
                        r: max((drained[i][r] for i in shape.mask.indices), default=0) for r, _ in shape.vec
                    }
                    r = next(
                        (r for r, a in shape.vec if a > largest[r]), binding_resource(self.cap, shape, names)
                    )
                    biggest = largest.get(r, 0)
                    why = msg.too_big_for_any_node(
                        parts, msg.requests_text(shape.requests), msg.requests_text([(names[r], biggest)])
                    )
                else:
                    why = msg.too_big_for_cluster(parts, most)
        self._never[sig] = why
        return why

    def _shortfall(self, items: Sequence[tuple[Shape, int]]) -> str:
        key = (signature(items), self.cap.version)
        found = self._shortfalls.get(key)
        if found is not None:
            return found
        placed, per_node = best_partial(self.cap, items)
        names = self.st.names
        counts = [(names[i], n) for i, n in per_node.items()]
        text = msg.shortfall(self._parts(items), placed, counts, self.cfg.message_nodes)
        self._shortfalls[key] = text
        return text

    # ---- admission ---------------------------------------------------------------------------

    def _admit_decision(self, gang: Gang, pods: Sequence[Pod], nodes: dict[str, int], text: str) -> Admit:
        names = self.st.names
        free = gang.placement == Placement.FREE
        placement: dict[str, str | None] = {}
        booked: dict[str, str] = {}
        notes: list[str] = []
        for pod in pods:
            i = nodes.get(pod.uid)
            if i is None:
                continue
            booked[pod.uid] = names[i]
            placement[pod.uid] = None if free or pod.unmodelled else names[i]
            if pod.unmodelled:
                notes.append(msg.unmodelled_note(pod.name, pod.unmodelled))
        return Admit(gang.key, placement, text, tuple(notes), booked)

    def _counts(self, pods: Sequence[Pod], nodes: dict[str, int]) -> list[tuple[str, int]]:
        per: dict[int, int] = {}
        for pod in pods:
            i = nodes.get(pod.uid)
            if i is not None:
                per[i] = per.get(i, 0) + 1
        return [(self.st.names[i], n) for i, n in per.items()]

    def _try_place(self, required: Sequence[Pod], extra: Sequence[Pod]) -> dict[str, int] | None:
        """Place all `required` pods or none, then as many of `extra` as fit. Booked on success."""
        groups = self._groups(required)
        items = self._items(groups)
        placed = place(self.cap, items, self.st.memo, self.cfg.topology_attempts)
        if placed is None:
            return None
        result, domain = placed
        nodes = self._assign(groups, items, result)
        if extra:
            extra_groups = self._groups(extra)
            extra_items = self._items(extra_groups)
            nodes.update(self._assign(extra_groups, extra_items, place_extra(self.cap, extra_items, domain)))
        return nodes

    def _would_fit_unblocked(self, items: Sequence[tuple[Shape, int]]) -> bool:
        assert self.reservation is not None
        key = (signature(items), self.cap.version)
        known = self._unblocked.get(key)
        if known is not None:
            return known
        nodes = self.reservation[1]
        mark = self.cap.mark()
        self.cap.include(nodes)
        ok = place(self.cap, items, self.unblocked_memo, self.cfg.topology_attempts) is not None
        self.cap.rollback(mark)
        self.cap.exclude(nodes)
        self.cap.version = mark[1]  # the very state of before
        self._unblocked[key] = ok
        return ok

    # ---- one gang ------------------------------------------------------------------------------

    def _gang(self, gang: Gang) -> Decision | None:
        if self.victims and gang.key in self.victims:
            return None  # being preempted in this pass
        if self._is_admitted(gang):
            return self._grow(gang)
        if gang.admitted and not any(m.gated and is_live(m) for m in gang.members):
            return None  # its run is over and nothing waits to start: the status tells how it ended
        invalid = invalid_spec(gang)
        if invalid is not None:
            return Reject(gang.key, Reason.INVALID_SPEC, invalid)
        timed_out = self._timed_out(gang)
        book = self.st.queues
        blocked = book.blocked(gang) if book is not None else None
        if blocked is not None:
            return self._wait(gang, blocked[0], blocked[1], timed_out)
        live = [m for m in gang.members if is_live(m)]
        if len(live) < gang.min_member:
            return self._incomplete(gang, live, timed_out)
        gates = sorted({g for m in live for g in m.foreign_gates})
        if gates:
            return self._wait(gang, Reason.FOREIGN_GATES, msg.foreign_gates(gates), timed_out)
        short = self._min_resources_short(gang)
        if short:
            return self._wait(gang, Reason.INSUFFICIENT_CAPACITY, msg.min_resources_short(short), timed_out)
        pending = sorted((m for m in live if m.gated and m.uid not in gang.admitted), key=member_order)
        # Members already handed to the scheduler without our gate (created before the namespace
        # opted in) count toward minMember but hold no room yet: the proof must include them.
        loose = sorted(
            (
                m
                for m in live
                if not m.gated and not m.bound and not m.nominated_node and m.uid not in gang.admitted
            ),
            key=member_order,
        )
        others = len(live) - len(pending)
        required_n = max(0, gang.min_member - others)
        if required_n == 0:
            return self._grow(gang)
        allowed = len(pending) if gang.max_member is None else max(required_n, gang.max_member - others)
        required, extra = pending[:required_n], pending[required_n:allowed]
        queue = book.queue(gang.key) if book is not None else None
        if book is not None and queue is not None:
            request = total_requests([*loose, *required])
            over = book.over_limit(queue, request)
            if over is not None:
                return self._wait(gang, Reason.QUEUE_LIMIT, over, timed_out)
            extra = book.within_limit(queue, request, extra)
        nodes = self._try_place([*loose, *required], extra)
        if nodes is not None:
            self.st.drop_held(gang.key)
            admitted = [p for p in pending if p.uid in nodes]
            if book is not None and queue is not None:
                book.book(queue, total_requests([*loose, *admitted]))
            text = msg.admitted(
                self._counts(admitted, nodes), gang.placement == Placement.PINNED, self.cfg.message_nodes
            )
            return self._admit_decision(gang, admitted, nodes, text)
        return self._cannot_fit(gang, [*loose, *required], timed_out)

    def _incomplete(self, gang: Gang, live: Sequence[Pod], timed_out: bool) -> Wait:
        """Fewer members than minMember exist. If the whole gang, its missing members shaped like
        the first ones, could never run on this cluster, waiting for them is not the news."""
        if live:
            # In member order, not snapshot order: the same gang must give the same answer.
            items = self._items(self._groups(sorted(live, key=member_order)))
            shape, count = items[0]
            never = self._never_fits([(shape, count + gang.min_member - len(live)), *items[1:]])
            if never is not None:
                text = msg.never_fits_when_complete(len(live), gang.min_member, never)
                return self._wait(gang, Reason.UNSCHEDULABLE, text, timed_out)
        text = msg.waiting_for_members(len(live), gang.min_member)
        return self._wait(gang, Reason.WAITING_FOR_MEMBERS, text, timed_out)

    def _min_resources_short(self, gang: Gang) -> list[tuple[str, int, int]]:
        """(resource, wanted, free) of each minResources entry the cluster lacks right now."""
        short = []
        index = self.st.resources.index
        for name, wanted in sorted(gang.min_resources.items()):
            i = index.get(name)
            free = self.cap.sums[i] if i is not None else 0
            if free < wanted:
                short.append((name, wanted, free))
        return short

    def _cannot_fit(self, gang: Gang, required: Sequence[Pod], timed_out: bool) -> Decision:
        groups = self._groups(required)
        items = self._items(groups)
        never = self._never_fits(items)
        if never is not None:
            return self._wait(gang, Reason.UNSCHEDULABLE, never, timed_out)
        if gang.held:
            terminating = self._held_terminating(gang)
            if terminating:
                return self._wait(gang, Reason.PREEMPTING, msg.preempting_wait(terminating), timed_out)
        if not timed_out:
            preempt = self._preempt(gang, groups, items)
            if preempt is not None:
                return preempt
        text = self._shortfall(items)
        if self.reservation is not None and self._would_fit_unblocked(items):
            return self._wait(
                gang,
                Reason.BLOCKED_BY_RESERVATION,
                msg.blocked(str(self.reservation[0].key), text),
                timed_out,
            )
        starving = self.cfg.starvation_age_seconds
        if (
            not timed_out
            and self.reservation is None
            and starving is not None
            and self.now - gang.wait_start > starving
            and not self._unit(gang)
        ):
            nodes = reserve(self.st, items)
            if nodes:
                self.reservation = (gang, nodes)
                self.cap.exclude(nodes)
                self.st.drop_held(gang.key)
                names = [self.st.names[i] for i in nodes]
                text = msg.reserved(self.now - gang.wait_start, names, self.cfg.message_nodes, text)
                return self._wait(gang, Reason.RESERVED, text, timed_out, reserved_nodes=tuple(names))
        return self._wait(gang, Reason.INSUFFICIENT_CAPACITY, text, timed_out)

    def _unit(self, gang: Gang) -> bool:
        """One pod of at most one GPU: nothing smaller can overtake it, so a reservation would only
        idle nodes (seen in trace replay: it spends the pass's one reservation for nothing)."""
        gated = [m for m in gang.members if m.gated]
        return len(gated) <= 1 and sum(m.requests.get(self.cfg.gpu_resource, 0) for m in gated) <= 1

    def _held_terminating(self, gang: Gang) -> int:
        """Terminating pods still on the nodes held for this gang (its victims, presumably)."""
        index = self.st.node_index
        nodes = {index[n] for n in gang.held.values() if n is not None and n in index}
        return sum(self.st.terminating.get(i, 0) for i in sorted(nodes))

    def _candidate_request(self, cand: Candidate) -> dict[str, int]:
        found = self._requests.get(id(cand))
        if found is not None:
            return found
        names = self.st.resources.names
        out: dict[str, int] = {}
        for _, vec in cand.bookings:
            for r, a in vec:
                if r:  # not "pods"
                    out[names[r]] = out.get(names[r], 0) + a
        self._requests[id(cand)] = out
        return out

    def _preempt(self, gang: Gang, groups: Groups, items: list[tuple[Shape, int]]) -> Preempt | None:
        """Priority preemption (inside the gang's queue, if it has one), else reclaim."""
        if not self.cfg.preemption or gang.preemption_policy == "Never":
            return None
        book = self.st.queues
        queue = book.queue(gang.key) if book is not None else None
        found = None
        lowest = self.st.min_running_priority
        if (
            lowest is not None
            and gang.priority > lowest
            and self.preemption.searches < self.cfg.max_preemption_searches
        ):
            if book is None or queue is None:
                found = self.preemption.search(gang, items, signature(items))
            else:

                def lower(cand: Candidate) -> bool:
                    return cand.priority < gang.priority

                found = self.preemption.search(
                    gang, items, signature(items), lower, scope=f"queue:{queue}", queues=(queue,)
                )
        reclaim = False
        if (
            found is None
            and book is not None
            and queue is not None
            and self.preemption.searches < self.cfg.max_preemption_searches
            and self._reclaims < self.cfg.max_preemption_searches
        ):
            request = total_requests(p for _, ps in groups.values() for p in ps)
            gpu = self.cfg.gpu_resource
            victim_filter = book.reclaim_filter(queue) if book.may_reclaim(queue, request) else None
            if (
                victim_filter is not None
                and victim_filter.queues
                and request.get(gpu, 0) <= self.cap.sums[GPU] + victim_filter.room(gpu)
            ):
                accepts = victim_filter.accepts

                def reclaimable(cand: Candidate) -> bool:
                    return accepts(cand.queue, self._candidate_request(cand))

                self._reclaims += 1  # every attempt counts: each may scan all candidates
                found = self.preemption.search(
                    gang,
                    items,
                    signature(items),
                    reclaimable,
                    scope=f"reclaim:{queue}",
                    queues=victim_filter.queues,
                )
                reclaim = found is not None
        if found is None:
            return None
        victims, result = found
        for (shape, _), assignment in zip(items, result, strict=True):
            for i, n in assignment:
                self.cap.book(i, shape.vec, n)  # held for the preemptor for the rest of the pass
        self.st.drop_held(gang.key)
        nodes = self._assign(groups, items, result)
        names = self.st.names
        pods = [p for _, ps in groups.values() for p in ps]
        placement: dict[str, str | None] = {
            p.uid: names[nodes[p.uid]] for p in sorted(pods, key=member_order)
        }
        merged: dict[tuple[str, str], list[Candidate]] = {}
        for cand in victims:
            cand.taken = True
            if cand.gang is not None:
                self.victims.add(cand.gang)
            merged.setdefault((cand.namespace, cand.label), []).append(cand)
        out_victims = []
        described = []
        from_queues: dict[str, None] = {}
        for (namespace, label), cands in sorted(merged.items()):
            uids = tuple(sorted(uid for c in cands for uid in c.uids))
            out_victims.append(Victim(cands[0].gang, uids, namespace))
            described.append((label, cands[0].priority, len(uids)))
            if book is not None:
                victim_queue = book.queue(cands[0].gang)
                if victim_queue is not None:
                    from_queues[victim_queue] = None
                    for cand in cands:
                        book.book(victim_queue, self._candidate_request(cand), -1)
        used_nodes = sorted({names[i] for i in nodes.values()})
        if book is not None and queue is not None:
            book.book(queue, total_requests(pods))  # the room held for it counts as its own
        if reclaim:
            assert book is not None
            labelled = [
                (label, book.queue(c[0].gang) or "", len({u for x in c for u in x.uids}))
                for (_, label), c in sorted(merged.items())
            ]
            text = msg.reclaiming(self._parts(items), labelled, used_nodes, self.cfg.message_nodes)
            return Preempt(gang.key, tuple(out_victims), placement, text, tuple(sorted(from_queues)))
        text = msg.preempting(self._parts(items), described, used_nodes, self.cfg.message_nodes)
        return Preempt(gang.key, tuple(out_victims), placement, text)

    def _grow(self, gang: Gang) -> Decision | None:
        """An admitted gang: admit new gated members one by one as they fit."""
        if not any(m.gated for m in gang.members):
            return None
        live = [m for m in gang.members if is_live(m)]
        pending = sorted(
            (m for m in live if m.gated and m.uid not in gang.admitted and not m.foreign_gates),
            key=member_order,
        )
        if not pending:
            return None
        others = len(live) - len(pending)
        allowed = len(pending) if gang.max_member is None else max(0, gang.max_member - others)
        if allowed == 0:
            return None
        pods = pending[:allowed]
        book = self.st.queues
        queue = book.queue(gang.key) if book is not None else None
        if book is not None and queue is not None:
            pods = book.within_limit(queue, {}, pods)  # a queue's limit binds growth too
            if not pods:
                return None
        groups = self._groups(pods)
        items = self._items(groups)
        nodes = self._assign(groups, items, place_extra(self.cap, items, None))
        if not nodes:
            # Nothing fits now: no decision. The gang stays admitted (a Wait would read as "not
            # admitted" to the shell); the members stay gated until room appears.
            return None
        admitted = [p for p in pods if p.uid in nodes]
        if book is not None and queue is not None:
            book.book(queue, total_requests(admitted))
        text = msg.grown(self._counts(admitted, nodes), len(pods) - len(admitted), self.cfg.message_nodes)
        return self._admit_decision(gang, admitted, nodes, text)

    # ---- parent groups ------------------------------------------------------------------------

    def _family_over_limit(self, ready: Sequence[tuple[Gang, list[Pod], list[Pod]]]) -> str | None:
        """Why the children's minimums together would break a queue's limit, or None."""
        book = self.st.queues
        if book is None:
            return None
        per_queue: dict[str, dict[str, int]] = {}
        for child, required, _ in ready:
            queue = book.queue(child.key)
            if queue is not None:
                add(per_queue.setdefault(queue, {}), total_requests(required))
        for queue, request in sorted(per_queue.items()):
            over = book.over_limit(queue, request)
            if over is not None:
                return over
        return None

    def _family(self, parent: str, children: list[Gang]) -> list[Decision]:
        if any(self._is_admitted(child) for child in children):
            return [d for child in children if (d := self._gang(child)) is not None]
        namespace = children[0].key.namespace
        parent_gang = self.st.gang(GangKey(namespace, parent))
        needed = max(1, parent_gang.min_member) if parent_gang is not None else max(2, len(children))
        decisions: list[Decision] = []
        ready: list[tuple[Gang, list[Pod], list[Pod]]] = []
        details: list[str] = []
        waiting: list[Gang] = []
        unready: list[tuple[Gang, Reason, str]] = []  # children not ready, when the others are enough
        for child in children:
            if child.key in self.victims:
                continue
            invalid = invalid_spec(child)
            if invalid is not None:
                decisions.append(Reject(child.key, Reason.INVALID_SPEC, invalid))
                details.append(msg.sibling_detail(child.key.name, "invalid"))
                continue
            waiting.append(child)
            live = [m for m in child.members if is_live(m)]
            if len(live) < child.min_member:
                text = msg.waiting_for_members(len(live), child.min_member)
                details.append(msg.sibling_detail(child.key.name, text))
                unready.append((child, Reason.WAITING_FOR_MEMBERS, text))
                continue
            gates = sorted({g for m in live for g in m.foreign_gates})
            if gates:
                text = msg.foreign_gates(gates)
                details.append(msg.sibling_detail(child.key.name, text))
                unready.append((child, Reason.FOREIGN_GATES, text))
                continue
            pending = sorted((m for m in live if m.gated and m.uid not in child.admitted), key=member_order)
            others = len(live) - len(pending)
            required_n = max(0, child.min_member - others)
            allowed = len(pending) if child.max_member is None else max(required_n, child.max_member - others)
            ready.append((child, pending[:required_n], pending[required_n:allowed]))
        if len(ready) < needed:
            text = msg.waiting_for_siblings(parent, len(ready), needed, details)
            decisions.extend(
                self._wait(child, Reason.WAITING_FOR_PARENT, text, self._timed_out(child))
                for child in waiting
            )
            return decisions
        for child, reason, text in unready:
            decisions.append(self._wait(child, reason, text, self._timed_out(child)))
        over = self._family_over_limit(ready)
        if over is not None:
            decisions.extend(
                self._wait(child, Reason.QUEUE_LIMIT, msg.family_waits(parent, over), self._timed_out(child))
                for child, _, _ in ready
            )
            return decisions
        required = [p for _, req, _ in ready for p in req]
        extra = [p for _, _, ext in ready for p in ext]
        nodes = self._try_place(required, extra)
        if nodes is not None:
            book = self.st.queues
            for child, req, ext in ready:
                pods = [p for p in (*req, *ext) if p.uid in nodes]
                queue = book.queue(child.key) if book is not None else None
                if book is not None and queue is not None:
                    book.book(queue, total_requests(pods))
                text = msg.family_admitted(
                    parent,
                    msg.admitted(
                        self._counts(pods, nodes), child.placement == Placement.PINNED, self.cfg.message_nodes
                    ),
                )
                decisions.append(self._admit_decision(child, pods, nodes, text))
            return decisions
        items = self._items(self._groups(required))
        never = self._never_fits(items)
        reason = Reason.UNSCHEDULABLE if never is not None else Reason.INSUFFICIENT_CAPACITY
        text = never if never is not None else self._shortfall(items)
        text = msg.family_waits(parent, text)
        decisions.extend(self._wait(child, reason, text, self._timed_out(child)) for child, _, _ in ready)
        return decisions
