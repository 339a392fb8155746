"""What would make a waiting gang start: the planner re-run on modified snapshots. Pure.

``kubectl phalanx explain`` asks three questions of one gang, each answered by planning again --
never by a formula of its own, so an answer is exactly as right as the planner:

- ``free_on_node``: the fewest GPUs that, freed on one node (by whatever ends there), let it start.
  Modelled as that node's allocatable GPUs raised by N: freeing GPUs by ending pods frees their CPU
  and memory too, so an answer found this way holds however the GPUs are freed;
- ``add_nodes``: the fewest extra nodes, copies of an existing one (labels, taints, allocatable),
  that let it start. The gang keeps its place in the order: gangs ahead of it take room first;
- ``free_in_domain`` (a gang held to one domain of a level): the fewest GPUs freed inside one
  domain of it that let it start ("free 4 GPUs in rack-3"). Modelled as the allocatable GPUs of
  the domain's nodes that hold some raised, the node holding the most first, so the freed room
  lies in as few nodes as it can;
- ``add_domain`` (the same gangs): the fewest nodes of a new domain of that level, copies of an
  existing domain's nodes (its most GPUs first, labelled as a domain of their own below the wider
  levels), that let it start ("a rack like rack-3 with 16 free GPUs");
- ``remove``: which running gangs (and opted-in pods) taken away would let it start: the
  preemption search run as if the gang outranked everything, then checked by planning without
  them at the gang's real priority. Each victim says whether it is of lower priority, i.e. whether
  Phalanx's own preemption may take it.

``explain`` also reports the gang's place in the order and its best partial placement, as seen at
the moment the pass reached it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from controller.core.capacity import GPU
from controller.core.config import PlannerConfig
from controller.core.fit import pod_allows_node
from controller.core.model import (
    Admit,
    Decision,
    Gang,
    GangKey,
    Node,
    Pod,
    Preempt,
    Reason,
    Short,
    Snapshot,
    Wait,
)
from controller.core.placement import best_partial
from controller.core.planner import Demand, PlanningPass
from controller.core.state import PassState, is_live
from controller.core.topology import resolve_tiers
from shared.constants import HOSTNAME_LABEL


@dataclass(frozen=True, slots=True)
class Partial:
    """The most members of the gang that fit right now, and where."""

    needed: int
    placed: int
    nodes: tuple[tuple[str, int], ...]  # (node, members), most first


@dataclass(frozen=True, slots=True)
class FreeOnNode:
    node: str
    resource: str
    amount: int
    # Pods holding that resource on the node now, most first: (namespace/name, amount, gang or None).
    holders: tuple[tuple[str, int, str | None], ...]


@dataclass(frozen=True, slots=True)
class AddNodes:
    like: str  # an existing node the new ones copy
    count: int
    allocatable: tuple[tuple[str, int], ...]  # of one new node


@dataclass(frozen=True, slots=True)
class FreeInDomain:
    key: str  # the level (node label key) the gang is held to
    value: str  # the domain
    resource: str
    amount: int
    # Pods holding that resource in the domain now, most first: (namespace/name, amount, gang or None).
    holders: tuple[tuple[str, int, str | None], ...]


@dataclass(frozen=True, slots=True)
class AddDomain:
    key: str  # the level (node label key) the gang is held to
    like: str  # the existing domain whose nodes the new one copies
    nodes: int  # nodes of the new domain
    resource: str
    free: int  # of that resource, in the new domain


@dataclass(frozen=True, slots=True)
class Removed:
    label: str  # namespace/name of the gang, or of the pod
    gang: GangKey | None
    priority: int
    pods: int
    lower_priority: bool  # Phalanx's preemption may take it (once it ran long enough)


@dataclass(frozen=True, slots=True)
class Remove:
    victims: tuple[Removed, ...]


Fix = FreeOnNode | FreeInDomain | AddNodes | AddDomain | Remove


@dataclass(frozen=True, slots=True)
class Explanation:
    gang: Gang
    position: int  # 1-based place in the planning order
    of: int  # gangs in the order
    ahead: tuple[GangKey, ...]  # not-yet-admitted gangs considered before it
    decision: Decision | None
    partial: Partial | None
    fixes: tuple[Fix, ...]


# ---- one pass, watched -----------------------------------------------------------------------


class _Watched(PlanningPass):
    """A planning pass that records the target gang's best partial placement when it cannot fit."""

    def __init__(self, snapshot: Snapshot, config: PlannerConfig, target: GangKey) -> None:
        super().__init__(snapshot, config)
        self.target = target
        self.partial: Partial | None = None

    def _cannot_fit(self, gang: Gang, demand: Demand, timed_out: bool) -> Decision:
        if gang.key == self.target:
            placed, per_node = self._best_partial(demand)
            nodes = sorted(
                ((self.state.names[i], n) for i, n in per_node.items()), key=lambda x: (-x[1], x[0])
            )
            self.partial = Partial(sum(n for _, n in demand.items), placed, tuple(nodes))
        return super()._cannot_fit(gang, demand, timed_out)

    def _best_partial(self, demand: Demand) -> tuple[int, dict[int, int]]:
        """The most of the gang that fits now: anywhere, or inside the one domain it requires
        that takes the most of it."""
        within = demand.within
        if within is None:
            return best_partial(self.capacity, demand.items)
        capacity = self.capacity
        level = capacity.level_of(within.key)
        if level is None:
            return 0, {}
        domains: Sequence[int] = range(len(capacity.dom_names[level]))
        if within.value is not None:
            found = capacity.domain_of(within.key, within.value)
            domains = [found[1]] if found is not None else []
        best: tuple[int, dict[int, int]] = (0, {})
        for d in domains:
            placed, per_node = best_partial(capacity, demand.items, capacity.dom_members[level][d])
            if placed > best[0]:
                best = (placed, per_node)
        return best


def decide(snapshot: Snapshot, key: GangKey, config: PlannerConfig) -> Decision | None:
    """The planner's decision for one gang on this snapshot (the whole pass runs: order matters)."""
    return PlanningPass(snapshot, config).run().for_gang(key)


def starts(snapshot: Snapshot, key: GangKey, config: PlannerConfig) -> bool:
    return isinstance(decide(snapshot, key, config), Admit)


def _gang(snapshot: Snapshot, key: GangKey, config: PlannerConfig | None = None) -> Gang:
    """The gang as a pass plans it (a Volcano tier resolved into its level)."""
    for gang in snapshot.gangs:
        if gang.key == key:
            carried = {label for node in snapshot.nodes for label in node.labels}
            return resolve_tiers(gang, config or PlannerConfig(), carried.__contains__)
    raise KeyError(str(key))


def _admitted(gang: Gang) -> bool:
    return gang.admitted_at is not None or bool(gang.admitted)


def explain(snapshot: Snapshot, key: GangKey, config: PlannerConfig | None = None) -> Explanation:
    """Everything ``kubectl phalanx explain`` says about one gang. Raises KeyError if unknown."""
    config = config or PlannerConfig()
    gang = _gang(snapshot, key, config)
    watched = _Watched(snapshot, config, key)
    order = watched.state.gangs  # the pass's own order (queues, when there are any, re-rank it)
    position = next(i for i, g in enumerate(order) if g.key == key)
    ahead = tuple(g.key for g in order[:position] if not _admitted(g) and any(m.gated for m in g.members))
    decision = watched.run().for_gang(key)
    fixes: list[Fix] = []
    if _needs_fix(decision):
        fixes.extend(free_on_node(snapshot, key, config)[:1])
        fixes.extend(free_in_domain(snapshot, key, config)[:1])
        fixes.extend(add_nodes(snapshot, key, config)[:1])
        fixes.extend(add_domain(snapshot, key, config)[:1])
        removed = remove(snapshot, key, config)
        if removed is not None:
            fixes.append(removed)
    return Explanation(gang, position + 1, len(order), ahead, decision, watched.partial, tuple(fixes))


def _needs_fix(decision: Decision | None) -> bool:
    """A gang that waits for room (not for members, gates or a bad spec) can be helped by room --
    also an admitted one whose new members (scaled up, replacements) wait for it (Short)."""
    return isinstance(decision, Wait | Short) and decision.reason in (
        Reason.INSUFFICIENT_CAPACITY,
        Reason.UNSCHEDULABLE,
        Reason.BLOCKED_BY_RESERVATION,
        Reason.RESERVED,
        Reason.PREEMPTING,
    )


# ---- searches --------------------------------------------------------------------------------


def _smallest(low: int, high: int, works: Callable[[int], bool]) -> int | None:
    """The smallest n in [low, high] for which ``works(n)`` (assumed monotone): doubling, then
    bisection, so a search costs O(log high) plans."""
    if high < low:
        return None
    n = low
    last_bad = low - 1
    while not works(n):
        last_bad = n
        if n >= high:
            return None
        n = min(high, max(n + 1, n * 2))
    good = n
    while good - last_bad > 1:
        mid = (good + last_bad) // 2
        if works(mid):
            good = mid
        else:
            last_bad = mid
    return good


def _waiting(gang: Gang) -> list[Pod]:
    """Live members with no room yet: gated, or handed to the scheduler unbound before opting in."""
    return [
        m
        for m in gang.members
        if is_live(m) and not m.bound and not m.nominated_node and m.uid not in gang.admitted
    ]


def _needed(gang: Gang) -> int:
    """How many waiting members must be placed for the gang to start (elastic ones are extra)."""
    placed = sum(1 for m in gang.members if is_live(m)) - len(_waiting(gang))
    return max(0, gang.min_member - placed)


def _gpu_need(gang: Gang, resource: str) -> int:
    return sum(m.requests.get(resource, 0) for m in _waiting(gang))


def _usable(gang: Gang, node: Node) -> bool:
    """Could some waiting member run on the node (selectors, affinity, taints) given room?"""
    return any(pod_allows_node(m, node) for m in _waiting(gang))


@dataclass(frozen=True, slots=True)
class _Room:
    """GPU arithmetic that bounds the searches before any planning: a node where even freeing
    everything could not add enough members is never re-planned."""

    per_member: int  # the smallest GPU request among waiting members (> 0)
    free: dict[str, int]  # usable node -> GPUs free now
    short: int  # members that cannot fit now even by GPU count alone (a lower bound)


def _room(snapshot: Snapshot, gang: Gang, config: PlannerConfig) -> _Room | None:
    resource = config.gpu_resource
    waiting = _waiting(gang)
    requests = [m.requests.get(resource, 0) for m in waiting]
    if not requests or min(requests) <= 0:
        return None  # some member needs no GPU: GPU counts bound nothing
    per_member = min(requests)
    state = PassState(snapshot, config)
    free = {
        name: max(0, state.capacity.free[i][GPU])
        for i, name in enumerate(state.names)
        if _usable(gang, state.nodes[i])
    }
    fit = sum(f // per_member for f in free.values())
    return _Room(per_member, free, max(0, _needed(gang) - fit))


def free_on_node(snapshot: Snapshot, key: GangKey, config: PlannerConfig | None = None) -> list[FreeOnNode]:
    """Per node, the fewest GPUs freed there that let the gang start; smallest first."""
    config = config or PlannerConfig()
    resource = config.gpu_resource
    gang = _gang(snapshot, key, config)
    need = _gpu_need(gang, resource)
    if need == 0:
        return []
    holders = _holders(snapshot, gang, resource)
    room = _room(snapshot, gang, config)
    found: list[FreeOnNode] = []
    for node in sorted(snapshot.nodes, key=lambda n: n.name):
        held = sum(a for _, a, _ in holders.get(node.name, ()))
        if not held or not _usable(gang, node):
            continue
        if room is not None:
            free = room.free.get(node.name, 0)
            gain = (free + held) // room.per_member - free // room.per_member
            if gain < room.short:
                continue  # even freeing all of it adds too few members

        def works(n: int, node: Node = node) -> bool:
            grown = replace(
                node, allocatable={**node.allocatable, resource: node.allocatable.get(resource, 0) + n}
            )
            nodes = tuple(grown if x.name == node.name else x for x in snapshot.nodes)
            return starts(replace(snapshot, nodes=nodes), key, config)

        freed = _smallest(1, min(held, need), works)
        if freed is not None:
            on_node = sorted(holders[node.name], key=lambda h: (-h[1], h[0]))
            found.append(FreeOnNode(node.name, resource, freed, tuple(on_node)))
    found.sort(key=lambda f: (f.amount, f.node))
    return found


def _node_type(node: Node, config: PlannerConfig) -> tuple[object, ...]:
    """Nodes alike but for their name and place (hostname, the topologies' levels) are one kind of node."""
    own = {HOSTNAME_LABEL, *(key for _, levels in config.topologies for key in levels)}
    labels = tuple(sorted((k, v) for k, v in node.labels.items() if k not in own))
    return (tuple(sorted(node.allocatable.items())), labels, node.taints)


def add_nodes(
    snapshot: Snapshot,
    key: GangKey,
    config: PlannerConfig | None = None,
    max_nodes: int = 64,
    max_types: int = 16,
) -> list[AddNodes]:
    """Per kind of node (same allocatable, labels and taints), the fewest new ones that let the gang
    start; fewest first. Only nodes some waiting member may use are copied (not cordoned or
    not-Ready ones, nor those its selectors, affinity or taints rule out)."""
    config = config or PlannerConfig()
    gang = _gang(snapshot, key, config)
    kinds: dict[tuple[object, ...], Node] = {}
    for node in sorted(snapshot.nodes, key=lambda n: n.name):
        if _usable(gang, node):  # Ready, schedulable, and allowed by a waiting member's constraints
            kinds.setdefault(_node_type(node, config), node)
    # Bigger nodes first: if the search is cut at max_types, the likeliest answers were tried.
    likes = sorted(kinds.values(), key=lambda n: (-n.allocatable.get(config.gpu_resource, 0), n.name))[
        :max_types
    ]
    taken = {n.name for n in snapshot.nodes}
    room = _room(snapshot, gang, config)
    found: list[AddNodes] = []
    for like in likes:
        least = 1
        if room is not None:
            per_node = like.allocatable.get(config.gpu_resource, 0) // room.per_member
            if per_node == 0:
                continue
            least = max(1, -(-room.short // per_node))  # fewer new nodes cannot hold the missing members

        def works(k: int, like: Node = like) -> bool:
            copies = []
            for i in range(1, k + 1):
                name = f"{like.name}-new-{i}"
                while name in taken:
                    name += "x"
                copies.append(replace(like, name=name, labels={**like.labels, HOSTNAME_LABEL: name}))
            return starts(replace(snapshot, nodes=(*snapshot.nodes, *copies)), key, config)

        count = _smallest(least, max_nodes, works)
        if count is not None:
            found.append(AddNodes(like.name, count, tuple(sorted(like.allocatable.items()))))
    found.sort(key=lambda a: (a.count, a.count * dict(a.allocatable).get(config.gpu_resource, 0), a.like))
    return found


def _holders(snapshot: Snapshot, gang: Gang, resource: str) -> dict[str, list[tuple[str, int, str | None]]]:
    """Per node, the pods (not the gang's own) holding ``resource`` there."""
    members = {m.uid for m in gang.members}
    holders: dict[str, list[tuple[str, int, str | None]]] = {}
    for pod in snapshot.pods:
        amount = pod.requests.get(resource, 0)
        if amount and pod.node_name and pod.holds_capacity and pod.uid not in members:
            holders.setdefault(pod.node_name, []).append(
                (f"{pod.namespace}/{pod.name}", amount, pod.group and f"{pod.namespace}/{pod.group}")
            )
    return holders


def _domains(snapshot: Snapshot, gang: Gang, key: str) -> dict[str, list[Node]]:
    """The domains of label ``key`` and their nodes some waiting member may use, by name."""
    domains: dict[str, list[Node]] = {}
    for node in sorted(snapshot.nodes, key=lambda n: n.name):
        value = node.labels.get(key)
        if value is not None and _usable(gang, node):
            domains.setdefault(value, []).append(node)
    return domains


def free_in_domain(
    snapshot: Snapshot, key: GangKey, config: PlannerConfig | None = None
) -> list[FreeInDomain]:
    """For a gang held to one domain of a level: per domain, the fewest GPUs freed inside it that
    let the gang start; smallest first."""
    config = config or PlannerConfig()
    resource = config.gpu_resource
    gang = _gang(snapshot, key, config)
    level = gang.required_topology
    need = _gpu_need(gang, resource)
    if not level or need == 0:
        return []
    holders = _holders(snapshot, gang, resource)
    room = _room(snapshot, gang, config)
    found: list[FreeInDomain] = []
    for value, nodes in sorted(_domains(snapshot, gang, level).items()):
        held_by = {n.name: sum(a for _, a, _ in holders.get(n.name, ())) for n in nodes}
        # The node holding the most is freed first: the room comes back in as few nodes as it can.
        order = sorted((n for n in nodes if held_by[n.name]), key=lambda n: (-held_by[n.name], n.name))
        held = sum(held_by.values())
        if not held:
            continue
        if room is not None and sum(room.free.get(n.name, 0) for n in nodes) + held < need:
            continue  # even freeing all of it leaves the domain short of the gang's GPUs

        def works(amount: int, order: list[Node] = order, held_by: dict[str, int] = held_by) -> bool:
            grown: dict[str, Node] = {}
            left = amount
            for node in order:
                freed = min(left, held_by[node.name])
                extra = {resource: node.allocatable.get(resource, 0) + freed}
                grown[node.name] = replace(node, allocatable={**node.allocatable, **extra})
                left -= freed
                if not left:
                    break
            nodes = tuple(grown.get(x.name, x) for x in snapshot.nodes)
            return starts(replace(snapshot, nodes=nodes), key, config)

        freed = _smallest(1, held, works)
        if freed is not None:
            on = sorted((h for n in order for h in holders[n.name]), key=lambda h: (-h[1], h[0]))
            found.append(FreeInDomain(level, value, resource, freed, tuple(on)))
    found.sort(key=lambda f: (f.amount, f.value))
    return found


def add_domain(
    snapshot: Snapshot, key: GangKey, config: PlannerConfig | None = None, max_domains: int = 4
) -> list[AddDomain]:
    """For a gang held to one domain of a level: the fewest nodes of a new domain of it, copied
    from an existing domain's nodes (its biggest first), that let the gang start; per domain copied
    (the ``max_domains`` with the most GPUs), fewest GPUs first."""
    config = config or PlannerConfig()
    resource = config.gpu_resource
    gang = _gang(snapshot, key, config)
    level = gang.required_topology
    if not level or _gpu_need(gang, resource) == 0:
        return []
    levels = config.levels(gang.topology.name) or ()
    # The new domain sits where its model does in the wider levels; every narrower level, and the
    # hostname, is its own.
    narrower = {HOSTNAME_LABEL, level, *(levels[levels.index(level) + 1 :] if level in levels else ())}
    domains = _domains(snapshot, gang, level)
    gpus = {value: sum(n.allocatable.get(resource, 0) for n in nodes) for value, nodes in domains.items()}
    likes = sorted(domains, key=lambda value: (-gpus[value], value))[:max_domains]
    taken = {n.name for n in snapshot.nodes}
    found: list[AddDomain] = []
    for like in likes:
        model = sorted(domains[like], key=lambda n: (-n.allocatable.get(resource, 0), n.name))

        def copy(node: Node, like: str = like) -> Node:
            name = f"{node.name}-new"
            while name in taken:
                name += "x"
            labels = {k: (f"{v}-new" if k in narrower else v) for k, v in node.labels.items()}
            return replace(node, name=name, labels={**labels, HOSTNAME_LABEL: name})

        def works(k: int, model: list[Node] = model) -> bool:
            copies = tuple(copy(node) for node in model[:k])
            return starts(replace(snapshot, nodes=(*snapshot.nodes, *copies)), key, config)

        count = _smallest(1, len(model), works)
        if count is not None:
            free = sum(n.allocatable.get(resource, 0) for n in model[:count])
            found.append(AddDomain(level, like, count, resource, free))
    found.sort(key=lambda a: (a.free, a.nodes, a.like))
    return found


def without(snapshot: Snapshot, uids: set[str]) -> Snapshot:
    """The snapshot with these pods gone (and gangs left with no member, gone too)."""
    gangs = []
    for gang in snapshot.gangs:
        members = tuple(m for m in gang.members if m.uid not in uids)
        if len(members) != len(gang.members) and not any(is_live(m) for m in members):
            continue
        gangs.append(replace(gang, members=members))
    pods = tuple(p for p in snapshot.pods if p.uid not in uids)
    return replace(snapshot, pods=pods, gangs=tuple(gangs))


def remove(snapshot: Snapshot, key: GangKey, config: PlannerConfig | None = None) -> Remove | None:
    """Running work whose removal lets the gang start (checked by planning without it), or None."""
    config = config or PlannerConfig()
    gang = _gang(snapshot, key, config)
    top = max([g.priority for g in snapshot.gangs] + [p.priority for p in snapshot.pods] + [gang.priority])
    # As if it outranked everything and could preempt anything that runs: the search proper.
    bumped = replace(gang, priority=top + 1, local_priority=None, preemption_policy="PreemptLowerPriority")
    trial = replace(snapshot, gangs=tuple(bumped if g.key == key else g for g in snapshot.gangs))
    search = replace(
        config, preemption=True, preemption_min_runtime_seconds=0.0, max_preemption_searches=1 << 30
    )
    decision = decide(trial, key, search)
    if not isinstance(decision, Preempt):
        return None
    uids = {uid for victim in decision.victims for uid in victim.pods}
    if not starts(without(snapshot, uids), key, config):
        return None  # gangs ahead of it would take the room first
    pods = {p.uid: p for p in snapshot.pods}
    gangs = {g.key: g for g in snapshot.gangs}
    victims = []
    for victim in decision.victims:
        if victim.gang is not None and victim.gang in gangs:
            label, priority = str(victim.gang), gangs[victim.gang].priority
        else:
            first = pods[victim.pods[0]]
            label, priority = f"{first.namespace}/{first.name}", first.priority
        victims.append(Removed(label, victim.gang, priority, len(victim.pods), priority < gang.priority))
    victims.sort(key=lambda v: (v.priority, v.label))
    return Remove(tuple(victims))
