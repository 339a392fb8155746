"""DRA devices as room and demand: a snapshot's claims turned into resources the planner counts.

Every DeviceClass is one resource, named by its ``extendedResourceName`` where set, else by the
class name (queues and messages use the same name). A node's allocatable gains the class's devices
it reaches (node-local ResourceSlices, newest complete pool generation); a pod holding allocated
devices (its claims' ``reservedFor``) requests them, so a preempted victim frees them. Devices
allocated to a claim no live pod holds, or several do, are taken off the node's room.

A gated member's demand is its claims' requests (a template's, or a named claim's): ``exactly``
with ``deviceClassName`` and ``count``, CEL ``selectors`` and the claim's ``matchAttribute``
constraints; of ``firstAvailable`` the first alternative. An admitted member the scheduler has not
placed yet keeps the demand of its claims not allocated yet. A request that narrows the class
(selectors, a constraint, a class selecting devices an earlier class counts) is also a resource of
its own: per node, how many of its free devices satisfy it (for a constraint, in groups of equal
attribute value, whole requests only), so the member is pinned only where its devices are. A named
claim already allocated pins its members to its node; one not yet allocated is counted once and
holds the gang to one node.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from operator import attrgetter
from typing import Any, TypeVar

from controller.core import messages as msg
from controller.core.device_cel import SelectorError, Selectors
from controller.core.dra import Claim, ClaimSpec, Device, DeviceClass, DeviceId, DeviceRequest, DraWorld
from controller.core.model import NODE_NAME_FIELD, Gang, Node, Pod, Requirement, Snapshot

HOSTNAME = "kubernetes.io/hostname"

_Record = TypeVar("_Record", Pod, Gang)
# What devices add to a pod: (kind, requests, text): ("unproven", (), why), ("demand", requests,
# the node an allocated claim holds it to, or None) or ("held", requests, None).
_Addition = tuple[str, tuple[tuple[str, int], ...], str | None]
_ATTRS = {cls: attrgetter(*(f.name for f in fields(cls))) for cls in (Pod, Gang)}
_POSITION = {cls: {f.name: i for i, f in enumerate(fields(cls))} for cls in (Pod, Gang)}


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
    count: int
    all_devices: bool

    @property
    def resource(self) -> str:
        text = repr((self.selectors, self.match, self.count, self.all_devices)).encode()
        return f"{self.device_class}[{hashlib.sha256(text).hexdigest()[:8]}]"


@dataclass
class _Demand:
    requests: dict[str, int] = field(default_factory=dict)
    narrow: list[_Narrow] = field(default_factory=list)
    node: str | None = None  # an allocated named claim's node
    shared: set[tuple[str, str]] = field(default_factory=set)  # unallocated named claims


class _DeviceIndex:
    """What follows from the devices and classes alone: kept between passes while both are equal
    (claims change far more often than slices and classes)."""

    def __init__(self, world: DraWorld) -> None:
        self.devices = world.devices
        self.classes = world.classes
        self.selectors = Selectors()
        self.by_node: dict[str, list[Device]] = defaultdict(list)
        for device in _current(world.devices):
            if device.node is not None and device.unmodelled is None:
                self.by_node[device.node].append(device)
        self.matching: dict[tuple[str, tuple[str, ...]], frozenset[DeviceId]] = {}
        self.resources: dict[DeviceId, str] | None = None  # _resource_of_device, once asked
        # node -> (device id, its class resource) of each device that counts as one
        self.node_resources: dict[str, list[tuple[DeviceId, str]]] = {}
        self.counted_as: dict[str, str] = {}  # class name -> _counted_as, once asked

    @staticmethod
    def of(world: DraWorld) -> _DeviceIndex:
        last = _memo.index
        if last is None or last.devices != world.devices or last.classes != world.classes:
            last = _memo.index = _DeviceIndex(world)
        return last


class DeviceView:
    """The devices of a snapshot: which each node reaches, which are free, what matches what."""

    def __init__(self, world: DraWorld) -> None:
        self.world = world
        self.index = _DeviceIndex.of(world)
        self.selectors = self.index.selectors
        self.by_node = self.index.by_node
        self.allocated: dict[DeviceId, Claim] = {}
        for claim in world.claims.values():
            for device_id in claim.allocated:
                self.allocated[device_id] = claim
        self._matching = self.index.matching

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
            for devices in self.by_node.values():
                for device in devices:
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
        constraint; 1 or 0 for allocationMode All)."""
        matching = self.matching(narrow.device_class, narrow.selectors)
        mine = [d for d in self.by_node.get(node, ()) if d.id in matching]
        free = [d for d in mine if d.id not in self.allocated]
        if narrow.all_devices:
            return 1 if mine and len(free) == len(mine) else 0
        if narrow.match is None:
            return len(free)
        groups: dict[object, int] = defaultdict(int)
        for device in free:
            value = device.attributes.get(_qualified(narrow.match, device.driver))
            if value is not None:
                groups[value] += 1
        return sum(n // narrow.count * narrow.count for n in groups.values())


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


def _request_demand(view: DeviceView, request: DeviceRequest, spec: ClaimSpec, demand: _Demand) -> None:
    parent = request.name  # a constraint naming a firstAvailable request holds for its subrequests
    if request.alternatives:
        request = request.alternatives[0]  # the scheduler's first choice; the others are not counted
    if request.unmodelled:
        raise Unproven(request.unmodelled)
    if request.all_devices:
        # It takes every matching device of the node it lands on: a per-node demand not modelled.
        raise Unproven(msg.device_request_unmodelled(request.name, msg.device_allocation_mode("All")))
    resource = _counted_as(view, request.device_class)
    matches = [
        name for name, names in spec.match_attributes if not names or request.name in names or parent in names
    ]
    if len(matches) > 1:
        raise Unproven(msg.device_constraints_unmodelled(request.name))
    match = matches[0] if matches else None
    demand.requests[resource] = demand.requests.get(resource, 0) + request.count
    narrower_class = resource != class_resource(view.device_class(request.device_class))
    if request.selectors or match or narrower_class:
        # Without a constraint its room is counted in devices: requests of the same devices but
        # different counts are one resource, so together they never take more than there are.
        narrow = _Narrow(request.device_class, request.selectors, match, request.count if match else 1, False)
        view.matching(narrow.device_class, narrow.selectors)  # fails now if an expression does
        demand.narrow.append(narrow)
        demand.requests[narrow.resource] = demand.requests.get(narrow.resource, 0) + request.count


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


def _claim_demand(view: DeviceView, spec: ClaimSpec, demand: _Demand) -> None:
    if spec.unmodelled:
        raise Unproven(spec.unmodelled)
    constrained = [
        r for r in spec.requests if any(not names or r.name in names for _, names in spec.match_attributes)
    ]
    if spec.match_attributes and len(constrained) > 1:
        raise Unproven(msg.device_constraints_unmodelled(constrained[0].name))
    for request in spec.requests:
        _request_demand(view, request, spec, demand)


def member_demand(view: DeviceView, pod: Pod, counted: set[tuple[str, str]]) -> _Demand:
    """What a gated member's claims ask for (a named claim in ``counted`` is already counted for
    another member of the gang). Raises Unproven."""
    demand = _Demand()
    for pod_claim in pod.claims:
        if pod_claim.claim is not None:
            claim = view.world.claims.get((pod.namespace, pod_claim.claim))
            if claim is None:
                raise Unproven(msg.device_claim_missing(pod_claim.claim))
            if claim.is_allocated:
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
            _claim_demand(view, spec, demand)
    return demand


def _held(
    view: DeviceView, pods: Iterable[Pod], resources: Mapping[DeviceId, str]
) -> tuple[dict[str, dict[str, int]], set[DeviceId]]:
    """What each pod holding devices requests of them (by uid), and the devices so accounted.
    A claim several live pods reserve is accounted to none: evicting one of them would not free
    its devices, so they are not room at all."""
    live = {p.uid: p for p in pods if p.holds_capacity}
    charged: dict[str, dict[str, int]] = defaultdict(dict)
    accounted: set[DeviceId] = set()
    for claim in view.world.claims.values():
        if not claim.allocated:
            continue
        holders = [uid for uid in claim.reserved_for if uid in live]
        if len(holders) != 1:
            continue
        accounted.update(claim.allocated)
        if _extended_for(view, claim, live[holders[0]], resources):
            continue  # the pod's own extended-resource request counts these
        requests = charged[holders[0]]
        for device_id in claim.allocated:
            resource = resources.get(device_id)
            if resource is not None:
                requests[resource] = requests.get(resource, 0) + 1
    return charged, accounted


def _extended_for(view: DeviceView, claim: Claim, holder: Pod, resources: Mapping[DeviceId, str]) -> bool:
    """Is the claim the one the scheduler made for its holder's extended-resource request, whose
    own requests then count its devices? Not the claim's annotation alone, which any tenant who
    creates a claim can write: the holder controls the claim, its status names it, and it
    requests the extended resource of the devices' class."""
    if not (claim.extended and claim.owner == holder.uid and holder.extended_claim == claim.name):
        return False
    extended = {c.extended_resource for c in view.world.classes.values() if c.extended_resource}
    counted = {resources.get(device_id) for device_id in claim.allocated}
    return all(r in extended and r in holder.requests for r in counted)


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
    return out


def _node_room(
    view: DeviceView,
    node: Node,
    narrow: Iterable[_Narrow],
    accounted: set[DeviceId],
    node_resources: Mapping[str, list[tuple[DeviceId, str]]],
) -> Node:
    totals: dict[str, int] = defaultdict(int)
    for device_id, resource in node_resources.get(node.name, ()):
        # Served by the device plugin on this node: the scheduler does not map it onto DRA here.
        if resource in node.allocatable:
            continue
        if device_id in view.allocated and device_id not in accounted:
            continue  # allocated to a claim no live pod holds: not free, and nobody gives it back
        totals[resource] += 1
    for item in narrow:
        totals[item.resource] = view.narrow_room(item, node.name)
    if not totals:
        return node
    return replace(node, allocatable={**node.allocatable, **totals})


def with_devices(snapshot: Snapshot, world: DraWorld | None) -> Snapshot:
    """The snapshot with DRA devices as node room and pod requests (unchanged without DRA), and
    without its DRA world, so that it is never counted twice."""
    if world is None or world.empty:
        return snapshot
    view = DeviceView(world)
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
                    demand = member_demand(view, pod, counted)
                else:
                    starting.add(pod.uid)
                    demand = member_demand(view, _unallocated_claims(view, pod), counted)
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
    resources = _resource_of_device(view)
    held, accounted = _held(view, snapshot.pods, resources)
    pods, changed = _translated_pods(snapshot.pods, demands, held)
    gangs = _translated_gangs(gangs, changed)
    node_resources = view.index.node_resources  # filled by _resource_of_device
    nodes = tuple(_node_room(view, n, narrow.values(), accounted, node_resources) for n in snapshot.nodes)
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
    pods: tuple[Pod, ...], demands: Mapping[str, _Demand | str], held: Mapping[str, dict[str, int]]
) -> tuple[tuple[Pod, ...], dict[str, Pod]]:
    """The pods with their devices added, and those that changed by uid; a pod the last
    translation saw, with the same addition, is taken from it."""
    last, memo = _memo.pods, {}
    changed: dict[str, Pod] = {}
    for pod in pods:
        addition = _addition(pod, demands, held)
        if addition is None:
            continue
        cached = last.get(pod.uid)
        if cached is not None and cached[0] is pod and cached[1] == addition:
            translated = cached[2]
        else:
            translated = _pod_with(pod, addition)
        memo[pod.uid] = (pod, addition, translated)
        changed[pod.uid] = translated
    _memo.pods = memo
    return tuple([changed.get(p.uid, p) for p in pods]), changed


def _translated_gangs(gangs: Iterable[Gang], changed: Mapping[str, Pod]) -> list[Gang]:
    """The gangs with their translated members; an equal gang with the same members as in the
    last translation is taken from it."""
    last, memo = _memo.gangs, {}
    out = []
    for gang in gangs:
        members = tuple([changed.get(m.uid, m) for m in gang.members])
        if members == gang.members:  # compares by identity first: no member changed
            out.append(gang)
            continue
        # By its first member's uid (a str, whose hash is kept): a pod is a member of one gang.
        cached = last.get(members[0].uid)
        if cached is not None and cached[1].members == members and cached[0] == gang:
            translated = cached[1]
        else:
            translated = _with(gang, members=members)
        memo[members[0].uid] = (gang, translated)
        out.append(translated)
    _memo.gangs = memo
    return out


def _addition(
    pod: Pod, demands: Mapping[str, _Demand | str], held: Mapping[str, dict[str, int]]
) -> _Addition | None:
    """What the devices add to a pod, as a comparable value: why its demand is unproven, what its
    claims request (and the node an allocated claim holds it to), or what it holds; None: nothing."""
    found = demands.get(pod.uid)
    if isinstance(found, str):
        return ("unproven", (), found)
    if found is not None:
        return ("demand", tuple(found.requests.items()), found.node)
    extra = held.get(pod.uid)
    if extra:
        return ("held", tuple(extra.items()), None)
    return None


def _pod_with(pod: Pod, addition: _Addition) -> Pod:
    kind, added, node = addition
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
    return _with(pod, requests=requests, required_affinity=affinity)


def gpu_resource_of(snapshot: Snapshot, world: DraWorld | None, configured: str) -> str:
    """The resource placement indexes as GPUs: the configured one, unless no node offers it and
    the GPUs are the devices of exactly one DeviceClass (a cluster whose GPUs are only DRA devices)."""
    if world is None or world.empty or any(configured in n.allocatable for n in snapshot.nodes):
        return configured
    offered = {class_resource(c) for c in world.classes.values()}
    present = {r for r in offered if any(r in n.allocatable for n in snapshot.nodes)}
    return present.pop() if len(present) == 1 else configured
