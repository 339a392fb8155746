"""Which gang(s) a ``kind/name`` on the command line means. Pure (reads a ClusterState)."""

from __future__ import annotations

from controller.cli.cluster import ClusterState
from controller.core.model import GangKey

ALIASES = {
    "po": "pod",
    "pods": "pod",
    "pg": "podgroup",
    "podgroups": "podgroup",
    "jobs": "job",
    "sts": "statefulset",
    "statefulsets": "statefulset",
    "mpijobs": "mpijob",
}


class TargetError(LookupError):
    """The target names nothing Phalanx gang-schedules."""


def parse(target: str) -> tuple[str, str]:
    kind, slash, name = target.partition("/")
    if not slash or not kind or not name:
        raise TargetError(f"expected <kind>/<name> (e.g. job/train), got {target!r}")
    kind = kind.lower().split(".", 1)[0]  # job.batch, podgroups.scheduling.sigs.k8s.io
    return ALIASES.get(kind, kind), name


def _owner_names(state: ClusterState, namespace: str, kind: str, name: str) -> set[tuple[str, str]]:
    """(kind, name) of the object and of every workload below it: an MPIJob's launcher Job, a
    JobSet's Jobs, a TrainJob's JobSet and its Jobs, a LeaderWorkerSet's StatefulSets."""
    owned = {(kind, name)}
    # List items carry no kind: it is the list's.
    objects = [
        (listed.lower(), item.get("metadata") or {})
        for listed, items in state.workloads.items()
        for item in items
        if (item.get("metadata") or {}).get("namespace") == namespace
    ]
    grew = True
    while grew:
        grew = False
        for obj_kind, meta in objects:
            this = (obj_kind, str(meta.get("name", "")))
            if this in owned:
                continue
            refs = meta.get("ownerReferences") or ()
            if any((str(ref.get("kind", "")).lower(), ref.get("name")) in owned for ref in refs):
                owned.add(this)
                grew = True
    return owned


def resolve(state: ClusterState, namespace: str, target: str) -> list[GangKey]:
    """The gangs ``target`` (``kind/name`` in ``namespace``) belongs to, sorted."""
    kind, name = parse(target)
    store = state.store
    keys: set[GangKey] = set()
    if kind == "podgroup":
        key = GangKey(namespace, name)
        if store.podgroup(key) is not None or key in store.pods_by_gang:
            keys.add(key)
    elif kind == "pod":
        for pod in store.pods.values():
            if pod.namespace == namespace and pod.name == name:
                if pod.group is None:
                    raise TargetError(f"pod {namespace}/{name} is in no gang (no group link)")
                keys.add(GangKey(namespace, pod.group))
    else:
        owners = _owner_names(state, namespace, kind, name)
        for pod in store.pods.values():
            owner = pod.owner
            if (
                pod.namespace == namespace
                and pod.group
                and owner is not None
                and (owner.kind.lower(), owner.name) in owners
            ):
                keys.add(GangKey(namespace, pod.group))
        for rt_groups in store.podgroups.values():
            for key, record in rt_groups.items():
                if key.namespace == namespace and any(
                    str(ref.get("kind", "")).lower() == kind and ref.get("name") == name
                    for ref in record.owner_references
                ):
                    keys.add(key)
        if not keys and GangKey(namespace, name) in state.views:
            keys.add(GangKey(namespace, name))  # the webhook names a workload's gang after it
    if not keys:
        raise TargetError(f"{target} in namespace {namespace}: no gang found")
    return sorted(keys, key=str)
