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

from controller.core.model import Pod
from controller.kube import ApiError, Kube
from controller.resources import ResourceType

log = logging.getLogger(__name__)

MPIJOBS = ResourceType("kubeflow.org", "v2beta1", "mpijobs", "MPIJob")
JOBSETS = ResourceType("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
LEADERWORKERSETS = ResourceType("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet")
RAYCLUSTERS = ResourceType("ray.io", "v1", "rayclusters", "RayCluster")

# (pod label naming the object, labels that must also match, its resource), first match wins.
NAMING_LABELS: tuple[tuple[str, Mapping[str, str], ResourceType], ...] = (
    ("jobset.sigs.k8s.io/jobset-name", {}, JOBSETS),
    ("leaderworkerset.sigs.k8s.io/name", {}, LEADERWORKERSETS),
    ("ray.io/cluster", {}, RAYCLUSTERS),
    ("training.kubeflow.org/job-name", {"training.kubeflow.org/operator-name": "mpi-operator"}, MPIJOBS),
)
# Owners above those that own the gang instead: (API group, kind).
PARENT_KINDS = frozenset({("trainer.kubeflow.org", "TrainJob"), ("ray.io", "RayJob")})


def named_object(labels: Mapping[str, str]) -> tuple[ResourceType, str] | None:
    """The operator object a pod's labels name, if any (pure)."""
    for key, also, resource in NAMING_LABELS:
        name = labels.get(key)
        if name and all(labels.get(k) == v for k, v in also.items()):
            return resource, name
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
