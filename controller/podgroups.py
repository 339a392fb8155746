"""Create the PodGroup of a gang whose gated members carry the canonical label and have none.

The PodGroup is owned by the members' workload (garbage-collected with it). Its size comes from,
in order: the native Workload's ``minCount``, the members' ``phalanx.io/min-member`` override,
the size the webhook inferred from the workload spec, the Coscheduling ``min-available`` label,
and finally 1 -- said in an Event so nobody is surprised. An existing PodGroup of any served kind
(also one mpi-operator made) is adopted as it is.
"""

from __future__ import annotations

import logging
from typing import Any

from controller import workload_owners
from controller.core.model import GangKey, Pod
from controller.gangs import inferred_min_member, member_annotation
from controller.kube import ApiError, Kube
from controller.resources import PODGROUPS
from shared import constants as c

log = logging.getLogger(__name__)
MANAGED_BY = "app.kubernetes.io/managed-by"


class PodGroupFactory:
    def __init__(self, kube: Kube, store: Any) -> None:
        self.kube = kube
        self.store = store

    def _workload_for(self, key: GangKey, members: list[Pod]) -> tuple[str, str, int] | None:
        """(workload, uid, minCount) of the Workload podGroup the members reference, if served."""
        for pod in members:
            if pod.workload is None:
                continue
            workload, group = pod.workload
            min_count = self.store.workloads.get((key.namespace, workload), {}).get(group)
            if min_count is not None:
                return workload, self.store.workload_uids.get((key.namespace, workload), ""), min_count
        return None

    def manifest(self, key: GangKey) -> dict[str, Any] | None:
        members = [p for p in self.store.members(key) if not p.terminating]
        if not any(p.gated for p in members):
            return None
        owner: dict[str, Any] | None = None
        source = "default"
        workload = self._workload_for(key, members)
        if workload is not None:
            name, uid, min_member = workload
            source = f"Workload {name} minCount"
            if uid:
                owner = {
                    "apiVersion": "scheduling.k8s.io/v1alpha1",
                    "kind": "Workload",
                    "name": name,
                    "uid": uid,
                }
        else:
            inferred = inferred_min_member(members)
            min_member = inferred or 1
            source = "the workload spec" if inferred else "no size given: defaulted to 1"
            first = next((p for p in sorted(members, key=lambda p: p.name) if p.owner is not None), None)
            if first is not None and first.owner is not None:
                o = first.owner
                owner = {"apiVersion": o.api_version, "kind": o.kind, "name": o.name, "uid": o.uid}
        spec: dict[str, Any] = {"minMember": min_member}
        timeout = member_annotation(members, c.SCHEDULE_TIMEOUT_ANNOTATION)
        if workload is not None and (key.namespace, workload[0]) in self.store.workload_timeouts:
            timeout = str(self.store.workload_timeouts[(key.namespace, workload[0])])
        if timeout and timeout.isdigit() and int(timeout) > 0:
            spec["scheduleTimeoutSeconds"] = int(timeout)
        metadata: dict[str, Any] = {
            "name": key.name,
            "namespace": key.namespace,
            "labels": {MANAGED_BY: "phalanx"},
            "annotations": {"phalanx.io/min-member-source": source},
        }
        if owner is not None:
            metadata["ownerReferences"] = [{**owner, "controller": False, "blockOwnerDeletion": False}]
        return {
            "apiVersion": PODGROUPS.api_version,
            "kind": PODGROUPS.kind,
            "metadata": metadata,
            "spec": spec,
        }

    async def ensure(self, key: GangKey) -> None:
        if self.store.podgroup(key) is not None:
            return
        body = self.manifest(key)
        if body is None:
            return
        # Owned by the object the user applied (JobSet, not its Jobs), where an operator made the pods.
        if (
            top := await workload_owners.top_owner(self.kube, key.namespace, self.store.members(key))
        ) is not None:
            body["metadata"]["ownerReferences"] = [{**top, "controller": False, "blockOwnerDeletion": False}]
        try:
            created = await self.kube.create(PODGROUPS, key.namespace, body)
        except ApiError as err:
            if err.conflict:
                return  # someone else created it; the informer will deliver it
            raise
        log.info("created podgroup", extra={"gang": str(key), "minMember": body["spec"]["minMember"]})
        self.store.upsert_podgroup(PODGROUPS, created)
