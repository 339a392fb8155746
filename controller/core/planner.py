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

Already admitted gangs (admission recorded or members bound): the members it is short of to reach
min_member (its workload was scaled up, or members were lost) are admitted together once all fit,
else Short says why they wait; elastic members beyond (up to max_member) are admitted one by one as
they fit. An admitted gang never gets a Wait: the members that run keep running.

Gangs sharing a ``parent`` (KAI parentPodGroup) start together: each child at its own minimum,
placed jointly, all or nothing. The parent PodGroup's min_member (when it exists) is the number of
children that must be ready; without it, all children present and at least two. Once a child runs,
the others are admitted on their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from controller.core import messages as msg
from controller.core import topology
from controller.core.capacity import GPU
from controller.core.config import PlannerConfig
from controller.core.devices import gpu_resource_of, with_devices
from controller.core.model import (
    CAPACITY_WAITS,
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
    Short,
    Snapshot,
    Victim,
    Wait,
)
from controller.core.ordering import member_order
from controller.core.placement import (
    Assignment,
    Domain,
    FitMemo,
    Within,
    best_partial,
    binding_resource,
    place,
    place_extra,
    signature,
    sort_items,
)
from controller.core.preemption import Candidate, Preemption
from controller.core.queues import QueueBook, add, total_requests
from controller.core.reservation import ever_fits, ever_fits_on, largest_single_fit, reserve
from controller.core.shapes import Shape
from controller.core.state import PassState, is_live
from controller.core.topology import Slices

Groups = dict[int, tuple[Shape, list[Pod]]]  # shape id -> (shape, pods of that shape, in order)
Found = tuple[list["Candidate"], list[Assignment]] | None  # victims and the placement they make possible
Ready = tuple[Gang, list[Pod], list[Pod]]  # a child of a parent group: members it must start, may start
Signature = tuple[tuple[int, int], ...]  # (shape id, count) per item
DemandKey = tuple[Signature, Within | None, Slices | None]  # what memos are keyed by


class Demand:
    """Pods to place, grouped by shape (in order), as items biggest shape first, where they must go
    (``within``: one topology domain, or None; ``slices``: each group of members inside one domain
    of a level; ``levels``: the label keys whose domains are tried first), and the key memos know it
    by. Built once per gang: admission, the messages and the victim search all read it."""

    __slots__ = ("groups", "items", "key", "levels", "signature", "slices", "within")

    def __init__(
        self,
        groups: Groups,
        items: list[tuple[Shape, int]],
        within: Within | None = None,
        slices: Slices | None = None,
        levels: tuple[str, ...] | None = None,
    ) -> None:
        self.groups = groups
        self.items = items
        self.within = within
        self.slices = slices
        self.levels = levels
        self.signature: Signature = signature(items)
        self.key: DemandKey = (self.signature, within, slices)


def plan(snapshot: Snapshot, config: PlannerConfig | None = None) -> Plan:
    """Decide, for every gang of the snapshot, what to do now."""
    return PlanningPass(snapshot, config or PlannerConfig()).run()


def invalid_spec(gang: Gang, config: PlannerConfig | None = None) -> str | None:
    """Why the gang's spec can never be satisfied, or None."""
    if gang.unrecordable is not None:
        return gang.unrecordable
    if gang.min_member < 1:
        return msg.invalid_min_member(gang.min_member)
    if gang.max_member is not None and gang.max_member < gang.min_member:
        return msg.invalid_max_member(gang.max_member, gang.min_member)
    if gang.creatable is not None and gang.creatable < gang.min_member:
        return msg.invalid_creatable(gang.creatable, gang.min_member)
    return topology.invalid(gang, config or PlannerConfig())


@dataclass(slots=True)
class Siblings:
    """The children of one parent group, sorted out (``PlanningPass._siblings``)."""

    rejects: list[Decision] = field(default_factory=list)
    ready: list[Ready] = field(default_factory=list)
    details: list[str] = field(default_factory=list)  # per child not ready or invalid, for the message
    waiting: list[Gang] = field(default_factory=list)  # every valid child
    unready: list[tuple[Gang, Reason, str]] = field(default_factory=list)  # waits, when the others suffice

    def not_ready(self, child: Gang, reason: Reason, text: str) -> None:
        self.details.append(msg.sibling_detail(child.key.name, text))
        self.unready.append((child, reason, text))


SUBGROUP = topology.SUBGROUP


def _subgroups_first(gang: Gang, live: Sequence[Pod], pending: list[Pod]) -> tuple[list[Pod], int]:
    """``pending`` with, first, the members each subgroup still needs for its minimum (in member
    order); and how many those are: the gang's start must include all of them."""
    waiting = {m.uid for m in pending}
    first: list[Pod] = []
    for name, need in sorted(gang.subgroups.items()):
        placed = sum(1 for m in live if m.uid not in waiting and m.labels.get(SUBGROUP) == name)
        first.extend([m for m in pending if m.labels.get(SUBGROUP) == name][: max(0, need - placed)])
    chosen = {m.uid for m in first}
    return [*first, *(m for m in pending if m.uid not in chosen)], len(first)


def devices_unproven(members: Iterable[Pod]) -> str | None:
    """Why the first member whose DRA device demand cannot be proven may not be placed, or None:
    such a member carries no device requests, so room for it would be a guess."""
    for member in members:
        if member.devices_unproven is not None:
            return msg.devices_unproven(member.name, member.devices_unproven)
    return None


def _has_gated(gang: Gang) -> bool:
    for member in gang.members:  # noqa: SIM110 - asked of every gang: a loop beats any()'s generator
        if member.gated:
            return True
    return False


class PlanningPass:
    """One pass: building it derives the state (nodes, shapes, free room); ``run()`` decides every
    gang in order. ``decide(gang)`` decides one gang against the current state (benchmarks, tests)."""

    def __init__(self, snapshot: Snapshot, config: PlannerConfig) -> None:
        translated = with_devices(snapshot, snapshot.devices)
        gpu = gpu_resource_of(translated, snapshot.devices, config.gpu_resource)
        if gpu != config.gpu_resource:
            config = replace(config, gpu_resource=gpu)
        self.state = PassState(translated, config)
        self.config = config
        self.now = snapshot.now
        self.capacity = self.state.capacity
        self.preemption = Preemption(self.state)
        self.reservation: tuple[Gang, list[int]] | None = None
        # Nodes the cluster-autoscaler made for booked gangs that do not fit yet, held for them.
        self.bookings: list[tuple[Gang, list[int]]] = []
        self.unblocked_memo = FitMemo()
        self.victims: set[GangKey] = set()
        # Memos of the pass, by demand (and capacity version where the free room matters)
        self._shortfalls: dict[tuple[DemandKey, int], str] = {}
        self._never: dict[DemandKey, str | None] = {}
        self._unblocked: dict[tuple[DemandKey, int, str], bool] = {}
        self._requests: dict[int, dict[str, int]] = {}  # candidate id -> its request (queues)
        self._reclaims = 0  # reclaim attempts in this pass (at most max_preemption_searches)

    # ---- driver ------------------------------------------------------------------------------

    def run(self) -> Plan:
        decided: list[tuple[Gang, Decision]] = []
        gangs = self.state.gangs
        families: dict[tuple[str, str], list[Gang]] = {}
        for gang in gangs:
            if gang.parent and gang.parent != gang.key.name:
                families.setdefault((gang.key.namespace, gang.parent), []).append(gang)
        parents = {GangKey(ns, parent) for ns, parent in families}
        done: set[tuple[str, str]] = set()
        for gang in gangs:
            if gang.admitted_at is not None and not gang.parent and not _has_gated(gang):
                continue  # admitted, nothing new to start: no decision (most gangs of a busy cluster)
            if parents and gang.key in parents:
                continue  # a parent PodGroup only groups its children
            self.state.book_held_before(gang)
            if gang.parent and gang.parent != gang.key.name:
                family = (gang.key.namespace, gang.parent)
                if family in done:
                    continue
                done.add(family)
                children = {child.key: child for child in families[family]}
                decided.extend((children[d.gang], d) for d in self._family(family[1], families[family]))
                continue
            decision = self._gang(gang)
            if decision is not None:
                decided.append((gang, decision))
        return Plan(tuple(d for _, d in decided), self._queue_report(decided))

    def _queue_report(self, decided: list[tuple[Gang, Decision]]) -> dict[str, QueueReport]:
        book = self.state.queues
        if book is None:
            return {}
        admitted = [gang for gang, d in decided if isinstance(d, Admit)]
        waiting = [gang for gang, d in decided if isinstance(d, Wait | Preempt)]
        return book.report(admitted, waiting)

    def decide(self, gang: Gang) -> Decision | None:
        self.state.book_held_before(gang)
        return self._gang(gang)

    # ---- helpers -----------------------------------------------------------------------------

    def _groups(self, pods: Sequence[Pod]) -> Groups:
        groups: Groups = {}
        shapes = self.state.shapes
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
        if len(groups) == 1:  # most gangs: one shape, nothing to sort
            for shape, pods in groups.values():
                return [(shape, len(pods))]
        return sort_items([(shape, len(pods)) for shape, pods in groups.values()])

    def _demand(self, pods: Sequence[Pod], within: Within | None = None, gang: Gang | None = None) -> Demand:
        """``gang``: whose topology request (slices, levels tried first) the placement follows."""
        groups = self._groups(pods)
        if gang is None:
            return Demand(groups, self._items(groups), within)
        slices = topology.slices_of(gang, pods)
        if slices is not None:
            for _, members in groups.values():
                members.sort(key=topology.piece_order)
        items = self._items(groups)
        levels = topology.levels_to_try(self.config, gang, any(shape.gpu for shape, _ in items))
        return Demand(groups, items, within, slices, levels)

    @staticmethod
    def _within(gang: Gang) -> Within | None:
        """Where a gang that is not running yet must go: one domain of its required topology."""
        return Within(gang.required_topology) if gang.required_topology else None

    def _home(self, gang: Gang) -> Within | None:
        """Where an admitted gang's new members must go: the domain of its required topology its
        running (or admitted) members are in -- the one most of them are in, should they differ."""
        key = gang.required_topology
        if not key:
            return None
        index = self.state.node_index
        nodes = self.state.nodes
        counts: dict[str, int] = {}
        for member in gang.members:
            if not is_live(member):
                continue
            where = member.node_name or gang.admitted.get(member.uid) or gang.booked.get(member.uid)
            i = index.get(where) if where is not None else None
            value = nodes[i].labels.get(key) if i is not None else None
            if value is not None:
                counts[value] = counts.get(value, 0) + 1
        if not counts:
            return Within(key)
        return Within(key, min(counts, key=lambda v: (-counts[v], v)))

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
            gang.schedule_timeout
            if gang.schedule_timeout is not None
            else self.config.default_schedule_timeout
        )

    def _timed_out(self, gang: Gang) -> bool:
        if not gang.members and gang.waiting_since is None:
            return False  # no member has ever been seen: nothing waits yet
        timeout = self._timeout(gang)
        return timeout is not None and self.now > gang.wait_start + timeout

    def _wait(
        self, gang: Gang, reason: Reason, text: str, timed_out: bool, reserved_nodes: tuple[str, ...] = ()
    ) -> Wait:
        if timed_out:
            timeout = self._timeout(gang)
            if timeout is not None:
                text = msg.timed_out(text, timeout)
        return Wait(gang.key, reason, text, timed_out, reserved_nodes)

    def _is_admitted(self, gang: Gang) -> bool:
        """Admitted and still running: new gated members join it one by one. Once no admitted member
        is alive (a run that ended, failed or was evicted), new members must form the gang whole.
        A gang Phalanx never admitted counts as running only with minMember members bound (it ran
        before its namespace opted in); one ungated pod that got bound does not make a gang."""
        if gang.admitted_at is not None:
            return True
        admitted = gang.admitted
        if admitted and any(is_live(m) and m.uid in admitted for m in gang.members):
            return True
        bound = 0
        for member in gang.members:  # every gang of the pass comes here: no generator, no property
            if member.node_name is not None and is_live(member):
                bound += 1
        return bound >= max(gang.min_member, 1)

    def _parts(self, items: Sequence[tuple[Shape, int]]) -> list[tuple[int, int, str]]:
        names = self.state.resources.names
        parts = []
        for shape, n in items:
            if shape.missing:
                missing = shape.missing[0]
                parts.append((n, dict(shape.requests)[missing], missing))
                continue
            r = binding_resource(self.capacity, shape, names)
            parts.append((n, next((a for rr, a in shape.vec if rr == r), 1), names[r]))
        return parts

    # ---- messages about what is missing -------------------------------------------------------

    def _never_fits(
        self, items: Sequence[tuple[Shape, int]], sig: Signature | None = None, within: Within | None = None
    ) -> str | None:
        """Why these pods can never fit (constraints, too big even for an empty cluster, or for
        any single domain they must stay inside)."""
        key: DemandKey = (sig if sig is not None else signature(items), within, None)
        if key in self._never:
            return self._never[key]
        parts = self._parts(items)
        why: str | None = None
        for shape, _ in items:
            if shape.missing:
                why = msg.missing_resource(parts, shape.missing)
                break
            if not shape.mask.count:
                why = msg.no_eligible_node(parts, self.state.eligibility.explain(shape.cons))
                break
        if why is None:
            fits, most = ever_fits(self.state, items)
            if not fits:
                k = largest_single_fit(self.state, items)
                if k is not None:
                    shape = items[k][0]
                    drained = self.state.drained()
                    names = self.state.resources.names
                    # Name the resource no node has enough of, whatever is busy right now.
                    largest = {
                        r: max((drained[i][r] for i in shape.mask.indices), default=0) for r, _ in shape.vec
                    }
                    r = next(
                        (r for r, a in shape.vec if a > largest[r]),
                        binding_resource(self.capacity, shape, names),
                    )
                    biggest = largest.get(r, 0)
                    why = msg.too_big_for_any_node(
                        parts, msg.requests_text(shape.requests), msg.requests_text([(names[r], biggest)])
                    )
                else:
                    why = msg.too_big_for_cluster(parts, most)
        if why is None and within is not None:
            why = self._never_within(items, within, parts)
        self._never[key] = why
        return why

    def _never_within(
        self, items: Sequence[tuple[Shape, int]], within: Within, parts: list[tuple[int, int, str]]
    ) -> str | None:
        """Why no single domain of ``within`` could ever hold these pods (even with only pods that
        never end running there), or None."""
        capacity = self.capacity
        level = capacity.level_of(within.key)
        if level is None:
            return msg.topology_unlabelled(parts, within.key)
        if within.value is not None:
            found = capacity.domain_of(within.key, within.value)
            if found is None:
                return msg.topology_domain_gone(parts, within.key, within.value)
            domains = [found[1]]
        else:
            domains = list(range(len(capacity.dom_names[level])))
        best, most = "", -1
        for d in domains:
            fits, placed = ever_fits_on(self.state, items, capacity.dom_members[level][d])
            if fits:
                return None
            if placed > most:
                best, most = capacity.dom_names[level][d], placed
        return msg.too_big_for_any_domain(parts, within.key, best, most)

    def _shortfall(self, demand: Demand) -> str:
        key = (demand.key, self.capacity.version)
        found = self._shortfalls.get(key)
        if found is not None:
            return found
        if demand.slices is not None:
            text = self._slices_shortfall(demand, demand.slices)
            self._shortfalls[key] = text
            return text
        if demand.within is not None:
            text = self._domain_shortfall(demand, demand.within)
            self._shortfalls[key] = text
            return text
        placed, per_node = best_partial(self.capacity, demand.items)
        names = self.state.names
        counts = [(names[i], n) for i, n in per_node.items()]
        text = msg.shortfall(self._parts(demand.items), placed, counts, self.config.message_nodes)
        self._shortfalls[key] = text
        return text

    def _slices_shortfall(self, demand: Demand, slices: Slices) -> str:
        """How many slices fit now (inside the best domain of ``within``, if any): placed one at a
        time until one does not fit, then rolled back."""
        capacity = self.capacity
        shape, _ = demand.items[0]
        fitting = 0
        mark = capacity.mark()
        within = demand.within
        for key, count in slices.keyed:
            if topology.place_sliced(capacity, [(shape, count)], Slices(((key, count),)), within) is None:
                break
            fitting += 1
        capacity.rollback(mark)
        outer = within.key if within is not None else None
        parts = self._parts(demand.items)
        if slices.size:
            total = len(slices.parts)
            return msg.slices_shortfall(parts, total, slices.size, slices.key, outer, fitting)
        return msg.subgroups_shortfall(parts, len(slices.keyed), outer, fitting)

    def _domain_shortfall(self, demand: Demand, within: Within) -> str:
        """Why a gang held to one domain does not fit now: the domain with the most free room of the
        resource that binds it, and the cluster's, said in that resource."""
        capacity = self.capacity
        items = demand.items
        parts = self._parts(items)
        names = self.state.resources.names
        r = GPU if any(shape.gpu for shape, _ in items) else binding_resource(capacity, items[0][0], names)
        need = sum(n * a for shape, n in items for rr, a in shape.vec if rr == r)
        level = capacity.level_of(within.key)
        assert level is not None  # _never_fits said so otherwise
        # The free room of `r` on nodes the members may use: per domain of the level, and in all.
        usable = (
            items[0][0].mask.indices if len(items) == 1 else {i for s, _ in items for i in s.mask.indices}
        )
        visible, free, dom_of = capacity.visible, capacity.free, capacity.dom_of[level]
        rooms = [0] * len(capacity.dom_names[level])
        cluster = 0
        for i in usable:
            f = free[i][r]
            if f > 0 and visible[i]:
                cluster += f
                d = dom_of[i]
                if d >= 0:
                    rooms[d] += f
        if within.value is not None:
            found = capacity.domain_of(within.key, within.value)
            domains = [found[1]] if found is not None else []
        else:
            domains = list(range(len(rooms)))
        members = capacity.dom_members[level]
        best = max(domains, key=lambda d: (rooms[d], -d), default=None)
        best_room = rooms[best] if best is not None else 0
        best_name = capacity.dom_names[level][best] if best is not None else None
        mark = capacity.mark()
        cluster_fits = place(capacity, items, None, self.config.topology_attempts) is not None
        capacity.rollback(mark)
        if within.value is not None:
            return msg.no_room_in_home_domain(
                parts, within.key, within.value, names[r], best_room, cluster, cluster_fits
            )
        if best is not None and best_room >= need:
            # Room enough, but not in pieces the pods fit: say how many of them would.
            fits, _ = best_partial(capacity, items, members[best])
            return msg.no_single_domain_fit(parts, within.key, best_name or "", fits, cluster_fits)
        return msg.no_single_domain(
            parts, within.key, names[r], need, best_name, best_room, cluster, cluster_fits
        )

    # ---- admission ---------------------------------------------------------------------------

    def _admit_decision(self, gang: Gang, pods: Sequence[Pod], nodes: dict[str, int], text: str) -> Admit:
        names = self.state.names
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
        unheeded = topology.preference_unheeded(self.capacity, gang)
        if unheeded is not None:  # never spread silently: the PodGroup's message says so
            text = f"{text}; {unheeded}"
        return Admit(gang.key, placement, text, tuple(notes), booked)

    def _counts(self, pods: Sequence[Pod], nodes: dict[str, int]) -> list[tuple[str, int]]:
        per: dict[int, int] = {}
        for pod in pods:
            i = nodes.get(pod.uid)
            if i is not None:
                per[i] = per.get(i, 0) + 1
        return [(self.state.names[i], n) for i, n in per.items()]

    def _place(self, demand: Demand) -> tuple[list[Assignment], Domain | None] | None:
        """Place ``demand`` (booked) as its topology request says, or nothing."""
        capacity = self.capacity
        if demand.slices is not None:
            memo = self.state.memo
            if memo.known_failure(demand.items, demand.within):  # what fails unsliced fails sliced
                return None
            return topology.place_sliced(capacity, demand.items, demand.slices, demand.within)
        levels = topology.resolve(capacity, demand.levels) if demand.levels is not None else None
        return place(
            capacity, demand.items, self.state.memo, self.config.topology_attempts, demand.within, levels
        )

    def _try_place(self, required: Demand, extra: Sequence[Pod]) -> dict[str, int] | None:
        """Place all `required` pods or none, then as many of `extra` as fit. Booked on success."""
        placed = self._place(required)
        if placed is None:
            return None
        result, domain = placed
        nodes = self._assign(required.groups, required.items, result)
        if extra:
            extra_groups = self._groups(extra)
            extra_items = self._items(extra_groups)
            confined = required.within is not None
            nodes.update(
                self._assign(
                    extra_groups, extra_items, place_extra(self.capacity, extra_items, domain, confined)
                )
            )
        return nodes

    def _place_asker(self, gang: Gang, demand: Demand, extra: Sequence[Pod]) -> dict[str, int] | None:
        """Place, except that a gang whose ProvisioningRequest is not answered yet does not take
        nodes registered since it asked: they may have been made for another gang's request. A
        booked gang may also use nodes held for a booked gang before it that registered since its
        own request: they may be its own (the requests do not name nodes)."""
        if gang.capacity_awaited:
            hidden = self._registered_since(gang.capacity_since)
            self.capacity.exclude(hidden)
            try:
                return self._try_place(demand, extra)
            finally:
                self.capacity.include(hidden)
        since = gang.capacity_since
        if not gang.capacity_booked or since is None or not self.bookings:
            return self._try_place(demand, extra)
        nodes = self.state.nodes
        shared = [i for _, held in self.bookings for i in held if nodes[i].created >= since]
        self.capacity.include(shared)
        try:
            return self._try_place(demand, extra)
        finally:
            self.capacity.exclude(shared)  # still held for the gang before it, less what this one took

    def _registered_since(self, since: float | None) -> list[int]:
        """The visible nodes created at or after ``since`` (every visible node when unknown)."""
        visible = self.capacity.visible
        return [
            i
            for i, node in enumerate(self.state.nodes)
            if visible[i] and (since is None or node.created >= since)
        ]

    def _hold_booked(self, gang: Gang, demand: Demand, wait: Wait) -> Wait:
        """A booked gang that does not fit yet keeps the nodes registered since its request that
        its members could use, for the rest of the pass: gangs planned after it cannot take them."""
        if gang.capacity_since is None:
            return wait  # which nodes were made for it is not known
        # Only nodes where some member fits now: a node too small for them is not theirs.
        capacity = self.capacity
        vecs = [(shape.mask.flags, shape.vec) for shape, _ in demand.items]
        held = [
            i
            for i in self._registered_since(gang.capacity_since)
            if any(flags[i] and capacity.fits(i, vec) > 0 for flags, vec in vecs)
        ]
        if not held:
            return wait
        self.capacity.exclude(held)
        self.bookings.append((gang, held))
        names = [self.state.names[i] for i in held]
        return replace(wait, message=msg.booked_nodes_held(wait.message, names, self.config.message_nodes))

    def _would_fit_unblocked(self, demand: Demand, nodes: list[int], tag: str) -> bool:
        """Would the demand fit with ``nodes`` (held back in this pass) given back?"""
        key = (demand.key, self.capacity.version, tag)
        known = self._unblocked.get(key)
        if known is not None:
            return known
        mark = self.capacity.mark()
        self.capacity.include(nodes)
        attempts = self.config.topology_attempts
        ok = place(self.capacity, demand.items, self.unblocked_memo, attempts, demand.within) is not None
        self.capacity.rollback(mark)
        self.capacity.exclude(nodes)
        self.capacity.version = mark[1]  # the very state of before
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
        invalid = invalid_spec(gang, self.config)
        if invalid is not None:
            return Reject(gang.key, Reason.INVALID_SPEC, invalid)
        timed_out = self._timed_out(gang)
        live = [m for m in gang.members if is_live(m)]
        not_ready = self._not_ready(gang, live, timed_out)
        if not_ready is not None:
            return not_ready
        return self._start(gang, live, timed_out)

    def _not_ready(self, gang: Gang, live: list[Pod], timed_out: bool) -> Wait | None:
        """Why the gang cannot even try to start (its queue, missing members, another system's
        gates, minResources), or None."""
        book = self.state.queues
        blocked = book.blocked(gang) if book is not None else None
        if blocked is not None:
            return self._wait(gang, blocked[0], blocked[1], timed_out)
        if len(live) < gang.min_member:
            return self._incomplete(gang, live, timed_out)
        for name, need in sorted(gang.subgroups.items()):
            have = sum(1 for m in live if m.labels.get(SUBGROUP) == name)
            if have < need:
                return self._wait(
                    gang, Reason.WAITING_FOR_MEMBERS, msg.waiting_for_subgroup(name, have, need), timed_out
                )
        unproven = devices_unproven(live)
        if unproven is not None:
            return self._wait(gang, Reason.DEVICES_UNPROVEN, unproven, timed_out)
        if any(m.foreign_gates for m in live):
            gates = sorted({g for m in live for g in m.foreign_gates})
            return self._wait(gang, Reason.FOREIGN_GATES, msg.foreign_gates(gates), timed_out)
        short = self._min_resources_short(gang, live)
        if short:
            return self._wait(gang, Reason.INSUFFICIENT_CAPACITY, msg.min_resources_short(short), timed_out)
        return None

    def _start(self, gang: Gang, live: list[Pod], timed_out: bool) -> Decision | None:
        """Admit the first min_member gated members (and the elastic ones that fit), or say why not."""
        admitted = gang.admitted
        pending = [m for m in live if m.gated and m.uid not in admitted]
        if len(pending) > 1:
            pending.sort(key=member_order)
        # Members already handed to the scheduler without our gate (created before the namespace
        # opted in) count toward minMember but hold no room yet: the proof must include them.
        loose = [
            m
            for m in live
            if not m.gated and m.node_name is None and not m.nominated_node and m.uid not in admitted
        ]
        if len(loose) > 1:
            loose.sort(key=member_order)
        others = len(live) - len(pending)
        required_n = max(0, gang.min_member - others)
        if gang.subgroups:
            pending, for_subgroups = _subgroups_first(gang, live, pending)
            required_n = max(required_n, for_subgroups)
        if required_n == 0:
            return self._grow(gang)
        allowed = len(pending) if gang.max_member is None else max(required_n, gang.max_member - others)
        required, extra = [*loose, *pending[:required_n]], pending[required_n:allowed]
        book = self.state.queues
        queue = book.leaf(gang.queue) if book is not None else None
        if book is not None and queue is not None:
            request = total_requests(required)
            over = book.over_limit(queue, request)
            if over is not None:
                return self._wait(gang, Reason.QUEUE_LIMIT, over, timed_out)
            extra = book.within_limit(queue, request, extra)
        demand = self._demand(required, self._within(gang), gang)
        nodes = self._place_asker(gang, demand, extra)
        if nodes is None:
            decision = (
                self._wait(gang, Reason.INSUFFICIENT_CAPACITY, msg.awaiting_own_capacity(), timed_out)
                if gang.capacity_awaited
                else self._cannot_fit(gang, demand, timed_out)
            )
            if not isinstance(decision, Wait) or decision.reason not in CAPACITY_WAITS:
                return decision
            if gang.capacity_booked:
                decision = self._hold_booked(gang, demand, decision)
            # A capacity request asks for the members the gang needs to start, and only while its
            # queue could take them beside what the gangs planned before it ask for.
            may_ask = book is None or queue is None or book.ask(queue, total_requests(required))
            return replace(decision, may_ask=may_ask, asks_for=tuple(m.uid for m in required if m.gated))
        self.state.drop_held(gang.key)
        started = [p for p in pending if p.uid in nodes]
        if book is not None and queue is not None:
            book.book(queue, total_requests([*loose, *started]))
        text = msg.admitted(
            self._counts(started, nodes), gang.placement == Placement.PINNED, self.config.message_nodes
        )
        return self._admit_decision(gang, started, nodes, text)

    def _incomplete(self, gang: Gang, live: Sequence[Pod], timed_out: bool) -> Wait:
        """Fewer members than minMember exist. If the whole gang, its missing members shaped like
        the first ones, could never run on this cluster, waiting for them is not the news."""
        if live:
            # In member order, not snapshot order: the same gang must give the same answer.
            items = self._items(self._groups(sorted(live, key=member_order)))
            shape, count = items[0]
            whole = [(shape, count + gang.min_member - len(live)), *items[1:]]
            never = self._never_fits(whole, None, self._within(gang))
            if never is not None:
                text = msg.never_fits_when_complete(len(live), gang.min_member, never)
                return self._wait(gang, Reason.UNSCHEDULABLE, text, timed_out)
        text = msg.waiting_for_members(len(live), gang.min_member)
        return self._wait(gang, Reason.WAITING_FOR_MEMBERS, text, timed_out)

    def _min_resources_short(self, gang: Gang, live: Sequence[Pod]) -> list[tuple[str, int, int]]:
        """(resource, wanted, free) of each minResources entry that is not free right now on the
        nodes the gang's members may use (as Coscheduling, but not counting nodes its selectors
        exclude: in a shared cluster, room the gang can never use does not help it start)."""
        if not gang.min_resources:
            return []
        usable: set[int] = set()
        for shape, _ in self._items(self._groups(live)):
            usable.update(shape.mask.indices)
        visible = self.capacity.visible
        index = self.state.resources.index
        short = []
        for name, wanted in sorted(gang.min_resources.items()):
            r = index.get(name)
            free = 0 if r is None else sum(max(self.capacity.free[i][r], 0) for i in usable if visible[i])
            if free < wanted:
                short.append((name, wanted, free))
        return short

    def _cannot_fit(self, gang: Gang, demand: Demand, timed_out: bool) -> Decision:
        never = self._never_fits(demand.items, demand.signature, demand.within)
        if never is None and demand.slices is not None:  # a slice no domain of its level could hold
            shape = demand.items[0][0]
            for key, count in sorted(set(demand.slices.keyed)):
                never = self._never_fits([(shape, count)], None, Within(key))
                if never is not None:
                    break
        if never is not None:
            return self._wait(gang, Reason.UNSCHEDULABLE, never, timed_out)
        if gang.held:
            terminating = self._held_terminating(gang)
            if terminating:
                return self._wait(gang, Reason.PREEMPTING, msg.preempting_wait(terminating), timed_out)
        if not timed_out:
            preempt = self._preempt(gang, demand)
            if preempt is not None:
                return preempt
        text = self._shortfall(demand)
        if self.reservation is not None and self._would_fit_unblocked(
            demand, self.reservation[1], "starving"
        ):
            return self._wait(
                gang,
                Reason.BLOCKED_BY_RESERVATION,
                msg.blocked(str(self.reservation[0].key), text),
                timed_out,
            )
        booked = [i for _, nodes in self.bookings for i in nodes]
        if booked and self._would_fit_unblocked(demand, booked, "booked"):
            holders = [str(holder.key) for holder, _ in self.bookings]
            return self._wait(
                gang, Reason.BLOCKED_BY_RESERVATION, msg.blocked_by_booking(holders, text), timed_out
            )
        if not timed_out:
            reserved = self._reserve(gang, demand, text)
            if reserved is not None:
                return reserved
        return self._wait(gang, Reason.INSUFFICIENT_CAPACITY, text, timed_out)

    def _reserve(self, gang: Gang, demand: Demand, text: str) -> Wait | None:
        """The pass's one starvation reservation, for this gang if it starves and nodes exist."""
        starving = self.config.starvation_age_seconds
        if (
            self.reservation is not None
            or starving is None
            or self.now - gang.wait_start <= starving
            or self._unit(gang)
            or demand.within is not None  # reserving would drain nodes of several domains
        ):
            return None
        nodes = reserve(self.state, demand.items)
        if not nodes:
            return None
        self.reservation = (gang, nodes)
        self.capacity.exclude(nodes)
        self.state.drop_held(gang.key)
        names = [self.state.names[i] for i in nodes]
        text = msg.reserved(self.now - gang.wait_start, names, self.config.message_nodes, text)
        return self._wait(gang, Reason.RESERVED, text, False, reserved_nodes=tuple(names))

    def _unit(self, gang: Gang) -> bool:
        """One pod of at most one GPU: nothing smaller can overtake it, so a reservation would only
        idle nodes (seen in trace replay: it spends the pass's one reservation for nothing)."""
        gated = [m for m in gang.members if m.gated]
        return len(gated) <= 1 and sum(m.requests.get(self.config.gpu_resource, 0) for m in gated) <= 1

    def _held_terminating(self, gang: Gang) -> int:
        """Terminating pods still on the nodes held for this gang (its victims, presumably)."""
        index = self.state.node_index
        nodes = {index[n] for n in gang.held.values() if n is not None and n in index}
        return sum(self.state.terminating.get(i, 0) for i in sorted(nodes))

    def _candidate_request(self, cand: Candidate) -> dict[str, int]:
        found = self._requests.get(id(cand))
        if found is not None:
            return found
        names = self.state.resources.names
        out: dict[str, int] = {}
        for _, vec in cand.bookings:
            for r, a in vec:
                if r:  # not "pods"
                    out[names[r]] = out.get(names[r], 0) + a
        self._requests[id(cand)] = out
        return out

    def _preempt(self, gang: Gang, demand: Demand) -> Preempt | None:
        """Priority preemption (inside the gang's queue, if it has one), else reclaim."""
        if not self.config.preemption or gang.preemption_policy == "Never":
            return None
        book = self.state.queues
        queue = book.leaf(gang.queue) if book is not None else None
        found = self._priority_victims(gang, demand, queue)
        reclaim = False
        if found is None and book is not None and queue is not None:
            found = self._reclaim_victims(gang, demand, book, queue)
            reclaim = found is not None
        if found is None:
            return None
        victims, result = found
        return self._preempt_decision(gang, demand, victims, result, queue, reclaim)

    def _priority_victims(self, gang: Gang, demand: Demand, queue: str | None) -> Found:
        """Strictly lower-priority victims (of the gang's own queue, if it has one)."""
        lowest = self.state.min_running_priority
        if (
            lowest is None
            or gang.priority <= lowest
            or self.preemption.searches >= self.config.max_preemption_searches
        ):
            return None
        if self.state.queues is None or queue is None:
            return self.preemption.search(
                gang, demand.items, demand.key, within=demand.within, slices=demand.slices
            )

        def lower(cand: Candidate) -> bool:
            return cand.priority < gang.priority

        return self.preemption.search(
            gang,
            demand.items,
            demand.key,
            lower,
            scope=f"queue:{queue}",
            queues=(queue,),
            within=demand.within,
            slices=demand.slices,
        )

    def _reclaim_victims(self, gang: Gang, demand: Demand, book: QueueBook, queue: str) -> Found:
        """Gangs of queues above their fair share, when the gang's queue stays within its quota."""
        limit = self.config.max_preemption_searches
        if self.preemption.searches >= limit or self._reclaims >= limit:
            return None
        request = total_requests(p for _, pods in demand.groups.values() for p in pods)
        if not book.may_reclaim(queue, request):
            return None
        victim_filter = book.reclaim_filter(queue)
        gpu = self.config.gpu_resource
        if not victim_filter.queues or request.get(gpu, 0) > self.capacity.sums[GPU] + victim_filter.room(
            gpu
        ):
            return None
        accepts = victim_filter.accepts

        def reclaimable(cand: Candidate) -> bool:
            return accepts(cand.queue, self._candidate_request(cand))

        self._reclaims += 1  # every attempt counts: each may scan all candidates
        return self.preemption.search(
            gang,
            demand.items,
            demand.key,
            reclaimable,
            scope=f"reclaim:{queue}",
            queues=victim_filter.queues,
            within=demand.within,
            slices=demand.slices,
        )

    def _preempt_decision(
        self,
        gang: Gang,
        demand: Demand,
        victims: list[Candidate],
        result: list[Assignment],
        queue: str | None,
        reclaim: bool,
    ) -> Preempt:
        """Hold the room the victims leave for the preemptor, mark them taken, and say so."""
        items = demand.items
        for (shape, _), assignment in zip(items, result, strict=True):
            for i, n in assignment:
                self.capacity.book(i, shape.vec, n)  # held for the preemptor for the rest of the pass
        self.state.drop_held(gang.key)
        nodes = self._assign(demand.groups, items, result)
        names = self.state.names
        pods = [p for _, group in demand.groups.values() for p in group]
        placement: dict[str, str | None] = {
            p.uid: names[nodes[p.uid]] for p in sorted(pods, key=member_order)
        }
        merged = self._take_victims(victims)
        book = self.state.queues
        if book is not None and queue is not None:
            book.book(queue, total_requests(pods))  # the room held for it counts as its own
        gpu = self.config.gpu_resource
        out_victims = tuple(
            Victim(
                cands[0].gang,
                tuple(sorted(uid for c in cands for uid in c.uids)),
                namespace,
                sum(self._candidate_request(c).get(gpu, 0) for c in cands),
                whole=not cands[0].single,
            )
            for (namespace, _), cands in merged
        )
        evicted = sum(v.gpus for v in out_victims)
        gained = sum(p.requests.get(gpu, 0) for p in pods)
        lost = self._gpu_seconds({uid for v in out_victims for uid in v.pods}, gpu)
        cost = msg.preemption_cost(evicted, gained, gpu)
        used_nodes = sorted({names[i] for i in nodes.values()})
        limit = self.config.message_nodes
        if reclaim:
            assert book is not None
            labelled = [
                (label, book.leaf(c[0].queue) or "", len({u for x in c for u in x.uids}))
                for (_, label), c in merged
            ]
            from_queues = sorted({q for _, c in merged if (q := book.leaf(c[0].queue)) is not None})
            text = msg.reclaiming(self._parts(items), labelled, used_nodes, limit)
            return Preempt(
                gang.key,
                out_victims,
                placement,
                f"{text}; {cost}",
                tuple(from_queues),
                evicted,
                gained,
                gpu,
                lost,
            )
        described = [(label, c[0].priority, sum(len(x.uids) for x in c)) for (_, label), c in merged]
        text = msg.preempting(self._parts(items), described, used_nodes, limit)
        return Preempt(gang.key, out_victims, placement, f"{text}; {cost}", (), evicted, gained, gpu, lost)

    def _gpu_seconds(self, victims: set[str], gpu: str) -> float:
        """The GPUs (DRA devices included: the pods are translated) of the victims' pods, each times
        how long it has run."""
        now = self.state.now
        return sum(
            p.requests.get(gpu, 0) * max(0.0, now - (p.started if p.started is not None else now))
            for p in self.state.snapshot.pods
            if p.uid in victims
        )

    def _take_victims(self, victims: list[Candidate]) -> list[tuple[tuple[str, str], list[Candidate]]]:
        """Mark the victims taken for the rest of the pass, give their queues' usage back, and
        merge them per (namespace, label): an elastic slice and the rest of its gang are one."""
        merged: dict[tuple[str, str], list[Candidate]] = {}
        for cand in victims:
            cand.taken = True
            if cand.gang is not None:
                self.victims.add(cand.gang)
            merged.setdefault((cand.namespace, cand.label), []).append(cand)
        book = self.state.queues
        ordered = sorted(merged.items())
        if book is not None:
            for _, cands in ordered:
                victim_queue = book.leaf(cands[0].queue)
                if victim_queue is not None:
                    for cand in cands:
                        book.book(victim_queue, self._candidate_request(cand), -1)
        return ordered

    def _grow(self, gang: Gang) -> Decision | None:
        """An admitted gang: the members it is short of -- its workload was scaled up, or members
        were lost -- start together once all of them fit; members beyond its size (elastic, up to
        max_member) join one by one as they fit. It never preempts for them."""
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
        missing = max(0, gang.min_member - others)
        unproven = devices_unproven(pending)
        if unproven is not None:  # never placed on a guess: the required ones wait, saying why
            if devices_unproven(pending[:missing]) is not None:
                why = msg.short_of_room(missing, gang.min_member, unproven)
                return Short(gang.key, Reason.DEVICES_UNPROVEN, why, missing)
            pending = [m for m in pending if m.devices_unproven is None]
            if not pending:
                return None
        if missing > len(pending):
            text = msg.short_of_members(missing, gang.min_member, len(pending))
            return Short(gang.key, Reason.WAITING_FOR_MEMBERS, text, missing)
        allowed = len(pending) if gang.max_member is None else max(missing, gang.max_member - others)
        required, extra = pending[:missing], pending[missing:allowed]
        book = self.state.queues
        queue = book.leaf(gang.queue) if book is not None else None
        if book is not None and queue is not None:
            request = total_requests(required)
            over = book.over_limit(queue, request) if required else None
            if over is not None:
                return Short(
                    gang.key, Reason.QUEUE_LIMIT, msg.short_of_room(missing, gang.min_member, over), missing
                )
            extra = book.within_limit(queue, request, extra)  # a queue's limit binds growth too
        home = self._home(gang)
        if required:
            nodes = self._try_place(self._demand(required, home), extra)
            if nodes is None:
                return self._short_of_room(gang, required, missing, home)
        else:
            groups = self._groups(extra)
            items = self._items(groups)
            domain = self.capacity.domain_of(home.key, home.value) if home and home.value else None
            if home is not None and domain is None:
                return None  # its domain is unknown or gone: no elastic member may start elsewhere
            nodes = self._assign(groups, items, place_extra(self.capacity, items, domain, home is not None))
            if not nodes:
                # Nothing fits now: no decision (the gang is whole; its elastic members stay gated
                # until room appears).
                return None
        admitted = [p for p in pending if p.uid in nodes]
        if book is not None and queue is not None:
            book.book(queue, total_requests(admitted))
        waiting = len(required) + len(extra) - len(admitted)
        text = msg.grown(self._counts(admitted, nodes), waiting, self.config.message_nodes)
        return self._admit_decision(gang, admitted, nodes, text)

    def _short_of_room(self, gang: Gang, required: Sequence[Pod], missing: int, home: Within | None) -> Short:
        demand = self._demand(required, home)
        never = self._never_fits(demand.items, demand.signature, demand.within)
        reason = Reason.UNSCHEDULABLE if never is not None else Reason.INSUFFICIENT_CAPACITY
        why = never if never is not None else self._shortfall(demand)
        return Short(gang.key, reason, msg.short_of_room(missing, gang.min_member, why), missing)

    # ---- parent groups ------------------------------------------------------------------------

    def _family_over_limit(self, ready: Sequence[Ready]) -> str | None:
        """Why the children's minimums together would break a queue's limit, or None."""
        book = self.state.queues
        if book is None:
            return None
        per_queue: dict[str, dict[str, int]] = {}
        for child, required, _ in ready:
            queue = book.leaf(child.queue)
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
        parent_gang = self.state.gang(GangKey(namespace, parent))
        needed = max(1, parent_gang.min_member) if parent_gang is not None else max(2, len(children))
        siblings = self._siblings(children)
        decisions = siblings.rejects
        if len(siblings.ready) < needed:
            text = msg.waiting_for_siblings(parent, len(siblings.ready), needed, siblings.details)
            decisions.extend(
                self._wait(child, Reason.WAITING_FOR_PARENT, text, self._timed_out(child))
                for child in siblings.waiting
            )
            return decisions
        for child, reason, text in siblings.unready:
            decisions.append(self._wait(child, reason, text, self._timed_out(child)))
        ready = siblings.ready
        over = self._family_over_limit(ready)
        if over is not None:
            decisions.extend(
                self._wait(child, Reason.QUEUE_LIMIT, msg.family_waits(parent, over), self._timed_out(child))
                for child, _, _ in ready
            )
            return decisions
        decisions.extend(self._start_family(parent, ready))
        return decisions

    def _siblings(self, children: list[Gang]) -> Siblings:
        """Sort the children out: invalid (rejected), not ready (too few members, foreign gates),
        ready (with the members each must start and the elastic ones it may)."""
        siblings = Siblings()
        for child in children:
            if child.key in self.victims:
                continue
            invalid = invalid_spec(child, self.config)
            if invalid is not None:
                siblings.rejects.append(Reject(child.key, Reason.INVALID_SPEC, invalid))
                siblings.details.append(msg.sibling_detail(child.key.name, "invalid"))
                continue
            siblings.waiting.append(child)
            live = [m for m in child.members if is_live(m)]
            if len(live) < child.min_member:
                siblings.not_ready(
                    child, Reason.WAITING_FOR_MEMBERS, msg.waiting_for_members(len(live), child.min_member)
                )
                continue
            gates = sorted({g for m in live for g in m.foreign_gates})
            if gates:
                siblings.not_ready(child, Reason.FOREIGN_GATES, msg.foreign_gates(gates))
                continue
            unproven = devices_unproven(live)
            if unproven is not None:
                siblings.not_ready(child, Reason.DEVICES_UNPROVEN, unproven)
                continue
            pending = sorted((m for m in live if m.gated and m.uid not in child.admitted), key=member_order)
            others = len(live) - len(pending)
            required_n = max(0, child.min_member - others)
            allowed = len(pending) if child.max_member is None else max(required_n, child.max_member - others)
            siblings.ready.append((child, pending[:required_n], pending[required_n:allowed]))
        return siblings

    def _start_family(self, parent: str, ready: list[Ready]) -> list[Decision]:
        """Every ready child at its minimum, placed jointly (then the elastic members that fit), or
        all of them wait."""
        # Siblings start together, so one required topology holds them all (the first child's).
        within = next((w for child, _, _ in ready if (w := self._within(child)) is not None), None)
        required = self._demand([p for _, req, _ in ready for p in req], within)
        extra = [p for _, _, ext in ready for p in ext]
        nodes = self._try_place(required, extra)
        if nodes is None:
            never = self._never_fits(required.items, required.signature, required.within)
            reason = Reason.UNSCHEDULABLE if never is not None else Reason.INSUFFICIENT_CAPACITY
            text = msg.family_waits(parent, never if never is not None else self._shortfall(required))
            return [self._wait(child, reason, text, self._timed_out(child)) for child, _, _ in ready]
        decisions: list[Decision] = []
        book = self.state.queues
        for child, req, ext in ready:
            pods = [p for p in (*req, *ext) if p.uid in nodes]
            queue = book.leaf(child.queue) if book is not None else None
            if book is not None and queue is not None:
                book.book(queue, total_requests(pods))
            pinned = child.placement == Placement.PINNED
            admitted = msg.admitted(self._counts(pods, nodes), pinned, self.config.message_nodes)
            decisions.append(self._admit_decision(child, pods, nodes, msg.family_admitted(parent, admitted)))
        return decisions
