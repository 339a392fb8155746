"""Everything one planning pass derives from a snapshot before deciding: sorted nodes, the resource
index, constraint masks, pod shapes and the free room on every node.

Used room on a node (DESIGN "capacity"):

- every pod of ``snapshot.pods`` that holds capacity (bound or nominated, not finished; any
  namespace), plus bound gang members missing from ``snapshot.pods``;
- admitted-but-unbound gang members (``Gang.admitted``: reservations; a member already bound or
  nominated is not counted twice; an unpinned one is counted on ``Gang.booked``);
- ``Gang.held`` rooms of preemptors: booked lazily, once the pass reaches gangs that come after the
  holder in the pass order (lower priority, or equal and younger); the holder itself, and gangs
  ahead of it, may use it.

What depends on the nodes alone (``NodeTable``) is derived once per set of Node objects and shared
by the passes given the very same objects (``node_table``); everything else is the pass's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from controller.core.capacity import GPU, Capacity, ResourceIndex, Topology, Vector
from controller.core.config import PlannerConfig, preferred_levels
from controller.core.fit import Eligibility
from controller.core.model import Gang, GangKey, Node, Pod, Snapshot
from controller.core.ordering import gang_order, reranked_locally
from controller.core.placement import FitMemo
from controller.core.queues import QueueBook
from controller.core.shapes import ShapeBook
from controller.core.topology import resolve_tiers


def _unique_nodes(nodes: Iterable[Node]) -> list[Node]:
    out: list[Node] = []
    seen: set[str] = set()
    for node in sorted(nodes, key=lambda n: n.name):
        if node.name not in seen:
            seen.add(node.name)
            out.append(node)
    return out


def unique_gangs(gangs: Iterable[Gang]) -> list[Gang]:
    """Gangs in planning order, one per key."""
    out: list[Gang] = []
    seen: set[tuple[str, str]] = set()
    for gang in sorted(gangs, key=gang_order):
        key = (gang.key.namespace, gang.key.name)
        if key not in seen:
            seen.add(key)
            out.append(gang)
    return reranked_locally(out)  # already sorted by gang_order: only the local re-rank is left


def is_live(pod: Pod) -> bool:
    return not pod.finished and not pod.terminating


class NodeTable:
    """What a pass derives from the nodes alone: the nodes sorted by name (one per name), the
    resource index, allocatable rows, eligibility (its masks cached as passes ask for them) and the
    topology. Read-only for the passes that share it (see ``node_table``)."""

    def __init__(self, nodes: Iterable[Node], config: PlannerConfig) -> None:
        self.nodes = _unique_nodes(nodes)
        self.names = [node.name for node in self.nodes]
        self.node_index = {name: i for i, name in enumerate(self.names)}
        resource_names: set[str] = set()
        for node in self.nodes:
            resource_names.update(node.allocatable)
        self.resources = ResourceIndex(config.gpu_resource, resource_names)
        width = len(self.resources)
        index = self.resources.index
        self.alloc: list[list[int]] = []
        for node in self.nodes:
            row = [0] * width
            for name, amount in node.allocatable.items():
                row[index[name]] = amount
            self.alloc.append(row)
        self.eligibility = Eligibility(self.nodes)
        self.topology = Topology([node.labels for node in self.nodes], preferred_levels(config))
        self.max_gpus = max((row[GPU] for row in self.alloc), default=0)


# The last node tables built, newest first: (the nodes they were built from, the config fields
# they depend on, the table). Two, so that a what-if pass on modified nodes does not evict the
# real cluster's.
_TABLES: list[tuple[Sequence[Node], tuple[object, ...], NodeTable]] = []
_KEEP_TABLES = 2


def node_table(nodes: Sequence[Node], config: PlannerConfig) -> NodeTable:
    """The NodeTable of these very Node objects, in this order: built once, then shared by every
    pass that is given the same objects (a controller that keeps its unchanged Node records, a
    replay). Node records are frozen, so the same objects always derive the same table; any new or
    reordered node builds a new one. Not I/O and not a result: only work not done twice."""
    key = (config.gpu_resource, config.topologies)
    for seen, seen_key, table in _TABLES:
        if seen_key == key and (
            seen is nodes
            or (len(seen) == len(nodes) and all(a is b for a, b in zip(seen, nodes, strict=True)))
        ):
            return table
    table = NodeTable(nodes, config)
    _TABLES.insert(0, (nodes, key, table))
    del _TABLES[_KEEP_TABLES:]
    return table


class PassState:
    def __init__(self, snapshot: Snapshot, config: PlannerConfig) -> None:
        self.snapshot = snapshot
        self.config = config
        self.now = snapshot.now
        table = node_table(snapshot.nodes, config)
        self.nodes = table.nodes
        self.names = table.names
        self.node_index = table.node_index
        self.resources = table.resources
        self.alloc = table.alloc
        self.eligibility = table.eligibility
        self.shapes = ShapeBook(self.resources, self.eligibility)
        carried = table.topology.level  # Volcano tiers count the levels some node carries
        self.gangs = [
            resolve_tiers(gang, config, lambda key: carried(key) is not None)
            for gang in unique_gangs(snapshot.gangs)
        ]
        self._gang_by_key: dict[GangKey, Gang] | None = None
        # uid -> node, and uid -> request, of everything that holds room (exact release in victim
        # search). Two maps, not one of pairs: a pair per pod of a big cluster is 50,000 objects
        # that outlive the pass's young garbage collections and make the old ones run.
        self.booked: dict[str, int] = {}
        self.booked_requests: dict[str, Vector] = {}
        self.permanent: dict[int, list[int]] = {}  # node -> room taken by pods that never end
        self.terminating: dict[int, int] = {}  # node -> terminating pods still holding room there
        self.min_running_priority: int | None = None
        free = [list(row) for row in self.alloc]
        self._count_usage(free)
        self.queues = self._queue_book(free)  # re-ranks self.gangs when there are queues
        self._position: dict[GangKey, int] | None = None  # built when a holder needs it
        self.capacity = Capacity(self.names, free, self.eligibility.candidate, table.max_gpus, table.topology)
        self.memo = FitMemo()
        self._held = self._collect_held()
        self._drained: list[list[int]] | None = None

    def _queue_book(self, free: list[list[int]]) -> QueueBook | None:
        """Queues (if any) re-rank queued gangs by fairness; a gang without a queue keeps its place."""
        if not self.snapshot.queues:
            return None
        room = [0] * len(self.resources)
        for i, row in enumerate(free):
            if self.eligibility.candidate[i]:
                for r, amount in enumerate(row):
                    if amount > 0:
                        room[r] += amount
        free_room = {name: room[r] for r, name in enumerate(self.resources.names)}
        snapshot = self.snapshot
        book = QueueBook(
            snapshot.queues, self.gangs, free_room, self.config.gpu_resource, snapshot.grants, snapshot.pods
        )
        self.gangs = book.order()
        return book

    # ---- usage -------------------------------------------------------------------------------

    def _take(self, free: list[list[int]], pod: Pod, node: str | None) -> None:
        """Count `pod` on `node` (if the node is known)."""
        if node is None:
            return
        i = self.node_index.get(node)
        if i is None:
            return
        vec = self.resources.vector(pod.requests)[0]
        row = free[i]
        for r, a in vec:
            row[r] -= a
        self.booked[pod.uid] = i
        self.booked_requests[pod.uid] = vec
        self._note(i, pod, vec)

    def _note(self, i: int, pod: Pod, vec: Vector) -> None:
        if pod.terminating:
            self.terminating[i] = self.terminating.get(i, 0) + 1
        owner = pod.owner
        if owner is not None and owner.kind in self.config.permanent_owner_kinds:
            perm = self.permanent.setdefault(i, [0] * len(self.resources))
            for r, a in vec:
                perm[r] += a

    def _count_usage(self, free: list[list[int]]) -> None:
        lowest = self._count_pods(free)
        self.min_running_priority = self._count_members(free, lowest)

    def _count_pods(self, free: list[list[int]]) -> int | None:
        """Take the room of every pod that holds some; the lowest priority among them."""
        booked = self.booked
        booked_requests = self.booked_requests
        index_get = self.node_index.get
        known = self.resources.known.get
        vector = self.resources.vector
        permanent_kinds = frozenset(self.config.permanent_owner_kinds)
        permanent = self.permanent
        terminating = self.terminating
        width = len(self.resources)
        lowest: int | None = None
        # The hot loop (50,000 pods): everything local.
        for pod in self.snapshot.pods:
            node = pod.node_name or pod.nominated_node
            if node is None:
                continue
            phase = pod.phase
            if phase == "Succeeded" or phase == "Failed":  # noqa: PLR1714 - hot path
                continue
            uid = pod.uid
            if uid in booked:
                continue
            i = index_get(node)
            if i is None:
                continue
            requests = pod.requests
            found = known(tuple(requests.items()))  # ResourceIndex.vector without the call
            vec = found[0] if found is not None else vector(requests)[0]
            row = free[i]
            for r, a in vec:
                row[r] -= a
            booked[uid] = i
            booked_requests[uid] = vec
            owner = pod.owner
            if owner is not None and owner.kind in permanent_kinds:  # _note, inline: a DaemonSet per node
                taken = permanent.get(i)
                if taken is None:
                    taken = permanent[i] = [0] * width
                for r, a in vec:
                    taken[r] += a
            if pod.terminating:
                terminating[i] = terminating.get(i, 0) + 1
            if lowest is None or pod.priority < lowest:
                lowest = pod.priority
        return lowest

    def _count_members(self, free: list[list[int]], lowest: int | None) -> int | None:
        """Take the room of bound gang members missing from the pods, and of admitted members not
        bound yet; the lowest priority of running work, running gangs included."""
        booked = self.booked
        for gang in self.gangs:
            running = False
            for member in gang.members:
                if member.node_name is None and member.nominated_node is None:
                    continue
                if member.uid in booked:  # the common case: counted with the pods
                    running = True
                elif not member.finished:
                    self._take(free, member, member.node_name or member.nominated_node)
                    running = running or member.uid in booked
            if running and (lowest is None or gang.priority < lowest):
                lowest = gang.priority
            admitted = gang.admitted
            if not admitted or admitted.keys() <= booked.keys():
                continue
            members = {m.uid: m for m in gang.members}
            for uid, node_name in admitted.items():
                reserved = members.get(uid)
                if reserved is None or uid in booked or not is_live(reserved):
                    continue
                self._take(free, reserved, node_name or gang.booked.get(uid))
        return lowest

    def _collect_held(self) -> list[tuple[int, GangKey, list[tuple[int, Vector]]]]:
        held = []
        for position, gang in enumerate(self.gangs):
            if not gang.held or gang.admitted or gang.admitted_at is not None:
                continue
            members = {m.uid: m for m in gang.members}
            rooms = []
            for uid, node in sorted(gang.held.items()):
                pod = members.get(uid)
                if pod is None or not is_live(pod) or uid in self.booked or node is None:
                    continue
                i = self.node_index.get(node)
                if i is not None:
                    rooms.append((i, self.resources.vector(pod.requests)[0]))
            if rooms:
                held.append((position, gang.key, rooms))
        return held

    @property
    def position(self) -> dict[GangKey, int]:
        """Gang -> its place in the pass order."""
        if self._position is None:
            self._position = {gang.key: i for i, gang in enumerate(self.gangs)}
        return self._position

    def gang(self, key: GangKey) -> Gang | None:
        if self._gang_by_key is None:
            self._gang_by_key = {gang.key: gang for gang in self.gangs}
        return self._gang_by_key.get(key)

    def book_held_before(self, gang: Gang) -> None:
        """Book the held rooms of every holder ahead of ``gang`` in the pass order."""
        if not self._held:
            return
        # A gang outside the pass (benchmarks decide one on its own) comes after every holder.
        order = self.position.get(gang.key, len(self.gangs))
        keep = []
        for holder_order, key, rooms in self._held:
            if holder_order < order:
                for i, vec in rooms:
                    self.capacity.book(i, vec)
            else:
                keep.append((holder_order, key, rooms))
        self._held = keep

    def drop_held(self, key: GangKey) -> None:
        """The holder was admitted, or preempted anew, in this pass: its old room is not booked."""
        self._held = [entry for entry in self._held if entry[1] != key]

    # ---- rooms that never free up ---------------------------------------------------------------

    def drained(self) -> list[list[int]]:
        """Per node: allocatable minus the room of pods that never end (DaemonSets)."""
        if self._drained is None:
            rows = [list(row) for row in self.alloc]
            for i, perm in self.permanent.items():
                row = rows[i]
                for r, a in enumerate(perm):
                    row[r] -= a
            self._drained = rows
        return self._drained
