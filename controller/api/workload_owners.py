"""The top-level object a gang's pods were made for (the PodGroup's owner), per operator kind.

Operators make pods through layers (JobSet -> Jobs -> pods; TrainJob -> JobSet -> Jobs -> pods;
LeaderWorkerSet -> StatefulSets -> pods), and the pods' own owner is only the last layer. Each
operator labels its pods with the name of the object the user applied; that object is read once
when the PodGroup is made, and its own controlling owner taken instead where that is a top-level
kind too (the JobSet a TrainJob made, the RayCluster of a RayJob).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from controller.api.kube import ApiError, Kube
from controller.api.resources import ResourceType, of
from controller.core import Pod
from shared import constants, kinds
from shared.kinds import Role

log = logging.getLogger(__name__)

# A workload by (kind, namespace, name): what a gang's size is read from.
WorkloadKey = tuple[str, str, str]

# (pod label naming the object, labels that must also match, its resource), first match wins.
NAMING_LABELS: tuple[tuple[str, Mapping[str, str], ResourceType], ...] = tuple(
    (k.naming_label, k.naming_also, of(k)) for k in kinds.of_role(Role.WORKLOAD) if k.naming_label
)
# Owners above those that own the gang instead: (API group, kind).
PARENT_KINDS = frozenset((k.group, k.kind) for k in kinds.REGISTRY if k.parent)
# The built-in kinds that make pods themselves: (apiVersion, kind) of a pod's controlling owner.
BUILT_IN_WORKLOADS = frozenset((k.api_version(), k.kind) for k in kinds.REGISTRY if k.makes_pods)


def named_object(labels: Mapping[str, str]) -> tuple[ResourceType, str] | None:
    """The operator object a pod's labels name, if any (pure)."""
    for key, also, resource in NAMING_LABELS:
        name = labels.get(key)
        if name and all(labels.get(k) == v for k, v in also.items()):
            return resource, name
    return None


def sized_by(pod: Pod) -> WorkloadKey | None:
    """The workload whose spec the webhook sized this member's gang from, if it did (pure): the
    operator object its labels name (a JobSet, not its Job), else its own Job or StatefulSet."""
    if constants.INFERRED_MIN_MEMBER_ANNOTATION not in pod.annotations:
        return None  # sized by something else (a PodGroup, a Workload, an override), or not at all
    named = named_object(pod.labels)
    if named is not None:
        return named[0].kind, pod.namespace, named[1]
    owner = pod.owner
    if owner is not None and (owner.api_version, owner.kind) in BUILT_IN_WORKLOADS:
        return owner.kind, pod.namespace, owner.name
    return None


def owner_reference(obj: Mapping[str, Any], resource: ResourceType) -> dict[str, str] | None:
    """The owner reference for a gang of ``obj``'s pods: ``obj``'s controlling owner if that is a
    parent kind (TrainJob, RayJob), else ``obj`` itself (pure)."""
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping) or not meta.get("uid"):
        return None
    for ref in meta.get("ownerReferences") or []:
        if not isinstance(ref, Mapping) or not ref.get("controller"):
            continue
        group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        if (group, ref.get("kind")) in PARENT_KINDS and ref.get("uid"):
            return {k: str(ref[k]) for k in ("apiVersion", "kind", "name", "uid")}
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "name": str(meta.get("name", "")),
        "uid": str(meta["uid"]),
    }


async def top_owner(kube: Kube, namespace: str, members: Iterable[Pod]) -> dict[str, str] | None:
    """The owner reference of the operator object the members were made for, or None (no such
    label, the object is gone, or reading it is not allowed: the pods' own owner is used then)."""
    named = next((n for p in sorted(members, key=lambda p: p.name) if (n := named_object(p.labels))), None)
    if named is None:
        return None
    resource, name = named
    try:
        obj = await kube.get(resource, namespace, name)
    except ApiError as err:
        log.info("operator object not readable", extra={"object": f"{resource}/{name}", "error": str(err)})
        return None
    return owner_reference(obj, resource)
