"""Keep one PodGroup per gang: create it when its size is known, correct it, retire a shadow.

A gang's size is what its user declared, never a guess: the native Workload's ``minCount``, the
``phalanx.io/min-member`` override, the Coscheduling ``min-available`` label, or -- for workloads
the webhook sized from their spec and named after themselves -- that inferred size. Pods that name
a Workload or a PodGroup that does not exist yet wait for it, gated, with an Event saying so: a
PodGroup of 1 would let them start one by one.

A PodGroup Phalanx made is owned by the members' workload (garbage-collected with it) and carries
``app.kubernetes.io/managed-by: phalanx``. It follows its source (a Workload applied or changed
later) until someone else edits its spec, and it steps aside for a PodGroup of another served kind
that a user applies for the same gang later, handing over its admission record first. One deleted
while its members live is made again, with the admission record it carried.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from controller.api import workload_owners
from controller.api.kube import ApiError, Kube
from controller.api.records import PodGroupRecord
from controller.api.resources import NATIVE_PODGROUPS, PODGROUPS, WORKLOADS
from controller.api.store import Store
from controller.core import GangKey, Pod
from controller.core import messages as msg
from controller.pipeline.gangs import inferred_min_member, member_annotation, spec_sizes
from shared import constants, grouplink
from shared.jsonread import positive_number
from shared.native import NativePodGroup
from shared.podgroup import PodGroupSpec

log = logging.getLogger(__name__)
# On PodGroups Phalanx made: where their minMember came from.
MIN_MEMBER_SOURCE = "phalanx.io/min-member-source"
# kubectl writes this on every object it applies: its presence means a user applied the spec.
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
WORKLOAD_API_VERSION = WORKLOADS.api_version
NATIVE_GROUP = NATIVE_PODGROUPS.group
# The source of a size read from the workload's spec: it follows the workload when that is scaled.
WORKLOAD_SPEC = msg.size_source_workload_spec()


@dataclass(frozen=True, slots=True)
class Sizing:
    """The gang size its members declare, or what they wait for before it can be known."""

    min_member: int | None
    source: str  # where min_member came from, or what is missing
    owner: dict[str, Any] | None = None
    workload: tuple[str, str] | None = None  # (name, podGroup) of a Workload the members name
    native: str | None = None  # the native PodGroup the members name (spec.schedulingGroup)
    # Members beyond min_member that may join (elastic), counted with it; None: no bound.
    max_member: int | None = None

    @property
    def known(self) -> bool:
        return self.min_member is not None


def _foreign_link(pod: Pod) -> str | None:
    """The link form a user wrote to name a group (not the label the webhook writes), if any."""
    for key in constants.GROUP_LINK_LABELS:
        if key != constants.POD_GROUP_LABEL and pod.labels.get(key):
            return msg.link_label(key)
    for key in constants.GROUP_LINK_ANNOTATIONS:
        if pod.annotations.get(key):
            return msg.link_annotation(key)
    return None


def _owner_of(members: list[Pod]) -> dict[str, Any] | None:
    first = next((p for p in sorted(members, key=lambda p: p.name) if p.owner is not None), None)
    if first is None or first.owner is None:
        return None
    o = first.owner
    return {"apiVersion": o.api_version, "kind": o.kind, "name": o.name, "uid": o.uid}


def declared_size(key: GangKey, members: list[Pod], store: Store) -> Sizing:
    """What the members say the gang's size is, in the precedence docs/user-guide.md documents
    ("The gang's size")."""
    native = next((p.scheduling_group for p in members if p.scheduling_group), None)
    if native is not None:
        return native_size(key, native, store)
    for pod in members:
        if pod.workload is None:
            continue
        workload, group = pod.workload
        record = store.workload_api.get((key.namespace, workload))
        min_count = record.min_counts.get(group) if record is not None else None
        if record is None or min_count is None:
            return Sizing(
                None, msg.size_source_workload(key.namespace, workload, group), workload=pod.workload
            )
        owner = (
            {
                "apiVersion": WORKLOAD_API_VERSION,
                "kind": WORKLOADS.kind,
                "name": workload,
                "uid": record.uid,
            }
            if record.uid
            else None
        )
        return Sizing(min_count, msg.size_source_min_count(workload), owner, pod.workload)
    owner = _owner_of(members)
    explicit = [
        m
        for p in members
        if (m := grouplink.positive_int(p.annotations.get(constants.MIN_MEMBER_ANNOTATION)))
    ]
    explicit += [m for p in members if (m := grouplink.declared_min_available(p.labels))]
    if explicit:
        return Sizing(max(explicit), msg.size_source_declared(), owner)
    link = next((found for p in members if (found := _foreign_link(p))), None)
    if link is not None:
        # The user named a group by its own link: its size is in that PodGroup, not in one Job.
        return Sizing(None, msg.size_source_podgroup(key.namespace, key.name, link))
    live = spec_sizes(members, store.workload_sizes)
    if live is not None:
        # The workload's spec as it is now, with its bound: members beyond it (a scale-up seen
        # before the workload's own update) wait instead of joining one by one.
        return Sizing(live[0], WORKLOAD_SPEC, owner, max_member=live[1])
    inferred = inferred_min_member(members)  # the workload is not watched (yet): as written then
    if inferred:
        return Sizing(inferred, WORKLOAD_SPEC, owner)
    return Sizing(
        None, msg.size_source_podgroup(key.namespace, key.name, msg.link_label(constants.POD_GROUP_LABEL))
    )


def native_size(key: GangKey, name: str, store: Store) -> Sizing:
    """The size of a native PodGroup's gang (1.36+): its gang policy's minCount; the basic policy
    is no gang, so its pods are admitted one by one (a gang of 1)."""
    group = store.native_podgroups.get((key.namespace, name))
    if group is None:
        return Sizing(None, msg.size_source_native(key.namespace, name, NATIVE_GROUP), native=name)
    owner = {
        "apiVersion": store.native_podgroup_api_version,
        "kind": NATIVE_PODGROUPS.kind,
        "name": name,
        "uid": group.uid,
    }
    if group.min_count is None:
        return Sizing(1, msg.size_source_native_basic(name), owner, native=name)
    return Sizing(group.min_count, msg.size_source_native_min_count(name), owner, native=name)


def waiting_message(sizing: Sizing) -> str:
    if sizing.native is not None:
        return msg.waiting_for_native_podgroup(sizing.source)
    return msg.waiting_for_size(sizing.source, sizing.workload is not None, constants.MIN_MEMBER_ANNOTATION)


class PodGroupFactory:
    def __init__(self, kube: Kube, store: Store) -> None:
        self.kube = kube
        self.store = store
        # Each gang's PodGroup record and size inputs when it last followed its source: while both
        # are the same, following again would find nothing to change.
        self._followed: dict[GangKey, tuple[PodGroupRecord, tuple[int, int, bool]]] = {}

    def retain(self, keys: set[GangKey]) -> None:
        """Forget what gangs other than ``keys`` (every gang there is) followed."""
        self._followed = {k: v for k, v in self._followed.items() if k in keys}

    def manifest(self, key: GangKey, sizing: Sizing) -> dict[str, Any]:
        members = [p for p in self.store.members(key) if not p.terminating]
        assert sizing.min_member is not None
        timeout = member_annotation(members, constants.SCHEDULE_TIMEOUT_ANNOTATION)
        workload = (
            self.store.workload_api.get((key.namespace, sizing.workload[0])) if sizing.workload else None
        )
        if workload is not None and workload.timeout_seconds is not None:
            timeout = str(workload.timeout_seconds)
        group = self.store.native_podgroups.get((key.namespace, sizing.native)) if sizing.native else None
        if group is not None:
            timeout = self._native_timeout(group) or timeout
        spec = PodGroupSpec(
            min_member=sizing.min_member,
            schedule_timeout_seconds=positive_number(timeout),
            # Resolved through its PriorityClass like any PodGroup's; a raw priority is not copied.
            priority_class_name=group.priority_class_name if group is not None else None,
            # A child of a CompositePodGroup starts with its siblings (Phalanx's hierarchical gangs).
            parent_pod_group=grouplink.native_group_name(group.parent) if group and group.parent else None,
            # A native PodGroup's own constraint; members asking otherwise conflict (gangs.py).
            topology_required=(group.topology_key if group else None)
            or member_annotation(members, constants.TOPOLOGY_REQUIRED_ANNOTATION),
            disruption_mode=group.disruption_mode if group is not None else None,
        ).to_json()
        annotations = {MIN_MEMBER_SOURCE: sizing.source}
        # Made again after a deletion: the members admitted under the old one stay admitted.
        previous = self.store.deleted_admissions.get(key)
        if previous is not None:
            annotations[constants.ADMISSION_ANNOTATION] = previous.encode()
        metadata: dict[str, Any] = {
            "name": key.name,
            "namespace": key.namespace,
            "labels": {constants.MANAGED_BY_LABEL: constants.MANAGED_BY_PHALANX},
            "annotations": annotations,
        }
        if sizing.owner is not None:
            metadata["ownerReferences"] = [{**sizing.owner, "controller": False, "blockOwnerDeletion": False}]
        return {
            "apiVersion": PODGROUPS.api_version,
            "kind": PODGROUPS.kind,
            "metadata": metadata,
            "spec": spec,
        }

    def _native_timeout(self, group: NativePodGroup) -> str | None:
        """Phalanx's timeout annotation on the native PodGroup, else on the Workload it was made from."""
        if group.timeout_seconds is not None:
            return str(group.timeout_seconds)
        workload = self.store.workload_api.get((group.namespace, group.workload)) if group.workload else None
        return str(workload.timeout_seconds) if workload and workload.timeout_seconds else None

    def sizing(self, key: GangKey) -> Sizing | None:
        """The size of a gang that has no PodGroup and needs one (None: it needs none now)."""
        members = [p for p in self.store.members(key) if not p.terminating]
        live = [p for p in members if not p.finished]
        if not any(p.gated for p in live) and not (live and key in self.store.deleted_admissions):
            return None
        return declared_size(key, members, self.store)

    def planned(self, key: GangKey) -> dict[str, Any] | None:
        """The PodGroup ``ensure`` would create for a gang that has none now, if any."""
        sizing = self.sizing(key) if not self.store.podgroup_records(key) else None
        return self.manifest(key, sizing) if sizing is not None and sizing.known else None

    async def ensure(self, key: GangKey) -> Sizing | None:
        """Bring the gang's PodGroup in line. Returns the sizing its members wait for, if they wait."""
        if key.namespace in self.store.terminating_namespaces:
            return None  # the API server refuses new objects there, and the gang is going away
        records = self.store.podgroup_records(key)
        if len(records) > 1:
            await self._retire_shadow(records)
            return None
        if records:
            record = records[0]
            inputs = (*self.store.size_inputs(key), self.store.assumed_admission(key) is not None)
            last = self._followed.get(key)
            if last is None or last[0] is not record or last[1] != inputs:
                await self._follow_source(key, record)
                self._followed[key] = (record, inputs)
            return None
        sizing = self.sizing(key)
        if sizing is None or not sizing.known:
            return sizing
        body = self.manifest(key, sizing)
        # Owned by the object the user applied (JobSet, not its Jobs), where an operator made the pods.
        if (
            top := await workload_owners.top_owner(self.kube, key.namespace, self.store.members(key))
        ) is not None:
            body["metadata"]["ownerReferences"] = [{**top, "controller": False, "blockOwnerDeletion": False}]
        try:
            created = await self.kube.create(PODGROUPS, key.namespace, body)
        except ApiError as err:
            if err.conflict:
                return None  # someone else created it; the informer will deliver it
            raise
        log.info("created podgroup", extra={"gang": str(key), "minMember": body["spec"]["minMember"]})
        self.store.upsert_podgroup(PODGROUPS, created)
        return None

    async def _follow_source(self, key: GangKey, record: PodGroupRecord) -> None:
        """A PodGroup Phalanx made follows its source until a user applies over it; once admitted, only
        a workload's spec (scaled) still moves it."""
        if not record.managed or LAST_APPLIED in record.annotations:
            return
        sizing = declared_size(key, self.store.members(key), self.store)
        if not sizing.known:
            return
        spec: dict[str, Any] = {}
        if sizing.min_member != record.spec.min_member:
            spec["minMember"] = sizing.min_member
        from_workload = sizing.source == WORKLOAD_SPEC
        if from_workload and sizing.max_member != record.spec.max_member:
            spec["maxMember"] = sizing.max_member  # None removes it: no bound
        if not spec:
            return
        admitted = constants.ADMISSION_ANNOTATION in record.annotations or self.store.assumed_admission(key)
        if admitted and not from_workload:
            # An admitted gang keeps the size it was admitted with -- unless its workload was scaled:
            # then the members it is short of start together, and those beyond its bound wait.
            return
        patch = {"metadata": {"annotations": {MIN_MEMBER_SOURCE: sizing.source}}, "spec": spec}
        patched = await self.kube.patch(record.rt, key.namespace, key.name, patch)
        # This pass plans with the new size already: members a scale-up added must not slip in one
        # by one under the old one before the informer delivers the change.
        self.store.upsert_podgroup(record.rt, patched)
        log.info("podgroup follows its source", extra={"gang": str(key), **spec})

    async def _retire_shadow(self, records: list[PodGroupRecord]) -> None:
        """A user's PodGroup of another kind arrived for a gang Phalanx had made one for: the user's
        wins. The admission record moves over first, so no admitted member loses its admission."""
        users = [r for r in records if not r.managed]
        if not users:
            return
        winner = users[0]
        for shadow in (r for r in records if r.managed):
            admission = self.store.admission(shadow)
            if admission is not None:
                current = self.store.admission(winner)
                merged = admission if current is None else current.union(admission)
                await self.kube.patch(
                    winner.rt,
                    winner.namespace,
                    winner.name,
                    {"metadata": {"annotations": {constants.ADMISSION_ANNOTATION: merged.encode()}}},
                )
                # Until the informer delivers it, the store assumes it, as after an admission.
                self.store.assume_admission(winner.key, merged)
            try:
                await self.kube.delete(shadow.rt, shadow.namespace, shadow.name, uid=shadow.uid)
            except ApiError as err:
                if not err.not_found:
                    raise
            log.info(
                "retired phalanx's podgroup for the user's",
                extra={"gang": str(shadow.key), "kind": str(winner.rt)},
            )
