"""The controller's in-memory view of the cluster, fed by informers.

It holds slim records, not raw objects, indexes pods by gang, and tells the reconciler which gangs
a change touched (``None`` means "capacity changed: replan everything"). It also holds what the
controller *assumes* before the informers confirm it: admissions it has just recorded, so the next
planning pass cannot give the same room away twice (docs/design.md, "Record before acting").
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from controller.api import admission_record, dra_records, records, resources
from controller.api.admission_record import AdmissionRecord
from controller.api.dra_records import SliceRecord
from controller.api.queue_records import QueueRegistry
from controller.api.records import (
    DisruptionBudget,
    PodGroupRecord,
    PriorityClass,
    WorkloadApiRecord,
    WorkloadSize,
    budget_key_of,
    gang_key_of,
)
from controller.api.resources import PODGROUP_TYPES, ResourceType
from controller.core import Claim, ClaimSpec, DeviceClass, DraWorld, GangKey, GroupClaim, Node, Pod
from shared import constants, grouplink, native
from shared.jsonread import JsonObject, metadata_of, name_of, namespace_of, obj, uid_of
from shared.native import NativePodGroup

log = logging.getLogger(__name__)

ChangeListener = Callable[[GangKey | None], None]


@dataclass(frozen=True, slots=True)
class Hold:
    """Room held for a preemptor while its victims terminate: pod uid -> node, since ``at``."""

    placement: dict[str, str | None]
    at: float


@dataclass
class Store:
    # Told which gang a change touched (None: every gang); see ``subscribe``.
    _listeners: list[ChangeListener] = field(default_factory=list)
    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    pods_by_gang: dict[GangKey, set[str]] = field(default_factory=lambda: defaultdict(set))
    invalid_pods: dict[str, tuple[GangKey | None, str]] = field(default_factory=dict)
    podgroups: dict[ResourceType, dict[GangKey, PodGroupRecord]] = field(
        default_factory=lambda: {rt: {} for rt in PODGROUP_TYPES}
    )
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    opted_in: set[str] = field(default_factory=set)
    # Namespaces being deleted: their gangs are going away, so nothing is planned or reported.
    terminating_namespaces: set[str] = field(default_factory=set)
    budgets: dict[str, DisruptionBudget] = field(default_factory=dict)
    # Native Workload API objects by (namespace, name): each podGroup's minCount.
    workload_api: dict[tuple[str, str], WorkloadApiRecord] = field(default_factory=dict)
    # Native PodGroups (1.36+) by (namespace, name): the policy of the gang their pods name.
    native_podgroups: dict[tuple[str, str], NativePodGroup] = field(default_factory=dict)
    # The version they are read at (the newest the API server serves): what owner references name.
    native_podgroup_api_version: str = resources.NATIVE_PODGROUPS.api_version
    # The gang size of each workload's spec now, by (kind, namespace, name): a gang follows it.
    workload_sizes: dict[tuple[str, str, str], WorkloadSize] = field(default_factory=dict)
    # What a gang's declared size is read from changes: its own records (a stamp per gang, from
    # one counter that never repeats) or the objects that size gangs (one stamp for them all).
    _change_seq: int = 0
    _gang_stamps: dict[GangKey, int] = field(default_factory=dict)
    _sizes_stamp: int = 0
    # Admissions recorded by this process that the informers may not have delivered yet.
    _assumed: dict[GangKey, AdmissionRecord] = field(default_factory=dict)
    # Room held for a preemptor while its victims terminate.
    _holds: dict[GangKey, Hold] = field(default_factory=dict)
    # Pods whose gate this process removed (the PATCH succeeded) that the informer still shows gated.
    _lifted: set[str] = field(default_factory=set)
    # The admission of a PodGroup deleted while its gang lived: a PodGroup made again carries it.
    deleted_admissions: dict[GangKey, AdmissionRecord] = field(default_factory=dict)
    # DRA objects by kind (str(ResourceType)) and (namespace, name): what the planner counts as devices.
    dra: dict[str, dict[tuple[str, str], object]] = field(default_factory=dict)
    _dra_world: DraWorld | None = None
    # (namespace, native PodGroup) -> its spec.resourceClaims (DRAWorkloadResourceClaims), if any.
    group_claims: dict[tuple[str, str], tuple[GroupClaim, ...]] = field(default_factory=dict)
    # Queues and namespace default queues (fed by controller/api/queue_feed.py).
    queues: QueueRegistry = field(default_factory=QueueRegistry)

    # ---- notifications ---------------------------------------------------------------------------
    def subscribe(self, listener: ChangeListener) -> None:
        """Call ``listener`` with the gang each change touches (None: every gang may have moved)."""
        self._listeners.append(listener)

    def _changed(self, key: GangKey | None) -> None:
        if key is not None:
            self._change_seq += 1
            self._gang_stamps[key] = self._change_seq
            if len(self._gang_stamps) > 2 * len(self.pods_by_gang) + 1024:  # gangs that are gone
                live = self.gang_keys()
                self._gang_stamps = {k: v for k, v in self._gang_stamps.items() if k in live}
        for listener in self._listeners:
            listener(key)

    # ---- queries ---------------------------------------------------------------------------------
    def podgroup_records(self, key: GangKey) -> list[PodGroupRecord]:
        """Every served kind's PodGroup of this name, primary group first."""
        return [record for rt in PODGROUP_TYPES if (record := self.podgroups[rt].get(key)) is not None]

    def podgroup(self, key: GangKey) -> PodGroupRecord | None:
        """The gang's PodGroup. A user's wins over one Phalanx made (which is then retired); among
        several of the user's, the primary group wins."""
        records = self.podgroup_records(key)
        return next((r for r in records if not r.managed), records[0] if records else None)

    def filling(self, key: GangKey) -> bool:
        """Fewer pods than its PodGroup's minMember exist (a Job still creating them): nothing
        about the gang can be decided until more come."""
        record = self.podgroup(key)
        wanted = record.spec.min_member if record is not None else None
        return wanted is not None and len(self.pods_by_gang.get(key, ())) < wanted

    def size_inputs(self, key: GangKey) -> tuple[int, int]:
        """Changes whenever anything a gang's declared size is read from may have changed: its
        members and PodGroups, Workloads, native PodGroups, workload specs."""
        return self._gang_stamps.get(key, 0), self._sizes_stamp

    def _sizes_changed(self) -> None:
        self._change_seq += 1
        self._sizes_stamp = self._change_seq

    def podgroup_uid(self, key: GangKey) -> str | None:
        record = self.podgroup(key)
        return record.uid if record is not None else None

    # ---- what this process wrote and the informers have not delivered yet -------------------------
    # Cached records are never changed in place: an assumption replaces the cached record, so a
    # view built from the old one stays as it was.

    def admission(self, record: PodGroupRecord) -> AdmissionRecord | None:
        """The gang's admission: what its PodGroup says plus what this process has just written."""
        written = admission_record.decode(record.annotations)
        assumed = self._assumed.get(record.key)
        if assumed is None:
            return written
        return assumed if written is None else written.union(assumed)

    def assumed_admission(self, key: GangKey) -> AdmissionRecord | None:
        return self._assumed.get(key)

    def assume_admission(self, key: GangKey, record: AdmissionRecord) -> None:
        """Recorded on the PodGroup by this process: no pass may give the room away again."""
        self._assumed[key] = record

    def forget_admission(self, key: GangKey) -> None:
        """The write failed (or was undone): the room is free again."""
        self._assumed.pop(key, None)

    def assume_admission_cleared(self, key: GangKey) -> None:
        """The admission was removed from the PodGroup: show none until the informer catches up."""
        self._assumed.pop(key, None)
        for rt in PODGROUP_TYPES:
            record = self.podgroups[rt].get(key)
            if record is not None and constants.ADMISSION_ANNOTATION in record.annotations:
                annotations = {
                    k: v for k, v in record.annotations.items() if k != constants.ADMISSION_ANNOTATION
                }
                self.podgroups[rt][key] = replace(record, annotations=annotations)

    def assume_status(self, record: PodGroupRecord, written: Mapping[str, Any]) -> None:
        """A status merge patch this process wrote: no identical rewrite before the informer catches up
        (``None`` values remove keys, as in the patch)."""
        current = self.podgroups[record.rt].get(record.key)
        if current is None or current.uid != record.uid:
            return
        status = {k: v for k, v in {**current.status, **written}.items() if v is not None}
        self.podgroups[record.rt][record.key] = replace(current, status=status)

    def assume_lifted(self, uid: str) -> None:
        """This process removed the pod's gate. A gate never comes back, so the pod shows ungated
        from now on: a pass that runs before the informer delivers the change must not lift it again
        (under a 512-pod lift, a third of the members were otherwise patched twice)."""
        pod = self.pods.get(uid)
        if pod is None:
            return
        if pod.gated:
            self._lifted.add(uid)
            self.pods[uid] = replace(pod, gated=False)

    # ---- room held for preemptors --------------------------------------------------------------
    def hold(self, key: GangKey, placement: Mapping[str, str | None], at: float) -> None:
        self._holds[key] = Hold(dict(placement), at)

    def hold_of(self, key: GangKey) -> Hold | None:
        return self._holds.get(key)

    def release_holds(self, stale: Callable[[GangKey, Hold], bool]) -> None:
        for key in [k for k, hold in self._holds.items() if stale(k, hold)]:
            del self._holds[key]

    def members(self, key: GangKey) -> list[Pod]:
        return [self.pods[uid] for uid in sorted(self.pods_by_gang.get(key, ())) if uid in self.pods]

    def gang_keys(self) -> set[GangKey]:
        keys = {k for k, uids in self.pods_by_gang.items() if uids}
        for by_key in self.podgroups.values():
            keys.update(by_key)
        return keys

    # ---- pods ------------------------------------------------------------------------------------
    def _unindex(self, key: GangKey, uid: str) -> None:
        members = self.pods_by_gang.get(key)
        if members is not None:
            members.discard(uid)
            if not members:  # gangs come and go: keep no empty entries
                del self.pods_by_gang[key]
                self.deleted_admissions.pop(key, None)

    def _index_pod(self, pod: Pod) -> GangKey | None:
        old = self.pods.get(pod.uid)
        if old is not None and old.group and old.group != pod.group:
            self._unindex(GangKey(old.namespace, old.group), pod.uid)
        self.pods[pod.uid] = pod
        if pod.group:
            key = GangKey(pod.namespace, pod.group)
            self.pods_by_gang[key].add(pod.uid)
            return key
        return None

    def upsert_pod(self, raw: JsonObject) -> None:
        try:
            pod = records.pod_record(raw)
        except records.InvalidPod as err:
            meta = metadata_of(raw)
            pod_link = grouplink.resolve(meta.get("labels"), meta.get("annotations"), obj(raw.get("spec")))
            key = GangKey(namespace_of(raw), pod_link.name) if pod_link else None
            self.invalid_pods[uid_of(raw)] = (key, str(err))
            self._changed(key)
            return
        self.invalid_pods.pop(pod.uid, None)
        if pod.uid in self._lifted:
            if pod.gated:  # written before the lift this process already made
                pod = replace(pod, gated=False)
            else:
                self._lifted.discard(pod.uid)
        old = self.pods.get(pod.uid)
        key = self._index_pod(pod)
        if key is not None:
            self._changed(key)
        # Capacity moved (a pod bound, finished or went away): every waiting gang may fit now. A
        # new pod that holds nothing (a gated member) moves no capacity.
        if (
            pod.holds_capacity
            if old is None
            else old.holds_capacity != pod.holds_capacity or old.node_name != pod.node_name
        ):
            self._changed(None)

    def delete_pod(self, raw: JsonObject) -> None:
        uid = uid_of(raw)
        self.invalid_pods.pop(uid, None)
        self._lifted.discard(uid)
        pod = self.pods.pop(uid, None)
        if pod is None:
            return
        if pod.group:
            key = GangKey(pod.namespace, pod.group)
            self._unindex(key, uid)
            self._changed(key)
        self._changed(None)

    def replace_pods(self, items: list[JsonObject]) -> None:
        seen = set()
        for raw in items:
            seen.add(uid_of(raw))
            self.upsert_pod(raw)
        for uid in list(self.pods):
            if uid not in seen:
                self.delete_pod({"metadata": {"uid": uid}})
        self._changed(None)

    # ---- nodes -----------------------------------------------------------------------------------
    # ---- DRA ------------------------------------------------------------------------------------
    _DRA_READERS: ClassVar[dict[str, Callable[[JsonObject], object]]] = {
        str(resources.DEVICE_CLASSES): dra_records.class_record,
        str(resources.RESOURCE_SLICES): dra_records.slice_record,
        str(resources.RESOURCE_CLAIMS): dra_records.claim_record,
        str(resources.RESOURCE_CLAIM_TEMPLATES): dra_records.template_record,
    }

    def upsert_dra(self, kind: str, raw: JsonObject) -> None:
        record = self._DRA_READERS[kind](raw)
        objects = self.dra.setdefault(kind, {})
        key = (namespace_of(raw), name_of(raw))
        if objects.get(key) != record:
            objects[key] = record
            self._dra_world = None
            self._changed(None)

    def delete_dra(self, kind: str, raw: JsonObject) -> None:
        if self.dra.setdefault(kind, {}).pop((namespace_of(raw), name_of(raw)), None) is not None:
            self._dra_world = None
            self._changed(None)

    def replace_dra(self, kind: str, items: list[JsonObject]) -> None:
        read = self._DRA_READERS[kind]
        self.dra[kind] = {(namespace_of(raw), name_of(raw)): read(raw) for raw in items}
        self._dra_world = None
        self._changed(None)

    def dra_world(self) -> DraWorld | None:
        """The devices, classes and claims a pass plans with (None: no DRA in the cluster)."""
        if self._dra_world is None and any(self.dra.values()):
            self._dra_world = _world(self.dra, self.group_claims)
        return self._dra_world

    def _group_claims_of(self, key: tuple[str, str], claims: tuple[GroupClaim, ...]) -> None:
        """Keep a native PodGroup's claims (only groups with any): they are part of the DRA world."""
        if self.group_claims.get(key, ()) == claims:
            return
        if claims:
            self.group_claims[key] = claims
        else:
            self.group_claims.pop(key, None)
        self._dra_world = None
        self._changed(None)

    def upsert_node(self, raw: JsonObject) -> None:
        node = records.node_record(raw)
        if self.nodes.get(node.name) != node:
            self.nodes[node.name] = node
            self._changed(None)

    def delete_node(self, raw: JsonObject) -> None:
        if self.nodes.pop(name_of(raw), None) is not None:
            self._changed(None)

    def replace_nodes(self, items: list[JsonObject]) -> None:
        self.nodes = {n.name: n for n in map(records.node_record, items)}
        self._changed(None)

    # ---- podgroups -------------------------------------------------------------------------------
    def upsert_podgroup(self, rt: ResourceType, raw: JsonObject) -> None:
        record = records.podgroup_record(rt, raw)
        self.podgroups[rt][record.key] = record
        self.deleted_admissions.pop(record.key, None)
        assumed = self._assumed.get(record.key)
        if assumed is not None:
            written = admission_record.decode(record.annotations)
            # Only a record holding every assumed member is our write coming back: an older event
            # (the informer lags behind our own patches) must not undo an admission.
            if written is not None and written.covers(assumed.placement):
                del self._assumed[record.key]
        self._changed(record.key)

    def delete_podgroup(self, rt: ResourceType, raw: JsonObject) -> None:
        key = gang_key_of(raw)
        record = self.podgroups[rt].pop(key, None)
        if record is None:
            return
        if not self.podgroup_records(key):
            admission = admission_record.decode(record.annotations)
            assumed = self._assumed.pop(key, None)
            if assumed is not None:
                admission = assumed if admission is None else admission.union(assumed)
            if admission is not None and self.pods_by_gang.get(key):
                self.deleted_admissions[key] = admission
        self._changed(key)
        self._changed(None)

    def replace_podgroups(self, rt: ResourceType, items: list[JsonObject]) -> None:
        # Every item read before anything changes: one that cannot be read leaves the store as it
        # was (the informer then lists again without it).
        listed = [records.podgroup_record(rt, raw) for raw in items]
        old = set(self.podgroups[rt])
        self.podgroups[rt] = {record.key: record for record in listed}
        for key in old - set(self.podgroups[rt]):
            self._assumed.pop(key, None)
        for key in old | set(self.podgroups[rt]):
            self._changed(key)
        self._changed(None)

    # ---- cluster-scoped settings -------------------------------------------------------------------
    def upsert_priority_class(self, raw: JsonObject) -> None:
        self.priority_classes[name_of(raw)] = records.priority_class_record(raw)
        self._changed(None)

    def delete_priority_class(self, raw: JsonObject) -> None:
        self.priority_classes.pop(name_of(raw), None)
        self._changed(None)

    def replace_priority_classes(self, items: list[JsonObject]) -> None:
        self.priority_classes = {name_of(raw): records.priority_class_record(raw) for raw in items}
        self._changed(None)

    def upsert_namespace(self, raw: JsonObject) -> None:
        namespace = records.namespace_record(raw)
        if namespace.terminating and namespace.name not in self.terminating_namespaces:
            self.terminating_namespaces.add(namespace.name)
            self._changed(None)
        if namespace.opted_in != (namespace.name in self.opted_in):
            if namespace.opted_in:
                self.opted_in.add(namespace.name)
            else:
                self.opted_in.discard(namespace.name)
            self._changed(None)

    def delete_namespace(self, raw: JsonObject) -> None:
        name = name_of(raw)
        self.opted_in.discard(name)
        self.terminating_namespaces.discard(name)

    def replace_namespaces(self, items: list[JsonObject]) -> None:
        for raw in items:  # every one readable before anything changes (see replace_podgroups)
            records.namespace_record(raw)
        self.opted_in = set()
        self.terminating_namespaces = set()
        for raw in items:
            self.upsert_namespace(raw)

    def upsert_budget(self, raw: JsonObject) -> None:
        budget = records.budget_record(raw)
        self.budgets[budget.key] = budget
        self._changed(None)

    def delete_budget(self, raw: JsonObject) -> None:
        self.budgets.pop(budget_key_of(raw), None)
        self._changed(None)

    def replace_budgets(self, items: list[JsonObject]) -> None:
        self.budgets = {budget.key: budget for budget in map(records.budget_record, items)}
        self._changed(None)

    # ---- the native Workload API -------------------------------------------------------------------
    def upsert_workload(self, raw: JsonObject) -> None:
        self._sizes_changed()
        workload = records.workload_api_record(raw)
        self.workload_api[workload.key] = workload
        # Its gangs are named per podGroup and replica key, which only the pods know: replan all.
        self._changed(None)

    def delete_workload(self, raw: JsonObject) -> None:
        self._sizes_changed()
        self.workload_api.pop((namespace_of(raw), name_of(raw)), None)

    def replace_workloads(self, items: list[JsonObject]) -> None:
        self._sizes_changed()
        self.workload_api = {w.key: w for w in map(records.workload_api_record, items)}
        self._changed(None)

    # ---- native PodGroups (scheduling.k8s.io, 1.36+) ---------------------------------------------------
    def upsert_native_podgroup(self, raw: JsonObject) -> None:
        group = native.native_podgroup(raw)
        self._group_claims_of(group.key, dra_records.group_claims(raw))
        if self.native_podgroups.get(group.key) != group:
            self._sizes_changed()
            self.native_podgroups[group.key] = group
            self._changed(GangKey(group.namespace, grouplink.native_group_name(group.name)))

    def delete_native_podgroup(self, raw: JsonObject) -> None:
        self._sizes_changed()
        # Its Phalanx PodGroup is garbage-collected with it (owned), and its pods too where owned.
        self._group_claims_of((namespace_of(raw), name_of(raw)), ())
        if self.native_podgroups.pop((namespace_of(raw), name_of(raw)), None) is not None:
            self._changed(GangKey(namespace_of(raw), grouplink.native_group_name(name_of(raw))))

    def replace_native_podgroups(self, items: list[JsonObject]) -> None:
        self._sizes_changed()
        old = set(self.native_podgroups)
        groups = {g.key: g for g in map(native.native_podgroup, items)}
        claims = {(namespace_of(raw), name_of(raw)): dra_records.group_claims(raw) for raw in items}
        self.native_podgroups = groups
        for key in set(self.group_claims) | set(claims):
            self._group_claims_of(key, claims.get(key, ()))
        for namespace, name in old | set(self.native_podgroups):
            self._changed(GangKey(namespace, grouplink.native_group_name(name)))

    # ---- workloads that size their gang (Job, StatefulSet, the operators' kinds) --------------------
    def upsert_workload_size(self, rt: ResourceType, raw: JsonObject) -> None:
        workload = records.workload_size_record(rt, raw)
        if workload is not None and self.workload_sizes.get(workload.key) != workload:
            self._sizes_changed()
            self.workload_sizes[workload.key] = workload
            self._changed(None)  # scaled (rare): its gang, whatever its name, follows

    def delete_workload_size(self, rt: ResourceType, raw: JsonObject) -> None:
        self._sizes_changed()
        # Its pods go with it (garbage collection); nothing to re-plan for the size alone.
        self.workload_sizes.pop((rt.kind, namespace_of(raw), name_of(raw)), None)

    def replace_workload_sizes(self, rt: ResourceType, items: list[JsonObject]) -> None:
        self._sizes_changed()
        kept = {key: size for key, size in self.workload_sizes.items() if key[0] != rt.kind}
        listed = [w for raw in items if (w := records.workload_size_record(rt, raw)) is not None]
        self.workload_sizes = kept | {workload.key: workload for workload in listed}
        self._changed(None)

    # ---- queues (controller/api/queue_feed.py feeds these) ---------------------------------------
    # A queue's quota or a namespace's grant moves every gang's order: a change replans them all.

    def upsert_queue(self, rt: ResourceType, raw: JsonObject) -> None:
        self._queues_changed(self.queues.upsert(rt, raw))

    def delete_queue(self, rt: ResourceType, raw: JsonObject) -> None:
        self._queues_changed(self.queues.delete(rt, raw))

    def replace_queues(self, rt: ResourceType, items: list[JsonObject]) -> None:
        self._queues_changed(self.queues.replace(rt, items))

    def upsert_namespace_queues(self, raw: JsonObject) -> None:
        self._queues_changed(self.queues.upsert_namespace(raw))

    def delete_namespace_queues(self, raw: JsonObject) -> None:
        self._queues_changed(self.queues.delete_namespace(raw))

    def replace_namespace_queues(self, items: list[JsonObject]) -> None:
        self._queues_changed(self.queues.replace_namespaces(items))

    def _queues_changed(self, changed: bool) -> None:
        if changed:
            self._changed(None)


class StoreSink:
    """Adapts one resource type's informer to the Store's methods."""

    def __init__(
        self,
        upsert: Callable[[JsonObject], None],
        delete: Callable[[JsonObject], None],
        replace: Callable[[list[JsonObject]], None],
    ) -> None:
        self.upsert = upsert
        self.delete = delete
        self.replace = replace


def _world(
    dra: Mapping[str, Mapping[tuple[str, str], object]],
    group_claims: Mapping[tuple[str, str], tuple[GroupClaim, ...]],
) -> DraWorld:
    """Only complete pools at their newest generation count (a driver replacing its slices)."""
    slices = [s for s in dra.get(str(resources.RESOURCE_SLICES), {}).values() if isinstance(s, SliceRecord)]
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        newest[(s.driver, s.pool)] = max(newest.get((s.driver, s.pool), s.generation), s.generation)
    current = [s for s in slices if s.generation == newest[(s.driver, s.pool)]]
    seen: dict[tuple[str, str], int] = defaultdict(int)
    for s in current:
        seen[(s.driver, s.pool)] += 1
    devices = tuple(d for s in current if seen[(s.driver, s.pool)] >= s.slice_count for d in s.devices)
    classes = {
        c.name: c for c in dra.get(str(resources.DEVICE_CLASSES), {}).values() if isinstance(c, DeviceClass)
    }
    claims = {k: c for k, c in dra.get(str(resources.RESOURCE_CLAIMS), {}).items() if isinstance(c, Claim)}
    templates = {
        k: t
        for k, t in dra.get(str(resources.RESOURCE_CLAIM_TEMPLATES), {}).items()
        if isinstance(t, ClaimSpec)
    }
    return DraWorld(devices, classes, claims, templates, dict(group_claims))


def sinks_for(store: Store, podgroup_types: Iterable[ResourceType]) -> dict[str, StoreSink]:
    sinks = {
        str(resources.NODES): StoreSink(store.upsert_node, store.delete_node, store.replace_nodes),
        str(resources.PODS): StoreSink(store.upsert_pod, store.delete_pod, store.replace_pods),
        str(resources.NAMESPACES): StoreSink(
            store.upsert_namespace, store.delete_namespace, store.replace_namespaces
        ),
        str(resources.PRIORITY_CLASSES): StoreSink(
            store.upsert_priority_class, store.delete_priority_class, store.replace_priority_classes
        ),
        str(resources.PDBS): StoreSink(store.upsert_budget, store.delete_budget, store.replace_budgets),
        # Every version of a native kind has the same key (plural.group): one is watched at a time.
        str(resources.WORKLOADS): StoreSink(
            store.upsert_workload, store.delete_workload, store.replace_workloads
        ),
        str(resources.NATIVE_PODGROUPS): StoreSink(
            store.upsert_native_podgroup, store.delete_native_podgroup, store.replace_native_podgroups
        ),
    }
    for rt in resources.SIZED_WORKLOAD_TYPES:
        sinks[str(rt)] = StoreSink(
            lambda raw, rt=rt: store.upsert_workload_size(rt, raw),  # type: ignore[misc]
            lambda raw, rt=rt: store.delete_workload_size(rt, raw),  # type: ignore[misc]
            lambda items, rt=rt: store.replace_workload_sizes(rt, items),  # type: ignore[misc]
        )
    for rt in resources.DRA_TYPES:
        sinks[str(rt)] = StoreSink(
            lambda raw, kind=str(rt): store.upsert_dra(kind, raw),  # type: ignore[misc]
            lambda raw, kind=str(rt): store.delete_dra(kind, raw),  # type: ignore[misc]
            lambda items, kind=str(rt): store.replace_dra(kind, items),  # type: ignore[misc]
        )
    for rt in podgroup_types:
        sinks[str(rt)] = StoreSink(
            lambda raw, rt=rt: store.upsert_podgroup(rt, raw),  # type: ignore[misc]
            lambda raw, rt=rt: store.delete_podgroup(rt, raw),  # type: ignore[misc]
            lambda items, rt=rt: store.replace_podgroups(rt, items),  # type: ignore[misc]
        )
    return sinks
