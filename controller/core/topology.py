"""What a gang asks of the cluster's topology, and the placement of sliced gangs.

A topology is an ordered list of node label keys, widest first (zone, block, rack, NVLink domain,
hostname by default); the platform engineer may define several (``PlannerConfig.topologies``) and a
gang names the one it uses. Per gang:

- required level (``Gang.required_topology``): every member inside one domain of it, or wait
  (placement.place with ``Within``);
- preferred level: its domains are tried first, then those of each wider level of the gang's
  topology, then the whole cluster (``levels_to_try``);
- no request: every level of the topology but the hostname is tried, the narrowest first (for a
  gang that needs GPUs; one that does not is placed by best fit alone);
- slices: every ``slice_size`` members (in member order) inside one domain of ``slice_key``, the
  gang as a whole inside one domain of its required level if it has one (``place_sliced``);
- KAI subgroups with a required level of their own: the same, each leaf subgroup's members being
  one slice (of its own size and level); members of subgroups without one are placed anywhere
  the gang may go.

Among the domains that fit, the one needing the fewest nodes and then the one with the fewest free
GPUs is taken (``placement.domain_order``): best fit, so the wholly free domains stay free for the
big gangs behind. ``invalid`` says why a request can never be met (the PodGroup's InvalidSpec).

Volcano's ``networkTopology`` names a HyperNode tier, not a node label: tier 1 is the narrowest
level of the gang's topology but the hostname that some node carries, tier N the N-th counting
outwards (the default levels, all labelled: 1 NVLink domain, 2 rack, 3 block, 4 zone).
``resolve_tiers`` turns it into the required (mode hard) or preferred (soft) level before the pass
plans the gang.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from controller.core import messages as msg
from controller.core.capacity import Capacity
from controller.core.config import HOSTNAME_LABEL, PlannerConfig, narrowest_first
from controller.core.model import Gang, GangTopology, Pod
from controller.core.placement import Assignment, Domain, DomainFit, Items, Within, domain_order, fill
from controller.core.shapes import Shape, member_kind
from shared import constants
from shared.jsonread import whole_number


@dataclass(frozen=True, slots=True)
class Slices:
    """Members in consecutive pieces, in member order, each inside one domain of its node label:
    ``parts`` is (label key, or None: anywhere, members). ``key`` and ``size`` name uniform slices
    (every ``size`` members inside one domain of ``key``); both are empty for KAI subgroups."""

    parts: tuple[tuple[str | None, int], ...]
    key: str = ""
    size: int = 0

    @property
    def keyed(self) -> tuple[tuple[str, int], ...]:
        """The pieces held to a domain."""
        return tuple((key, n) for key, n in self.parts if key is not None)


# KAI: the subgroup of its PodGroup a member belongs to (a pod label).
SUBGROUP = constants.KAI_SUBGROUP_LABEL


def slices_of(gang: Gang, members: Sequence[Pod]) -> Slices | None:
    """How ``members`` (being placed together) are cut into slices, or None. Uniform slices cover
    them exactly or not at all (then nothing places them: ``invalid`` told why)."""
    request = gang.topology
    if request.subgroup_levels:
        levels = dict(request.subgroup_levels)
        counts: dict[str, int] = {}
        for member in members:
            name = member.labels.get(SUBGROUP, "")
            counts[name] = counts.get(name, 0) + 1
        parts = tuple((levels.get(name), counts[name]) for name in sorted(counts))
        return Slices(parts) if any(key is not None for key, _ in parts) else None
    if request.slice_key == HOSTNAME_LABEL and request.slice_size == 1:
        return None  # one pod is always on one node: no slicing, only the gang's own request
    if request.slice_key and request.slice_size > 0:
        size, n = request.slice_size, len(members)
        parts = ((request.slice_key, size),) * (n // size) if n % size == 0 else ()
        return Slices(parts, request.slice_key, size)
    return None


# A pod's index in its Job (indexed Jobs, JobSets): slices are cut in its order.
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def piece_order(pod: Pod) -> tuple[str, int, float, str]:
    """Members of a sliced gang in the order of ``Slices.parts``: by subgroup (KAI), then index."""
    return (pod.labels.get(SUBGROUP, ""), *slice_order(pod))


def slice_order(pod: Pod) -> tuple[int, float, str]:
    """Members of a sliced gang in index order (then as they are admitted): members 0..N-1 form
    the first slice."""
    index = whole_number(pod.labels.get(COMPLETION_INDEX))
    return (index if index is not None and index >= 0 else 1 << 30, pod.created, pod.name)


def levels_to_try(config: PlannerConfig, gang: Gang, gpus: bool = True) -> tuple[str, ...]:
    """The label keys whose domains a gang without a required level is first tried inside, in
    order: from its preferred level to the widest (whatever it needs), else, for a gang that needs
    GPUs (``gpus``), every level but the hostname, narrowest first; else none."""
    levels = config.levels(gang.topology.name) or ()
    preferred = gang.topology.preferred
    if preferred:
        if preferred in levels:
            return tuple(reversed(levels[: levels.index(preferred) + 1]))
        # A label of its own, not a level of the topology: its domains, then the topology's levels
        # as for a gang that prefers none (never straight to anywhere).
        return (preferred, *(key for key in narrowest_first(levels) if key != preferred))
    return narrowest_first(levels) if gpus else ()


def preference_unheeded(capacity: Capacity, gang: Gang) -> str | None:
    """What the admitted gang's message adds when its preferred level could not be followed: no
    node carries that label (a typo, or a level this cluster lacks), so it was placed as if it
    preferred none."""
    preferred = gang.topology.preferred
    if preferred and capacity.level_of(preferred) is None:
        return msg.preferred_unlabelled(preferred)
    return None


def resolve_tiers(gang: Gang, config: PlannerConfig, carried: Callable[[str], bool] | None = None) -> Gang:
    """The gang with a Volcano tier turned into the level it names: required (mode hard) or
    preferred (soft); a tier its topology does not have, or one that disagrees with a level set
    another way, is a conflict (InvalidSpec). Tiers count only the levels some node carries
    (``carried``; default: all), as HyperNode tiers count only the tiers there are: tier 1 is the
    narrowest level the cluster has."""
    request = gang.topology
    tier = request.required_tier or request.preferred_tier
    if not tier:
        return gang
    levels = config.levels(request.name)
    if levels is None:
        return gang  # an unknown topology: ``invalid`` says so
    tiers = tuple(key for key in narrowest_first(levels) if carried is None or carried(key))
    if not 0 < tier <= len(tiers):
        why = msg.tier_invalid(tier, request.name or config.topologies[0][0], tiers)
        return replace(gang, topology=_tiered(request, conflict=why))
    key = tiers[tier - 1]
    if request.required_tier:
        if gang.required_topology and gang.required_topology != key:
            why = msg.tier_conflict(True, gang.required_topology, tier, key)
            return replace(gang, topology=_tiered(request, conflict=why))
        return replace(gang, required_topology=key, topology=_tiered(request))
    if request.preferred and request.preferred != key:
        why = msg.tier_conflict(False, request.preferred, tier, key)
        return replace(gang, topology=_tiered(request, conflict=why))
    return replace(gang, topology=_tiered(request, preferred=key))


def _tiered(request: GangTopology, conflict: str | None = None, preferred: str | None = None) -> GangTopology:
    """The request with its tier resolved (or refused): what the planner reads from then on."""
    return replace(
        request,
        required_tier=0,
        preferred_tier=0,
        conflict=conflict or request.conflict,
        preferred=preferred or request.preferred,
    )


def resolve(capacity: Capacity, keys: Sequence[str]) -> list[int]:
    """The capacity levels of ``keys`` some node carries, in order."""
    out: list[int] = []
    for key in keys:
        level = capacity.level_of(key)
        if level is not None and level not in out:
            out.append(level)
    return out


def _kinds(gang: Gang) -> int:
    return len({member_kind(m) for m in gang.members if not m.finished and not m.terminating})


def invalid(gang: Gang, config: PlannerConfig) -> str | None:
    """Why the gang's topology request can never be met, or None."""
    request = gang.topology
    if request.conflict:
        return request.conflict
    if request.name is not None and config.levels(request.name) is None:
        return msg.topology_unknown(request.name, [name for name, _ in config.topologies])
    if request.subgroup_levels and _kinds(gang) > 1:  # pieces are cut from one shape's pods too
        return msg.slices_of_one_shape(_kinds(gang))
    if request.slice_key or request.slice_size:
        if request.slice_size < 0:
            return msg.slice_size_not_a_number()
        if not request.slice_key or request.slice_size < 1:
            return msg.slice_incomplete()
        if gang.min_member % request.slice_size:
            return msg.slice_not_dividing(request.slice_size, gang.min_member)
        if _kinds(gang) > 1:  # slices are cut from one shape's pods: such a gang would wait for ever
            return msg.slices_of_one_shape(_kinds(gang))
        levels = config.levels(request.name) or ()
        required = gang.required_topology
        if (
            required in levels
            and request.slice_key in levels
            and levels.index(request.slice_key) < levels.index(required)
        ):
            return msg.slice_wider_than_gang(request.slice_key, required)
    return None


def place_sliced(
    capacity: Capacity, items: Items, slices: Slices, within: Within | None
) -> tuple[list[Assignment], Domain | None] | None:
    """Place one shape's pods in ``slices.parts``, each inside one domain of its level (those held
    to a domain first), all inside one domain of ``within`` when given; booked, or nothing. The
    assignment lists the parts in order, so pods taken in member order fill one after the other."""
    if len(items) != 1:
        return None
    shape, n = items[0]
    parts = slices.parts
    if not parts or sum(count for _, count in parts) != n:
        return None
    levels: list[int | None] = []
    for key, _ in parts:
        level = capacity.level_of(key) if key is not None else None
        if key is not None and level is None:
            return None
        levels.append(level)
    outer = _outer_domains(capacity, items, within)
    if outer is None:
        return None
    order = sorted(range(len(parts)), key=lambda k: levels[k] is None)  # held ones first
    for home in outer:
        mark = capacity.mark()
        placed: list[Assignment | None] = [None] * len(parts)
        # One order of the slice level's domains per (level, size), kept up to date slice by
        # slice: the cost stays near one sort per outer domain, however many slices there are.
        orders: dict[tuple[int, int], _SliceOrder] = {}
        for k in order:
            level, size = levels[k], parts[k][1]
            if level is None:
                placed[k] = _place_anywhere(capacity, shape, size, home)
            else:
                if (level, size) not in orders:
                    orders[level, size] = _SliceOrder(capacity, shape, size, level, home)
                placed[k] = orders[level, size].place()
            if placed[k] is None:
                capacity.rollback(mark)
                break
        else:
            return [[where for one in placed if one is not None for where in one]], home
    return None


def _outer_domains(capacity: Capacity, items: Items, within: Within | None) -> list[Domain | None] | None:
    if within is None:
        return [None]
    if within.value is not None:
        found = capacity.domain_of(within.key, within.value)
        return [found] if found is not None else None
    level = capacity.level_of(within.key)
    if level is None:
        return None
    return [(level, d) for d in domain_order(capacity, level, items)]


def _place_anywhere(capacity: Capacity, shape: Shape, size: int, home: Domain | None) -> Assignment | None:
    """A piece held to no level: anywhere inside ``home``; booked."""
    nodes = capacity.dom_members[home[0]][home[1]] if home is not None else None
    out, placed = fill(capacity, shape, size, nodes)
    return out if placed == size else None


class _SliceOrder:
    """The domains of one level (their nodes inside ``home``) that could hold a slice of ``size``
    pods of ``shape``, best fit first as ``domain_order`` ranks them. Booking a slice re-ranks only
    the domain it went to; a domain that failed a slice is dropped, since room only shrinks while
    one gang is placed."""

    def __init__(self, capacity: Capacity, shape: Shape, size: int, level: int, home: Domain | None) -> None:
        self.capacity, self.shape, self.size = capacity, shape, size
        self.key_of = DomainFit(capacity, level, [(shape, size)]).key
        self.nodes: Mapping[int, Sequence[int]]
        if home is None:
            self.nodes = dict(enumerate(capacity.dom_members[level]))
        else:  # the slice level's domains met inside home, with their nodes there
            dom_of = capacity.dom_of[level]
            inside: dict[int, list[int]] = {}
            for i in capacity.dom_members[home[0]][home[1]]:
                if dom_of[i] >= 0:
                    inside.setdefault(dom_of[i], []).append(i)
            self.nodes = inside
        self.ranked = sorted(fit for d in self.nodes if (fit := self.key_of(d)) is not None)

    def place(self) -> Assignment | None:
        """One slice inside the best domain that holds it; booked."""
        while self.ranked:
            d = self.ranked.pop(0)[2]
            out, placed = fill(self.capacity, self.shape, self.size, self.nodes[d])
            if placed == self.size:
                fit = self.key_of(d)
                if fit is not None:
                    insort(self.ranked, fit)
                return out
        return None


def held_in(
    config: PlannerConfig, gang: Gang, labels: Mapping[str, Mapping[str, str]], nodes: Iterable[str]
) -> tuple[str, str] | None:
    """The narrowest domain (label key, value) of the gang's topology, or of its required level,
    that holds every one of ``nodes`` (where its members run or are placed), or None."""
    on = [labels.get(name, {}) for name in set(nodes)]
    if not on:
        return None
    keys = list(reversed(config.levels(gang.topology.name) or ()))
    if gang.required_topology and gang.required_topology not in keys:
        keys.insert(0, gang.required_topology)
    for key in keys:
        values = {node_labels.get(key) for node_labels in on}
        if len(values) == 1 and None not in values:
            return key, str(values.pop())
    return None
