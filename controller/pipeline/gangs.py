"""Assemble the core's Snapshot from the store: PodGroups + members -> Gang records.

Pure (reads the store, does no I/O). Where a value can come from several places the precedence is
written once here: PodGroup spec, then Phalanx annotations (PodGroup, then members), then what the
webhook inferred from the workload, then the configured default.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from controller.api import queue_records, records
from controller.api.records import PodGroupRecord, WorkloadSize
from controller.api.store import Store
from controller.api.workload_owners import WorkloadKey, sized_by
from controller.core import DisruptionMode, Gang, GangKey, GangTopology, Placement, Pod, Snapshot, is_live
from controller.core import messages as msg
from shared import constants, topology
from shared.grouplink import opted_in
from shared.jsonread import whole_number
from shared.podgroup import ADMITTED_PHASES, ConditionType, Phase
from shared.quantities import QuantityError, parse_resources

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GangView:
    """A gang as the shell sees it: the core's record plus the PodGroup it came from."""

    gang: Gang
    podgroup: PodGroupRecord
    members: tuple[Pod, ...]
    # Start of the current wait (status.scheduleStartTime); None before the first member.
    waiting_since: float | None = None


def member_annotation(members: Iterable[Pod], key: str) -> str | None:
    values = sorted({p.annotations[key] for p in members if key in p.annotations})
    return values[0] if values else None


def _annotated_sizes(members: Iterable[Pod], key: str) -> list[int]:
    return [v for p in members if (v := whole_number(p.annotations.get(key))) and v > 0]


def spec_sizes(
    members: Iterable[Pod], workload_sizes: Mapping[WorkloadKey, WorkloadSize]
) -> tuple[int, int | None] | None:
    """(size, most members at once; None: no bound) of the members' workloads as their specs say
    now (kept by the informers), or None unless every one of them is known."""
    keys = {key for p in members if (key := sized_by(p)) is not None}
    if not keys or any(key not in workload_sizes for key in keys):
        return None  # partly unknown (not served, not synced yet): the sizes the webhook wrote stand
    found = [workload_sizes[key] for key in sorted(keys)]
    size = max(w.size for w in found)
    bounds = [w.largest for w in found]
    largest = None if None in bounds else max(size, *(b for b in bounds if b is not None))
    return size, largest


def inferred_min_member(members: Iterable[Pod]) -> int | None:
    """The size the webhook inferred from the members' workload spec when it was created.

    Members of several owners may disagree (mpi-operator's launcher Job infers 1 for itself): the
    largest is the gang's size. Compared as numbers ("10" > "9")."""
    inferred = _annotated_sizes(members, constants.INFERRED_MIN_MEMBER_ANNOTATION)
    return max(inferred) if inferred else None


def creatable(
    members: Iterable[Pod], workload_sizes: Mapping[WorkloadKey, WorkloadSize] | None = None
) -> int | None:
    """How many members the gang's workloads can create at once (None when unknown).

    Each workload contributes its size (as its spec says now where known, else as the webhook
    inferred it); bare pods count one each. A chief Pod plus a 4-replica worker StatefulSet can
    create 5.
    """
    by_workload: dict[object, int | None] = {}
    bare = 0
    members = list(members)
    if not members:
        return None  # nothing created yet: the workload may still be on its way
    for pod in members:
        if pod.owner is None:
            bare += 1
            continue
        workload = sized_by(pod)
        live = (workload_sizes or {}).get(workload) if workload is not None else None
        size = (
            live.size
            if live is not None
            else whole_number(pod.annotations.get(constants.INFERRED_MIN_MEMBER_ANNOTATION))
        )
        key: object = workload or pod.owner.uid
        previous = by_workload.get(key, 0)
        by_workload[key] = None if size is None or previous is None else max(previous, size)
    if not by_workload or any(v is None for v in by_workload.values()):
        return None  # no workload member seen (yet, or after a rollback): size unknown
    return bare + sum(v for v in by_workload.values() if v is not None)


@dataclass(frozen=True, slots=True)
class GangPriority:
    value: int  # the members' pod priority: order across namespaces, preemption
    local: int | None  # the PodGroup's own: order inside its namespace only
    preemption_policy: str


def gang_priority(record: PodGroupRecord, members: Iterable[Pod], store: Store) -> GangPriority:
    """A gang's priority as Kubernetes governs it, and the PodGroup's own claim.

    Pods get their priority from a PriorityClass at admission, which cluster admins govern (the
    PriorityClass admission plugin, ResourceQuota scopes); a PodGroup's ``priorityClassName`` or
    ``priority`` is a field any tenant who may write PodGroups sets at will. So the members' pod
    priority orders gangs across namespaces and decides preemption, and the PodGroup's own value
    only re-ranks gangs inside its namespace. A class that says ``preemptionPolicy: Never`` is
    honoured from either side: it only restrains the gang.
    """
    members = list(members)
    # The API server copies each pod's class's preemptionPolicy into the pod spec.
    never = any(p.preemption_policy == "Never" for p in members)
    local = record.spec.priority
    class_name = record.spec.priority_class_name
    if class_name is not None and class_name in store.priority_classes:
        pc = store.priority_classes[class_name]
        local = pc.value
        never = never or pc.preemption_policy == "Never"
    value = max((p.priority for p in members), default=0)
    return GangPriority(value, local, "Never" if never else "PreemptLowerPriority")


def _timeout(record: PodGroupRecord, members: list[Pod]) -> float | None:
    for value in (
        record.spec.schedule_timeout_seconds,
        record.annotations.get(constants.SCHEDULE_TIMEOUT_ANNOTATION),
        member_annotation(members, constants.SCHEDULE_TIMEOUT_ANNOTATION),
    ):
        seconds = whole_number(value)
        if seconds and seconds > 0:
            return float(seconds)
    return None


def _min_resources(record: PodGroupRecord) -> dict[str, int]:
    """spec.minResources in the core's units; one that cannot be read is left out (the CRD's
    schema refuses such values, so only a hand-edited object gets here)."""
    try:
        return parse_resources(dict(record.spec.min_resources))
    except (QuantityError, ValueError):
        return {}


def _placement(record: PodGroupRecord, members: list[Pod]) -> Placement:
    value = record.annotations.get(constants.PLACEMENT_ANNOTATION) or member_annotation(
        members, constants.PLACEMENT_ANNOTATION
    )
    return Placement.FREE if value == constants.PLACEMENT_FREE else Placement.PINNED


def _members_ask(
    members: list[Pod], names: Mapping[str, str]
) -> tuple[topology.TopologyAsk, topology.Conflict | None]:
    """One source's annotations on the members (copied from their pod templates), and a conflict
    when two members carry different values of one of them (templates of one workload that
    disagree, e.g. a JobSet's jobs asking for different Kueue levels): never one of them picked."""
    found: dict[str, tuple[str, str]] = {}  # field -> (value, the first pod carrying it)
    for pod in sorted(members, key=lambda p: p.name):
        for field, key in names.items():
            value = pod.annotations.get(key)
            if not value:
                continue
            seen = found.get(field)
            if seen is None:
                found[field] = (value, pod.name)
            elif seen[0] != value:
                first, second = msg.source_on_pod(key, seen[1]), msg.source_on_pod(key, pod.name)
                return topology.TopologyAsk(), topology.Conflict(field, seen[0], first, value, second)
    return topology.TopologyAsk(**{field: value for field, (value, _) in found.items()}), None


def _topology(record: PodGroupRecord, members: list[Pod]) -> tuple[str | None, GangTopology]:
    """The node label key the gang must stay inside one domain of, and the rest of its topology
    request. Phalanx's own: the PodGroup's spec (a native PodGroup's schedulingConstraints are
    copied there), its annotations and its members' (copied there from their workload by the
    webhook); then Kueue's pod-template annotations and KAI's topologyConstraint. Two places that
    disagree make a conflict (InvalidSpec), within one system as between two."""
    spec = record.spec
    members_phalanx, conflict = _members_ask(members, topology.PHALANX_ANNOTATIONS)
    kueue, kueue_conflict = _members_ask(members, topology.KUEUE_ANNOTATIONS)
    conflict = conflict or kueue_conflict
    phalanx = topology.TopologyAsk()
    if conflict is None:
        phalanx, conflict = topology.merge(
            (
                (
                    msg.SOURCE_PODGROUP_SPEC,
                    topology.TopologyAsk(
                        name=spec.topology,
                        required=spec.topology_required,
                        preferred=spec.topology_preferred,
                        slice_key=spec.topology_slice_required,
                        slice_size=str(spec.topology_slice_size) if spec.topology_slice_size else None,
                    ),
                ),
                (
                    msg.SOURCE_PODGROUP_ANNOTATIONS,
                    topology.from_annotations(record.annotations, topology.PHALANX_ANNOTATIONS),
                ),
                (msg.SOURCE_MEMBER_ANNOTATIONS, members_phalanx),
            )
        )
    if conflict is not None:
        return None, GangTopology(conflict=_conflict_text(conflict))
    ask, conflict = topology.merge(
        (
            (msg.SOURCE_PHALANX, phalanx),
            (msg.SOURCE_KUEUE, kueue),
            (msg.SOURCE_KAI, record.kai_topology),
            (msg.SOURCE_VOLCANO, record.volcano_topology),
        )
    )
    if conflict is not None:
        return None, GangTopology(conflict=_conflict_text(conflict))
    return ask.required, GangTopology(
        name=ask.name,
        preferred=ask.preferred,
        slice_key=ask.slice_key,
        slice_size=_count(ask.slice_size),
        required_tier=_count(ask.required_tier),
        preferred_tier=_count(ask.preferred_tier),
        subgroup_levels=tuple(sorted(record.subgroup_topology.items())),
    )


def _conflict_text(conflict: topology.Conflict) -> str:
    return msg.topology_conflict(
        topology.FIELD_WORDS[conflict.field],
        conflict.first,
        conflict.first_from,
        conflict.second,
        conflict.second_from,
    )


def _count(value: str | None) -> int:
    """A positive count written as text; 0 when absent, -1 when not a count (InvalidSpec)."""
    if not value:
        return 0
    count = whole_number(value)  # ASCII digits only: "²".isdigit() holds, int("²") raises
    return count if count is not None and count > 0 else -1


def _disruption_mode(record: PodGroupRecord) -> DisruptionMode:
    return (
        DisruptionMode.SINGLE if record.spec.disruption_mode == DisruptionMode.SINGLE else DisruptionMode.ALL
    )


def _preemptible(record: PodGroupRecord, members: list[Pod]) -> bool:
    for source in (record.labels, record.annotations):
        if source.get(constants.PREEMPTIBLE, "").lower() == "false":
            return False
    return all(p.preemptible for p in members)


def _waiting_since(record: PodGroupRecord, members: list[Pod], now: float) -> float | None:
    """When the gang's current wait began (written to ``status.scheduleStartTime``), or None while
    no member has ever been seen: a PodGroup applied before its workload is not waiting yet.

    The members waiting to be placed date it: new pods after a preemption or a rollback start a new
    wait, a replacement beside members that still run waits from its own creation, and a PodGroup
    applied long before its workload (or reused) does not count. With no members the stored value
    stands, so a gang whose Job was suspended on timeout stays timed out.
    """
    live = [p for p in members if is_live(p)]
    waiting = [p.created for p in live if not p.bound]
    if waiting:
        return min(waiting)
    if live:
        return min(p.created for p in live)  # all placed: nothing waits
    if _wait_begins_now(record, members):
        # It has just lost its admission (its members were evicted or rolled back) and its owner
        # has not recreated them yet: a new wait begins now, not when the old one did. A gang with
        # no live member is never reported in an admitted phase, so later passes keep this value.
        return float(math.floor(now))
    return records.parse_time(record.parsed_status.schedule_start_time)


def _wait_begins_now(record: PodGroupRecord, members: list[Pod]) -> bool:
    """``_waiting_since`` takes the clock: no live member, and the PodGroup still says admitted."""
    return (
        not any(is_live(p) for p in members)
        and record.parsed_status.phase in ADMITTED_PHASES
        and not any(p.finished for p in members)
    )


def view(
    record: PodGroupRecord, store: Store, now: float, budgeted: Mapping[str, Pod] | None = None
) -> GangView:
    """The gang of ``record``; ``budgeted`` holds member records that carry their disruption budget."""
    members = [(budgeted or {}).get(p.uid, p) for p in store.members(record.key)]
    priority = gang_priority(record, members, store)
    admission = store.admission(record)  # with what this process wrote and has not seen back
    admitted: dict[str, str | None] = dict(admission.placement) if admission else {}
    booked: dict[str, str] = dict(admission.booked) if admission else {}
    admitted_at = admission.at if admission else None
    present = {p.uid for p in members if not p.terminating}  # a terminating pod holds no admission
    hold = store.hold_of(record.key)
    running = any((p.uid in admitted or p.bound) and not p.finished and not p.terminating for p in members)
    if admitted_at is not None and not running:
        # No admitted member is alive any more (evicted as a victim, rolled back, all ended): new
        # members must form the gang again, whole -- never trickle in as "replacements".
        admitted_at = None
    first_member = min((p.created for p in members), default=record.created)
    created = min(first_member, record.created) if record.created else first_member
    waiting_since = _waiting_since(record, members, now)
    required_topology, topology_request = _topology(record, members)
    gang = Gang(
        key=record.key,
        min_member=record.spec.min_member or 0,
        max_member=record.spec.max_member,
        members=tuple(members),
        priority=priority.value,
        local_priority=priority.local,
        created=created,
        waiting_since=waiting_since,
        # No timeout before the first member: there is nothing to time out yet.
        schedule_timeout=_timeout(record, members) if waiting_since is not None else None,
        placement=_placement(record, members),
        preemptible=_preemptible(record, members),
        preemption_policy=priority.preemption_policy,
        creatable=creatable(members, store.workload_sizes),
        admitted={uid: node for uid, node in admitted.items() if uid in present},
        booked={uid: node for uid, node in booked.items() if uid in present},
        min_resources=_min_resources(record),
        subgroups=record.subgroups,
        admitted_at=admitted_at,
        parent=record.spec.parent_pod_group,
        queue=_queue(record, members, store),
        held=dict(hold.placement) if hold else {},
        held_since=hold.at if hold else None,
        required_topology=required_topology,
        topology=topology_request,
        disruption_mode=_disruption_mode(record),
    )
    last_admitted = admission.latest if admission is not None and admitted_at is not None else None
    degraded = _degraded_since(record, gang, len(admission.placement) if admission else 0, now)
    gang = replace(gang, last_admitted_at=last_admitted, degraded_since=degraded)
    return GangView(gang, record, tuple(members), waiting_since)


def _degraded_since(record: PodGroupRecord, gang: Gang, recorded: int, now: float) -> float | None:
    """Since when an admitted gang runs with fewer members than it had (``recorded``: members its
    admission record holds) and than it needs. A gang whose workload was scaled up waits for its new
    members at its old size: that is not degraded, nothing of it was lost."""
    if gang.admitted_at is None:
        return None
    running = sum(1 for p in gang.members if p.bound and not p.finished and not p.terminating)
    # A failed member that its workload replaces (it has a controlling owner) is lost, not over: the
    # gang runs degraded until the replacement comes, rather than flipping to Failed and back.
    finished = sum(
        1 for p in gang.members if p.phase == "Succeeded" or (p.phase == "Failed" and p.owner is None)
    )
    if running == 0 or running + finished >= min(gang.min_member, recorded or gang.min_member):
        return None
    if any(p.uid in gang.admitted and is_live(p) and not p.bound for p in gang.members):
        return None  # admitted members still binding: the bind timeout's business
    previous = record.parsed_status.condition(ConditionType.DEGRADED)
    if previous is not None and previous.get("status") == "True":
        return records.parse_time(previous.get("lastTransitionTime")) or now
    return float(math.floor(now))


def _clock_bound(view: GangView) -> bool:
    """Did building ``view`` read the clock (a wait or a degradation that begins now)? Such a view
    holds the time of its pass and is built again next pass."""
    gang = view.gang
    if gang.degraded_since is not None:
        degraded = view.podgroup.parsed_status.condition(ConditionType.DEGRADED)
        if degraded is None or degraded.get("status") != "True":
            return True
    return _wait_begins_now(view.podgroup, list(view.members))


def settled(record: PodGroupRecord, members: Sequence[Pod], store: Store) -> bool:
    """A gang that is over: as many members as it needs, every one succeeded, no room held for it,
    and its PodGroup already says Finished. A pass has nothing to decide or write for it, and its
    pods hold no room; a new member (the Job retried or scaled) or a raised minMember brings it back."""
    return (
        record.parsed_status.phase is Phase.FINISHED
        and len(members) >= max(record.spec.min_member or 0, 1)
        and all(p.phase == "Succeeded" and not p.terminating for p in members)
        and store.hold_of(record.key) is None
    )


class ViewCache:
    """Gang views kept between passes. A view is a function of the records it was built from --
    the PodGroup, its members, this process's assumed admission and hold, the parent PodGroup, the
    namespace's default queue -- and of the store's tables every view reads (PriorityClasses,
    workload sizes, disruption budgets). Records are never changed in place (the store replaces
    them), so the identities of those inputs tell whether a view can be reused; a view that read
    the clock is never reused. A steady cluster of many running gangs then costs a pass little more
    than the gangs that changed."""

    def __init__(self) -> None:
        self._views: dict[GangKey, tuple[tuple[object, ...], GangView]] = {}
        self.hits = 0
        self.misses = 0

    @staticmethod
    def tables(store: Store) -> tuple[object, ...]:
        """What every view reads from the store's shared tables, by identity (once per pass)."""
        return (
            tuple(map(id, store.priority_classes.values())),
            tuple(store.priority_classes),
            tuple(map(id, store.workload_sizes.values())),
            tuple(store.workload_sizes),
            tuple(map(id, store.budgets.values())),
        )

    @staticmethod
    def inputs(
        record: PodGroupRecord, members: Sequence[Pod], store: Store, budgeted: Mapping[str, Pod]
    ) -> tuple[object, ...]:
        parent = record.spec.parent_pod_group
        return (
            id(record),
            tuple(id(p) for p in members),
            tuple(b.disruption_budget for p in members if (b := budgeted.get(p.uid)) is not None),
            id(store.assumed_admission(record.key)),
            id(store.hold_of(record.key)),
            id(store.podgroup(GangKey(record.namespace, parent))) if parent else None,
            store.queues.namespace_queue.get(record.namespace),
        )

    def view(
        self,
        record: PodGroupRecord,
        members: Sequence[Pod],
        store: Store,
        now: float,
        budgeted: Mapping[str, Pod],
        tables: tuple[object, ...],
    ) -> GangView:
        key = (tables, *self.inputs(record, members, store, budgeted))
        found = self._views.get(record.key)
        if found is not None and found[0] == key:
            self.hits += 1
            return found[1]
        self.misses += 1
        built = view(record, store, now, budgeted)
        if _clock_bound(built):
            self._views.pop(record.key, None)
        else:
            self._views[record.key] = (key, built)
        return built

    def keep_only(self, keys: Iterable[GangKey]) -> None:
        """Forget the views of gangs a pass no longer holds."""
        kept = set(keys)
        for key in [k for k in self._views if k not in kept]:
            del self._views[key]


def snapshot(
    store: Store, now: float, skip_settled: bool = False, cache: ViewCache | None = None
) -> tuple[Snapshot, dict[GangKey, GangView]]:
    """The core's input and a view of each gang. ``skip_settled`` (the reconciler's passes) leaves
    finished gangs out: completed Jobs linger until deleted, and every pass would otherwise rebuild
    their views and statuses. ``cache`` reuses the views of gangs whose records did not change."""
    # Pods a PodDisruptionBudget selects carry its name, in the pod list and in their gang alike.
    budgeted: dict[str, Pod] = {}
    if store.budgets:
        for pod in store.pods.values():
            budget = next((f"{b.namespace}/{b.name}" for b in store.budgets.values() if b.selects(pod)), None)
            if budget is not None:
                budgeted[pod.uid] = _with_budget(pod, budget)
    views = {}
    tables: tuple[object, ...] | None = None
    for key in sorted(store.gang_keys(), key=lambda k: (k.namespace, k.name)):
        record = store.podgroup(key)
        if record is None or key.namespace in store.terminating_namespaces:
            continue
        # Phalanx manages gangs in opted-in namespaces, gangs of workloads opted in by their own
        # label (their pods carry it), and any gang it gated (a namespace that opted out later must
        # not strand its gated pods). Other PodGroups are not its business.
        members = store.members(key)
        if skip_settled and settled(record, members, store):
            continue
        if key.namespace in store.opted_in or any(p.gated or opted_in(p.labels) for p in members):
            try:
                if cache is None:
                    views[key] = view(record, store, now, budgeted)
                else:
                    tables = tables if tables is not None else cache.tables(store)
                    views[key] = cache.view(record, members, store, now, budgeted, tables)
            except Exception:  # one gang's unforeseen input must not stop every gang's pass
                log.exception("gang left out of the pass", extra={"gang": str(key)})
    if cache is not None:
        cache.keep_only(views)
    pods = (budgeted.get(uid, pod) for uid, pod in store.pods.items())
    snap = Snapshot(
        nodes=tuple(sorted(store.nodes.values(), key=lambda n: n.name)),
        pods=tuple(sorted(pods, key=lambda p: p.uid)),
        gangs=tuple(v.gang for v in views.values()),
        now=now,
        opted_in_namespaces=frozenset(store.opted_in),
        disruptions_allowed={k: b.disruptions_allowed for k, b in store.budgets.items()},
        queues=store.queues.queues(),
        grants=store.queues.grants(),
        devices=store.dra_world(),
    )
    return snap, views


def _queue(record: PodGroupRecord, members: list[Pod], store: Store) -> str | None:
    """The gang's queue (controller/api/queue_records.py says where it comes from)."""
    parent_queue = None
    parent_name = record.spec.parent_pod_group
    if parent_name:
        parent = store.podgroup(GangKey(record.namespace, parent_name))
        if parent is not None:
            parent_queue = queue_records.gang_queue(parent.spec.queue, parent.labels, (), None)
    default = store.queues.namespace_queue.get(record.namespace)
    return queue_records.gang_queue(record.spec.queue, record.labels, members, default, parent_queue)


def _with_budget(pod: Pod, budget: str) -> Pod:
    return replace(pod, disruption_budget=budget)
