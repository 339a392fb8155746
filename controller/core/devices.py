"""DRA devices as room and demand: a snapshot's claims turned into resources the planner counts.

Every DeviceClass is one resource, named by its ``extendedResourceName`` where set, else by the
class name (queues and messages use the same name). A node's allocatable gains the class's devices
it reaches (node-local ResourceSlices, newest complete pool generation); a network-attached device
(``allNodes``, ``nodeSelector``) counts on one node it reaches (``_deal_networked``). A pod holding
allocated devices (its claims' ``reservedFor``) requests them, so a preempted victim frees them.
Devices allocated to a claim no live pod holds, or several do, are taken off the node's room.

A gated member's demand is its claims' requests (a template's, or a named claim's): ``exactly``
with ``deviceClassName`` and ``count``, CEL ``selectors`` and the claim's ``matchAttribute`` and
``distinctAttribute`` constraints; of ``firstAvailable`` the first alternative there is room for.
An admitted member the scheduler has not placed yet keeps the demand of its claims not allocated
yet. A request that narrows the class (selectors, a constraint, a later alternative, a class
selecting devices an earlier class counts) is also a resource of its own: per node, how many of
its free devices satisfy it (for a constraint, in groups by attribute value, whole requests only),
so the member is pinned only where its devices are. A named claim already allocated pins its
members to where its devices are; one not yet allocated is counted once and holds the gang to one
node.

What cannot be proven -- an expression that fails, adminAccess, allocationMode All, a claim shape
not modelled, differently narrowed requests over the same devices, a claim or template not seen
yet -- marks the member (``Pod.devices_unproven``): the gang waits and its PodGroup says why.
Devices with taints or shared counters are never counted as room.

A translation keeps the previous one's pods, gangs and device index (``_memo``) and reuses those
whose inputs are unchanged: between passes most are, and rebuilding them was most of its cost.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from operator import attrgetter, is_
from typing import Any, TypeVar

from controller.core import messages as msg
from controller.core.device_cel import SelectorError, Selectors
from controller.core.dra import (
    Claim,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceId,
    DeviceRequest,
    DraWorld,
    NodeReach,
)
from controller.core.fit import term_matches
from controller.core.group_claims import as_shared, group_claim_of, group_holders
from controller.core.model import NODE_NAME_FIELD, Gang, Node, NodeSelectorTerm, Pod, Requirement, Snapshot

HOSTNAME = "kubernetes.io/hostname"

_Record = TypeVar("_Record", Pod, Gang, Node)
# What devices add to a pod: (kind, requests, text, terms): ("unproven", (), why, ()), ("demand",
# requests, the node an allocated claim holds it to or None, the node-selector terms of allocated
# claims on devices several nodes reach) or ("held", requests, None, ()).
_Addition = tuple[str, tuple[tuple[str, int], ...], str | None, tuple[tuple[NodeSelectorTerm, ...], ...]]
_ATTRS = {cls: attrgetter(*(f.name for f in fields(cls))) for cls in (Pod, Gang, Node)}
_POSITION = {cls: {f.name: i for i, f in enumerate(fields(cls))} for cls in (Pod, Gang, Node)}
_Charge = tuple[tuple[str, int], ...]  # what held devices add to a pod's requests


def _with(record: _Record, **changes: Any) -> _Record:
    """``dataclasses.replace`` for the tens of thousands of pods and gangs a pass translates: all
    fields read at once and passed by position, about twice as fast."""
    cls = type(record)
    values = list(_ATTRS[cls](record))
    for name, value in changes.items():
        values[_POSITION[cls][name]] = value
    return cls(*values)


@dataclass(slots=True)
class _Memo:
    """The previous translation's pods and gangs: between passes most are the same records with the
    same device demand, and rebuilding them is most of a translation's cost. Only the last
    translation is kept, so it holds no more than one snapshot's records."""

    # pod uid -> (the pod, what its devices add to it, the translated pod)
    pods: dict[str, tuple[Pod, _Addition, Pod]] = field(default_factory=dict)
    # the uid of a gang's first member -> (the gang, the translated gang)
    gangs: dict[str, tuple[Gang, Gang]] = field(default_factory=dict)
    # node name -> (the node, the device room added, the translated node)
    nodes: dict[str, tuple[Node, _Charge, Node]] = field(default_factory=dict)
    index: _DeviceIndex | None = None  # the last devices and classes, indexed


_memo = _Memo()


class Unproven(Exception):
    """A member's device demand that cannot be proven; the message says why."""


def class_resource(device_class: DeviceClass) -> str:
    """The resource a DeviceClass's devices count as: its extendedResourceName, else its name."""
    return device_class.extended_resource or device_class.name


@dataclass(frozen=True, slots=True)
class _Narrow:
    """A request narrower than its class: the devices it may take are fewer than the class's."""

    device_class: str
    selectors: tuple[str, ...]
    match: str | None
    count: int  # devices one request takes
    distinct: bool = False  # ``match`` names a distinctAttribute: values unique, not equal
    # firstAvailable: the alternatives before this one. A node where one of them can be satisfied
    # counts none of this request: the scheduler would take that alternative there instead.
    before: tuple[_Narrow, ...] = ()

    @property
    def resource(self) -> str:
        # Without a constraint its room is counted in devices: requests of the same devices but
        # different counts are one resource, so together they never take more than there are.
        count = self.count if self.match is not None else 1
        shape = (self.selectors, self.match, count, self.before, self.distinct)
        text = repr(shape).encode()
        return f"{self.device_class}[{hashlib.sha256(text).hexdigest()[:8]}]"


@dataclass
class _Demand:
    requests: dict[str, int] = field(default_factory=dict)
    narrow: list[_Narrow] = field(default_factory=list)
    node: str | None = None  # an allocated named claim's node
    # allocated named claims on devices several nodes reach: the nodes they reach (ANDed)
    reach: list[tuple[NodeSelectorTerm, ...]] = field(default_factory=list)
    shared: set[tuple[str, str]] = field(default_factory=set)  # unallocated named claims
    addition: _Addition | None = None  # what it adds to a pod, once asked (_addition)


class _DeviceIndex:
    """What follows from the devices and classes alone: kept between passes while both are equal
    (claims change far more often than slices and classes)."""

    def __init__(self, world: DraWorld, previous: _DeviceIndex | None = None) -> None:
        self.devices = world.devices
        self.classes = world.classes
        self.selectors: Selectors = Selectors(previous.selectors if previous is not None else None)
        self.by_node: dict[str, list[Device]] = defaultdict(list)  # node-local devices
        self.networked: list[Device] = []  # devices a NodeReach reaches
        self.countable: list[Device] = []
        for device in _current(world.devices):
            if device.unmodelled is not None:
                continue
            if device.node is not None:
                self.by_node[device.node].append(device)
            elif device.reach is not None:
                self.networked.append(device)
            else:
                continue
            self.countable.append(device)
        self.networked_ids = frozenset(d.id for d in self.networked)
        self.matching: dict[tuple[str, tuple[str, ...]], frozenset[DeviceId]] = {}
        self.resources: dict[DeviceId, str] | None = None  # _resource_of_device, once asked
        # Of the last pass, by the id of a claim (kept with it): what its allocated devices add
        # to its holder.
        self.charges: dict[int, tuple[Claim, _Addition | None]] = {}
        # Of the last pass, by template: a member's demand when that is its only claim (none with
        # firstAvailable, whose choice depends on the room of the pass).
        self.spec_demands: dict[tuple[str, str], tuple[ClaimSpec, _Demand | str]] = {}
        # node -> (device id, its class resource) of each device that counts as one
        self.node_resources: dict[str, list[tuple[DeviceId, str]]] = {}
        # node -> how many of its devices count as each class resource
        self.node_counts: dict[str, dict[str, int]] = {}
        self.pool_nodes: dict[tuple[str, str], list[str]] | None = None  # (driver, pool) -> nodes
        self.counted_as: dict[str, str] = {}  # class name -> _counted_as, once asked

    @staticmethod
    def of(world: DraWorld) -> _DeviceIndex:
        last = _memo.index
        if last is None or last.devices != world.devices or last.classes != world.classes:
            if last is not None:
                last.selectors.forget_previous()  # one generation back at most
            last = _memo.index = _DeviceIndex(world, last)
        return last


class DeviceView:
    """The devices of a snapshot: which each node reaches, which are free, what matches what."""

    def __init__(self, world: DraWorld, nodes: tuple[Node, ...] = ()) -> None:
        self.world = world
        self.nodes = nodes
        self.index = _DeviceIndex.of(world)
        self.selectors = self.index.selectors
        self.by_node = self.index.by_node
        self.networked_ids = self.index.networked_ids
        self.allocated: dict[DeviceId, Claim] = {d: c for c in world.claims.values() for d in c.allocated}
        self._matching = self.index.matching
        # Network-attached devices (see _deal_networked): those counted on each node, every one
        # each node reaches, and those counted nowhere.
        self.dealt: dict[str, list[Device]] = {}
        self.reachable: dict[str, list[Device]] = {}
        self.uncounted: set[DeviceId] = set()
        self._whole: dict[_Narrow, int] = {}
        # What this pass keeps for the next (only what it used, so nothing gone piles up).
        self.spec_demands: dict[tuple[str, str], tuple[ClaimSpec, _Demand | str]] = {}

    def device_class(self, name: str) -> DeviceClass:
        found = self.world.classes.get(name)
        if found is None:
            raise Unproven(msg.device_class_missing(name))
        return found

    def matching(self, class_name: str, selectors: tuple[str, ...] = ()) -> frozenset[DeviceId]:
        """Every reachable device of the class that satisfies the selectors too."""
        key = (class_name, selectors)
        found = self._matching.get(key)
        if found is None:
            expressions = (*self.device_class(class_name).selectors, *selectors)
            chosen = set()
            for device in self.index.countable:
                try:
                    if all(self.selectors.matches(e, device) for e in expressions):
                        chosen.add(device.id)
                except SelectorError as err:
                    raise Unproven(msg.device_selector_failed(class_name, str(err))) from err
            found = frozenset(chosen)
            self._matching[key] = found
        return found

    def narrow_room(self, narrow: _Narrow, node: str) -> int:
        """How many devices of a narrow request's kind a node has free (in whole requests for a
        constraint)."""
        if any(self.satisfiable(earlier, node) for earlier in narrow.before):
            return 0
        return self._room(narrow, (*self.by_node.get(node, ()), *self.dealt.get(node, ())))

    def satisfiable(self, narrow: _Narrow, node: str) -> bool:
        """Could the scheduler satisfy one such request on the node with the devices free now
        (every device it reaches, not only those counted on it)?"""
        devices = (*self.by_node.get(node, ()), *self.reachable.get(node, ()))
        return self._room(narrow, devices) >= narrow.count

    def whole_requests(self, narrow: _Narrow) -> int:
        """How many such requests the nodes have room for, all together."""
        found = self._whole.get(narrow)
        if found is None:
            found = sum(self.narrow_room(narrow, node.name) // narrow.count for node in self.nodes)
            self._whole[narrow] = found
        return found

    def _room(self, narrow: _Narrow, devices: Iterable[Device]) -> int:
        matching = self.matching(narrow.device_class, narrow.selectors)
        free = [d for d in devices if d.id in matching and d.id not in self.allocated]
        if narrow.match is None:
            return len(free)
        groups: dict[object, int] = defaultdict(int)
        for device in free:
            value = device.attributes.get(_qualified(narrow.match, device.driver))
            if value is not None:
                groups[value] += 1
        if narrow.distinct:
            return _distinct_requests(groups.values(), narrow.count) * narrow.count
        return sum(n // narrow.count * narrow.count for n in groups.values())


def _distinct_requests(groups: Iterable[int], count: int) -> int:
    """How many requests of ``count`` devices with pairwise different values fit devices grouped
    by value: t requests take at most t devices of a value, so t fit while the groups hold
    ``count * t`` devices counting each at most t times."""
    sizes = list(groups)
    t = sum(sizes) // count
    while t > 0 and sum(min(n, t) for n in sizes) < count * t:
        t -= 1
    return t


def _qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def _current(devices: Iterable[Device]) -> list[Device]:
    """Devices of each pool's newest generation only (older slices are being replaced)."""
    devices = list(devices)
    newest: dict[tuple[str, str], int] = {}
    for d in devices:
        key = (d.driver, d.pool)
        newest[key] = max(newest.get(key, d.generation), d.generation)
    return [d for d in devices if d.generation == newest[(d.driver, d.pool)]]


def _constraints(spec: ClaimSpec) -> list[tuple[str, tuple[str, ...], bool]]:
    """The claim's constraints: (attribute, the requests named, distinct rather than matching)."""
    return [(a, names, False) for a, names in spec.match_attributes] + [
        (a, names, True) for a, names in spec.distinct_attributes
    ]


def _match_of(spec: ClaimSpec, *names: str) -> tuple[str | None, bool]:
    """The constraint on a request (named by any of ``names``), if one: its attribute, and
    whether it is a distinctAttribute."""
    found = [
        (attr, distinct)
        for attr, only, distinct in _constraints(spec)
        if not only or any(n in only for n in names)
    ]
    if len(found) > 1:
        raise Unproven(msg.device_constraints_unmodelled(names[-1]))
    return found[0] if found else (None, False)


def _narrow_of(
    view: DeviceView, request: DeviceRequest, match: tuple[str | None, bool], before: tuple[_Narrow, ...] = ()
) -> _Narrow:
    if request.unmodelled:
        raise Unproven(request.unmodelled)
    if request.all_devices:
        # It takes every matching device of the node it lands on: a per-node demand not modelled.
        raise Unproven(msg.device_request_unmodelled(request.name, msg.device_allocation_mode("All")))
    view.device_class(request.device_class)  # fails now if the class does not exist
    attribute, distinct = match
    narrow = _Narrow(
        request.device_class,
        request.selectors,
        attribute,
        request.count,
        distinct,
        before,
    )
    view.matching(narrow.device_class, narrow.selectors)  # fails now if an expression does
    return narrow


def _first_available(view: DeviceView, request: DeviceRequest, spec: ClaimSpec, members: int) -> _Narrow:
    """Of firstAvailable alternatives, the first one the nodes have room for on behalf of all
    ``members`` that make the request, counted only on nodes where no earlier one could be
    satisfied (where one could, the scheduler takes it); none with room: the first."""
    narrows = [_narrow_of(view, alt, _match_of(spec, request.name, alt.name)) for alt in request.alternatives]
    for i, narrow in enumerate(narrows):
        chosen = replace(narrow, before=tuple(narrows[:i]))
        if view.whole_requests(chosen) >= members:
            return chosen
    return narrows[0]


def _request_demand(
    view: DeviceView, request: DeviceRequest, spec: ClaimSpec, demand: _Demand, members: int
) -> None:
    if request.alternatives:
        narrow = _first_available(view, request, spec, members)
    else:
        narrow = _narrow_of(view, request, _match_of(spec, request.name))
    resource = _counted_as(view, narrow.device_class)
    demand.requests[resource] = demand.requests.get(resource, 0) + narrow.count
    narrower_class = resource != class_resource(view.device_class(narrow.device_class))
    if narrow.selectors or narrow.match or narrow.before or narrower_class:
        demand.narrow.append(narrow)
        demand.requests[narrow.resource] = demand.requests.get(narrow.resource, 0) + narrow.count


def _counted_as(view: DeviceView, class_name: str) -> str:
    """The resource a class's devices count as. A device several classes select counts for the
    first of them by name (``_resource_of_device``), so a request of a narrower class counts
    against that class's resource, as a narrow request limited to its own class's devices.
    Raises Unproven when the class's selectors fail, or its devices count as several resources."""
    found = view.index.counted_as.get(class_name)
    if found is not None:
        return found
    own = class_resource(view.device_class(class_name))
    resources = _resource_of_device(view)
    counted = {r for d in view.matching(class_name) if (r := resources.get(d)) is not None}
    if len(counted) > 1:
        raise Unproven(msg.device_classes_overlap(class_name))
    found = view.index.counted_as[class_name] = counted.pop() if counted else own
    return found


def _claim_demand(view: DeviceView, spec: ClaimSpec, demand: _Demand, members: int = 1) -> None:
    if spec.unmodelled:
        raise Unproven(spec.unmodelled)
    constrained = [
        r
        for r in spec.requests
        if any(
            not names or r.name in names or any(a.name in names for a in r.alternatives)
            for _, names, _ in _constraints(spec)
        )
    ]
    if len(constrained) > 1:
        raise Unproven(msg.device_constraints_unmodelled(constrained[0].name))
    for request in spec.requests:
        _request_demand(view, request, spec, demand, members)


def member_demand(view: DeviceView, pod: Pod, counted: set[tuple[str, str]], members: int = 1) -> _Demand:
    """What a gated member's claims ask for (a named claim in ``counted`` is already counted for
    another member of the gang; ``members`` of the gang make claims). Raises Unproven."""
    only = pod.claims[0] if len(pod.claims) == 1 else None
    if (
        only is not None
        and only.claim is None
        and only.template is not None
        and group_claim_of(view.world, pod, only) is None  # a PodGroup's claim is one for the gang
    ):
        return _template_demand(view, pod.namespace, only.template, members)
    demand = _Demand()
    for entry in pod.claims:
        pod_claim = as_shared(view.world, pod, entry)  # a PodGroup's claim: one, shared by name
        if pod_claim is None:
            raise Unproven(msg.device_group_claim_not_made(str(pod.scheduling_group), entry.name))
        if pod_claim.claim is not None:
            claim = view.world.claims.get((pod.namespace, pod_claim.claim))
            if claim is None:
                raise Unproven(msg.device_claim_missing(pod_claim.claim))
            if claim.is_allocated:
                if claim.allocated_reach is not None:  # devices several nodes reach
                    if not claim.allocated_reach.all_nodes:
                        demand.reach.append(claim.allocated_reach.terms)
                    continue
                if claim.allocated_node is None:
                    raise Unproven(msg.device_claim_not_node_local(pod_claim.claim))
                if demand.node not in (None, claim.allocated_node):
                    raise Unproven(msg.device_claims_apart(pod.name))
                demand.node = claim.allocated_node
                continue
            key = (pod.namespace, pod_claim.claim)
            demand.shared.add(key)
            if key not in counted:
                counted.add(key)
                _claim_demand(view, claim.spec, demand)
        elif pod_claim.template is not None:
            spec = view.world.templates.get((pod.namespace, pod_claim.template))
            if spec is None:
                raise Unproven(msg.device_template_missing(pod_claim.template))
            _claim_demand(view, spec, demand, members)
    return demand


def _template_demand(view: DeviceView, namespace: str, template: str, members: int) -> _Demand:
    """The demand of a member whose one claim comes from a template: the same for every member
    using the template, kept while the devices and classes are the same."""
    key = (namespace, template)
    spec = view.world.templates.get(key)
    if spec is None:
        raise Unproven(msg.device_template_missing(template))
    cached = view.spec_demands.get(key) or view.index.spec_demands.get(key)
    if cached is not None and cached[0] is spec:
        found = cached[1]
    else:
        demand = _Demand()
        try:
            _claim_demand(view, spec, demand, members)
        except Unproven as err:
            found = str(err)
        else:
            found = demand
    if not any(r.alternatives for r in spec.requests):
        view.spec_demands[key] = (spec, found)
    if isinstance(found, str):
        raise Unproven(found)
    return found


def _held(
    view: DeviceView, pods: Sequence[Pod], resources: Mapping[DeviceId, str]
) -> tuple[dict[str, _Addition], set[DeviceId], dict[DeviceId, str]]:
    """What devices add to each pod holding them (by uid: ("held", requests, None, ())), the
    devices allocated to claims no live pod holds, or several pods do (not free: evicting one of
    them would not free them, and nobody gives them back), and the node of the pod charged for each
    network-attached one. A claim reserved for a PodGroup is charged to the first of its live
    members: a gang is evicted whole, which frees it."""
    # Pod.holds_capacity, inline: asked of every pod in every pass.
    live = {
        p.uid: p for p in pods if (p.node_name is not None or p.nominated_node is not None) and not p.finished
    }
    charged: dict[str, _Addition] = {}
    orphaned: set[DeviceId] = set()
    held_on: dict[DeviceId, str] = {}
    networked = view.networked_ids
    charges, kept = view.index.charges, {}
    by_group: Mapping[tuple[str, str], list[str]] | None = None
    for claim in view.world.claims.values():
        allocated = claim.allocated
        if not allocated:
            continue
        reserved = claim.reserved_for
        if claim.reserved_for_groups:  # a PodGroup's claim: its running members hold it
            by_group = group_holders(pods) if by_group is None else by_group
            groups = claim.reserved_for_groups
            members = (u for g in groups for u in by_group.get((claim.namespace, g), ()))
            holders = sorted(uid for uid in (*reserved, *members) if uid in live)
            if not holders:
                orphaned.update(allocated)
                continue
            holder = holders[0]
        elif len(reserved) == 1:
            holder = reserved[0]
            if holder not in live:
                orphaned.update(allocated)
                continue
        else:
            holders = [uid for uid in reserved if uid in live]
            if len(holders) != 1:
                orphaned.update(allocated)
                continue
            holder = holders[0]
        if claim.extended and _extended_for(view, claim, live[holder], resources):
            continue  # the pod's own extended-resource request counts these
        cached = charges.get(id(claim))
        if cached is None or cached[0] is not claim or networked:
            cached = (claim, _charge(view, claim, resources))
        kept[id(claim)] = cached
        if networked:
            for device_id in allocated:
                node_name = live[holder].node_name
                if device_id in networked and device_id not in view.uncounted and node_name:
                    held_on[device_id] = node_name
        addition = cached[1]
        if addition is not None:
            before = charged.get(holder)
            charged[holder] = addition if before is None else _merged(before, addition)
    view.index.charges = kept
    return charged, orphaned, held_on


def _extended_for(view: DeviceView, claim: Claim, holder: Pod, resources: Mapping[DeviceId, str]) -> bool:
    """Is the claim the one the scheduler made for its holder's extended-resource request, whose
    own requests then count its devices? Not the claim's annotation alone, which any tenant who
    creates a claim can write: the holder controls the claim, its status names it, and it
    requests the extended resource of the devices' class."""
    if not (claim.owner == holder.uid and holder.extended_claim == claim.name):
        return False
    extended = {c.extended_resource for c in view.world.classes.values() if c.extended_resource}
    counted = {resources.get(device_id) for device_id in claim.allocated}
    return all(r in extended and r in holder.requests for r in counted)


def _charge(view: DeviceView, claim: Claim, resources: Mapping[DeviceId, str]) -> _Addition | None:
    """What a claim's allocated devices add to the pod holding it (None: nothing counted)."""
    counts: dict[str, int] = {}
    for device_id in claim.allocated:
        resource = resources.get(device_id)
        if resource is not None and device_id not in view.uncounted:
            counts[resource] = counts.get(resource, 0) + 1
    return ("held", tuple(sorted(counts.items())), None, ()) if counts else None


def _merged(a: _Addition, b: _Addition) -> _Addition:
    counts = dict(a[1])
    for name, n in b[1]:
        counts[name] = counts.get(name, 0) + n
    return ("held", tuple(sorted(counts.items())), None, ())


def _reaches(reach: NodeReach, node: Node) -> bool:
    return reach.all_nodes or any(term_matches(term, node.labels, node.name) for term in reach.terms)


def _pure_reaches(view: DeviceView, resources: Mapping[DeviceId, str]) -> dict[NodeReach, list[Node]]:
    """The nodes each NodeReach of the network-attached devices reaches, and which devices count
    nowhere (``view.uncounted``, ``view.reachable``). A resource's shared devices count only
    where the scheduler cannot spend them on the wrong member: every node they reach reaches no
    other devices of that resource (node-local, or shared with another set of nodes)."""
    reach_nodes: dict[NodeReach, list[Node]] = {}
    by_resource: dict[str, set[NodeReach]] = defaultdict(set)
    for device in view.index.networked:
        reach = device.reach
        assert reach is not None  # networked: reached through a NodeReach
        if reach not in reach_nodes:
            reach_nodes[reach] = sorted((n for n in view.nodes if _reaches(reach, n)), key=attrgetter("name"))
        resource = resources.get(device.id)
        if resource is not None:
            by_resource[resource].add(reach)
        for node in reach_nodes[reach]:
            view.reachable.setdefault(node.name, []).append(device)
    local = view.index.node_resources
    pure: set[tuple[str, NodeReach]] = set()
    for resource, reaches in by_resource.items():
        seen: dict[str, int] = defaultdict(int)
        for reach in reaches:
            for node in reach_nodes[reach]:
                seen[node.name] += 1
        for reach in reaches:
            if all(
                seen[n.name] == 1 and all(r != resource for _, r in local.get(n.name, ()))
                for n in reach_nodes[reach]
            ):
                pure.add((resource, reach))
    view.uncounted = {d.id for d in view.index.networked if (resources.get(d.id), d.reach) not in pure}
    return reach_nodes


def _largest_asks(world: DraWorld) -> dict[str, int]:
    """The most devices of each class one request asks for (in any template or claim)."""
    largest: dict[str, int] = defaultdict(lambda: 1)
    specs = [*world.templates.values(), *(c.spec for c in world.claims.values() if not c.allocated)]
    for spec in specs:
        for request in spec.requests:
            for one in request.alternatives or (request,):
                largest[one.device_class] = max(largest[one.device_class], one.count)
    return largest


def _deal_networked(
    view: DeviceView, resources: Mapping[DeviceId, str], held_on: Mapping[DeviceId, str]
) -> None:
    """Count each network-attached device on one node it reaches (``view.dealt``), so that
    it is counted once although several nodes reach it: a held one on its holder's node (freed
    there when the holder is preempted), the free ones dealt to the nodes that reach them in
    name order, each node as many as the largest request for their class asks. Every such node
    reaches them all, so the scheduler can give any of them to any member placed there."""
    if not view.index.networked:
        return
    reach_nodes = _pure_reaches(view, resources)
    largest = _largest_asks(view.world)
    free: dict[tuple[str, NodeReach], list[Device]] = defaultdict(list)
    for device in view.index.networked:
        resource = resources.get(device.id)
        if resource is None or device.id in view.uncounted:
            continue
        assert device.reach is not None
        if device.id not in view.allocated:
            free[(resource, device.reach)].append(device)
        elif device.id in held_on:
            view.dealt.setdefault(held_on[device.id], []).append(device)
        # else: allocated to a claim no live pod holds: not free, and nobody gives it back
    for (resource, reach), devices in free.items():
        targets = [
            n for n in reach_nodes[reach] if resource not in n.allocatable and n.ready and not n.unschedulable
        ]
        if not targets:
            continue
        share = max(
            largest[c] for c in view.world.classes if class_resource(view.world.classes[c]) == resource
        )
        for i, device in enumerate(sorted(devices, key=attrgetter("id"))):
            view.dealt.setdefault(targets[i // share % len(targets)].name, []).append(device)


def _resource_of_device(view: DeviceView) -> dict[DeviceId, str]:
    """The class resource each reachable device counts as (its first class, by name)."""
    if view.index.resources is not None:
        return view.index.resources
    out: dict[DeviceId, str] = {}
    for name in sorted(view.world.classes):
        try:
            matching = view.matching(name)
        except Unproven:
            continue  # a class whose own selectors fail: its devices count for no class
        for device_id in matching:
            out.setdefault(device_id, class_resource(view.world.classes[name]))
    view.index.resources = out
    view.index.node_resources = {
        node: [(d.id, out[d.id]) for d in devices if d.id in out] for node, devices in view.by_node.items()
    }
    for node, entries in view.index.node_resources.items():
        counts = view.index.node_counts[node] = {}
        for _, resource in entries:
            counts[resource] = counts.get(resource, 0) + 1
    return out


def _node_room(
    view: DeviceView,
    node: Node,
    narrow: Iterable[_Narrow],
    orphaned: Mapping[str, list[str]],
    resources: Mapping[DeviceId, str],
    last: Mapping[str, tuple[Node, _Charge, Node]],
    kept: dict[str, tuple[Node, _Charge, Node]],
) -> Node:
    """The node with the devices it counts added to its allocatable (the last pass's record
    when that adds the same)."""
    # Served by the device plugin on this node: the scheduler does not map it onto DRA here.
    totals = {r: n for r, n in view.index.node_counts.get(node.name, {}).items() if r not in node.allocatable}
    for resource in orphaned.get(node.name, ()):
        if resource in totals:
            totals[resource] -= 1
    for device in view.dealt.get(node.name, ()):
        resource = resources[device.id]
        if resource not in node.allocatable:
            totals[resource] = totals.get(resource, 0) + 1
    for item in narrow:
        totals[item.resource] = view.narrow_room(item, node.name)
    if not totals:
        return node
    room = tuple(totals.items())
    cached = last.get(node.name)
    if cached is None or cached[0] is not node or cached[1] != room:
        cached = (node, room, _with(node, allocatable={**node.allocatable, **totals}))
    kept[node.name] = cached
    return cached[2]


def _local_place(view: DeviceView, device_id: DeviceId) -> list[tuple[str, str]]:
    """The node a node-local device counts on and its resource ([]: not counted on one)."""
    for node_name in _nodes_of_pool(view, device_id):
        for known, resource in view.index.node_resources.get(node_name, ()):
            if known == device_id:
                return [(node_name, resource)]
    return []


def _nodes_of_pool(view: DeviceView, device_id: DeviceId) -> list[str]:
    """The nodes holding a pool's node-local devices (usually one, the pool's namesake)."""
    index = view.index
    if index.pool_nodes is None:
        pools: dict[tuple[str, str], list[str]] = defaultdict(list)
        for node_name, devices in index.by_node.items():
            for key in {(d.driver, d.pool) for d in devices}:
                pools[key].append(node_name)
        index.pool_nodes = dict(pools)
    return index.pool_nodes.get(device_id[:2], [])


def with_devices(snapshot: Snapshot, world: DraWorld | None) -> Snapshot:
    """The snapshot with DRA devices as node room and pod requests (unchanged without DRA), and
    without its DRA world, so that it is never counted twice."""
    if world is None or world.empty:
        return snapshot
    view = DeviceView(world, snapshot.nodes)
    resources = _resource_of_device(view)
    held, orphaned, held_on = _held(view, snapshot.pods, resources)
    _deal_networked(view, resources, held_on)
    demands: dict[str, _Demand | str] = {}
    gangs: list[Gang] = []
    starting: set[str] = set()  # admitted members the scheduler has not placed yet
    for gang in snapshot.gangs:
        # Asked of every member in every pass: a bound one (most) is never starting.
        claimants = [
            p for p in gang.members if p.claims and (p.gated or (p.node_name is None and _starting(gang, p)))
        ]
        if not claimants:
            gangs.append(gang)
            continue
        shared_by: dict[tuple[str, str], int] = defaultdict(int)
        counted: set[tuple[str, str]] = set()
        for pod in claimants:
            try:
                if pod.gated:
                    demand = member_demand(view, pod, counted, len(claimants))
                else:
                    starting.add(pod.uid)
                    demand = member_demand(view, _unallocated_claims(view, pod), counted, len(claimants))
            except Unproven as err:
                if pod.gated:  # an admitted member's devices are counted only where proven
                    demands[pod.uid] = str(err)
                continue
            demands[pod.uid] = demand
            for key in demand.shared:
                shared_by[key] += 1
        gangs.append(_gang_with(gang, demands, shared_by))
    _refuse_overlaps(view, snapshot.gangs, demands, starting)
    narrow = {n.resource: n for d in demands.values() if isinstance(d, _Demand) for n in d.narrow}
    pods, changed, stale = _translated_pods(snapshot.pods, demands, held)
    gangs = _translated_gangs(gangs, changed, stale)
    # The node-local devices allocated to claims no live pod holds, by node: not free.
    orphans: dict[str, list[str]] = {}
    for device_id in orphaned:
        for node_name, resource in _local_place(view, device_id):
            orphans.setdefault(node_name, []).append(resource)
    last_nodes, _memo.nodes = _memo.nodes, {}
    nodes = tuple(
        _node_room(view, n, narrow.values(), orphans, resources, last_nodes, _memo.nodes)
        for n in snapshot.nodes
    )
    view.index.spec_demands = view.spec_demands
    # Counted once: a snapshot derived from this one (what-ifs) is not translated again.
    return replace(snapshot, nodes=nodes, pods=pods, gangs=tuple(gangs), devices=None)


def _starting(gang: Gang, pod: Pod) -> bool:
    """An admitted member whose gate is lifted but which the scheduler has not placed yet: its
    claims are not allocated, so its devices still look free unless its demand is counted."""
    return (
        not pod.gated
        and pod.uid in gang.admitted
        and pod.node_name is None
        and pod.nominated_node is None
        and not pod.finished
        and not pod.terminating
    )


def _unallocated_claims(view: DeviceView, pod: Pod) -> Pod:
    """The pod with only its claims not allocated yet (those allocated are held or off the room)."""
    claims = view.world.claims
    kept = []
    for pod_claim in pod.claims:
        name = pod_claim.claim or pod_claim.generated
        claim = claims.get((pod.namespace, name)) if name is not None else None
        if claim is None or not claim.is_allocated:
            kept.append(pod_claim)
    return _with(pod, claims=tuple(kept))


def _refuse_overlaps(
    view: DeviceView, gangs: Iterable[Gang], demands: dict[str, _Demand | str], starting: set[str]
) -> None:
    """Each narrow request's room is counted from the same free devices: two different ones
    whose devices overlap would both be given the shared devices. The first gang to ask keeps
    its requests (admitted members the scheduler has not placed first, then by priority and
    age); a later gang's member asking an overlapping one is unproven until then."""
    if not any(isinstance(d, _Demand) and d.narrow for d in demands.values()):
        return
    kept: dict[str, frozenset[DeviceId]] = {}  # narrow resource -> the devices it may take
    ordered = sorted(
        gangs, key=lambda g: (not any(m.uid in starting for m in g.members), -g.priority, g.created)
    )
    for gang in ordered:
        mine, placed = dict(kept), dict(kept)  # with every member's requests; with those placed
        refused: dict[str, str] = {}
        for pod in gang.members:
            demand = demands.get(pod.uid)
            if not isinstance(demand, _Demand):
                continue
            for narrow in demand.narrow:
                devices = view.matching(narrow.device_class, narrow.selectors)
                clash = any(r != narrow.resource and devices & other for r, other in mine.items())
                if clash and pod.uid not in starting:
                    refused[pod.uid] = msg.device_requests_overlap(narrow.device_class)
                mine[narrow.resource] = devices
                if pod.uid in starting:
                    placed[narrow.resource] = devices
        demands.update(refused)
        kept = placed if refused else mine


def _gang_with(
    gang: Gang, demands: Mapping[str, _Demand | str], shared_by: Mapping[tuple[str, str], int]
) -> Gang:
    """A gang whose members share a claim not yet allocated must fit on one node (a wider
    required level, e.g. a rack, would let them land on nodes the claim cannot reach)."""
    if not any(n > 1 for n in shared_by.values()):
        return gang
    return replace(gang, required_topology=HOSTNAME)


def _translated_pods(
    pods: tuple[Pod, ...], demands: Mapping[str, _Demand | str], held: Mapping[str, _Addition]
) -> tuple[tuple[Pod, ...], dict[str, Pod], set[str]]:
    """The pods with their devices added, those that changed by uid, and the uids whose
    translation is not the last one's; a pod the last translation saw, with the same addition,
    is taken from it."""
    last, memo = _memo.pods, {}
    changed: dict[str, Pod] = {}
    stale: set[str] = set()
    out = []
    for pod in pods:
        uid = pod.uid
        if uid not in demands and uid not in held:
            out.append(pod)
            continue
        addition = _addition(pod, demands, held)
        if addition is None:
            out.append(pod)
            continue
        cached = last.get(uid)
        if cached is None or cached[0] is not pod or (cached[1] is not addition and cached[1] != addition):
            cached = (pod, addition, _pod_with(pod, addition))
            stale.add(uid)
        memo[uid] = cached
        changed[uid] = cached[2]
        out.append(cached[2])
    if len(memo) != len(last) or stale:
        stale.update(last.keys() - memo.keys())  # translated last time, not now
    _memo.pods = memo
    return tuple(out), changed, stale


def _translated_gangs(gangs: Iterable[Gang], changed: Mapping[str, Pod], stale: set[str]) -> list[Gang]:
    """The gangs with their translated members; an equal gang with the same members as in the
    last translation is taken from it (the same gang none of whose members' translations is
    stale, without comparing)."""
    last, memo = _memo.gangs, {}
    out = []
    for gang in gangs:
        if not gang.members:
            out.append(gang)
            continue
        first = gang.members[0].uid
        cached = last.get(first)
        if (
            cached is not None
            and cached[0] is gang
            and not (stale and any(m.uid in stale for m in gang.members))
        ):
            memo[first] = cached
            out.append(cached[1])
            continue
        members = tuple([changed.get(m.uid, m) for m in gang.members])
        if all(map(is_, members, gang.members)):  # no member changed
            out.append(gang)
            continue
        # By its first member's uid (a str, whose hash is kept): a pod is a member of one gang.
        cached = last.get(members[0].uid)
        if (
            cached is not None
            and len(cached[1].members) == len(members)
            and all(map(is_, cached[1].members, members))
            and (cached[0] is gang or cached[0] == gang)
        ):
            translated = cached[1]
        else:
            translated = _with(gang, members=members)
        memo[members[0].uid] = (gang, translated)
        out.append(translated)
    _memo.gangs = memo
    return out


def _addition(
    pod: Pod, demands: Mapping[str, _Demand | str], held: Mapping[str, _Addition]
) -> _Addition | None:
    """What the devices add to a pod, as a comparable value: why its demand is unproven, what its
    claims request (and the node an allocated claim holds it to), or what it holds; None: nothing."""
    found = demands.get(pod.uid)
    if isinstance(found, str):
        return ("unproven", (), found, ())
    if found is not None:
        if found.addition is None:  # a demand may be shared by members: its addition too
            found.addition = ("demand", tuple(found.requests.items()), found.node, tuple(found.reach))
        return found.addition
    return held.get(pod.uid)


def _pod_with(pod: Pod, addition: _Addition) -> Pod:
    kind, added, node, reach = addition
    if kind == "unproven":
        return _with(pod, devices_unproven=node)
    requests = dict(pod.requests)
    for name, amount in added:
        requests[name] = requests.get(name, 0) + amount
    if kind == "held":
        return _with(pod, requests=requests)
    affinity = pod.required_affinity
    if node is not None:
        pin = Requirement(NODE_NAME_FIELD, "In", (node,), field=True)
        affinity = tuple((*term, pin) for term in affinity) or ((pin,),)
    for terms in reach:  # where an allocated claim's devices are reachable, ANDed
        affinity = tuple((*mine, *theirs) for mine in affinity for theirs in terms) if affinity else terms
    return _with(pod, requests=requests, required_affinity=affinity)


def gpu_resource_of(snapshot: Snapshot, world: DraWorld | None, configured: str) -> str:
    """The resource placement indexes as GPUs: the configured one, unless no node offers it and
    the GPUs are the devices of exactly one DeviceClass (a cluster whose GPUs are only DRA devices)."""
    if world is None or world.empty or any(configured in n.allocatable for n in snapshot.nodes):
        return configured
    offered = {class_resource(c) for c in world.classes.values()}
    present = {r for r in offered if any(r in n.allocatable for n in snapshot.nodes)}
    return present.pop() if len(present) == 1 else configured
