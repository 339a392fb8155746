"""Which gang(s) a ``kind/name`` on the command line means. Pure (reads a ClusterState)."""

from __future__ import annotations

from controller.api.resources import PODGROUPS, PODS
from controller.cli.cluster import WORKLOAD_TYPES, ClusterState
from controller.core import GangKey

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


class BadTarget(TargetError):
    """Not ``<kind>/<name>``: a usage error."""


class NotFound(TargetError):
    """The object itself does not exist (kubectl's ``Error from server (NotFound)``)."""

    def __init__(self, resource: str, name: str) -> None:
        super().__init__(f'{resource} "{name}" not found')


def parse(target: str) -> tuple[str, str]:
    kind, slash, name = target.partition("/")
    if not slash or not kind or not name:
        raise BadTarget(f"expected <kind>/<name> (e.g. job/train), got {target!r}")
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
        _exists_or_not_found(state, namespace, kind, name)
        raise TargetError(f"{target} in namespace {namespace}: no gang found")
    return sorted(keys, key=str)


def _exists_or_not_found(state: ClusterState, namespace: str, kind: str, name: str) -> None:
    """Raise ``NotFound`` when the plugin read every object of the kind in the namespace and this
    one is not among them (kinds it did not read, or could not, are given the benefit of the doubt)."""
    if kind == "pod":
        if str(PODS) in state.unreadable or any(
            pod.namespace == namespace and pod.name == name for pod in state.store.pods.values()
        ):
            return
        raise NotFound("pods", name)
    if kind == "podgroup":
        if any(GangKey(namespace, name) in by_key for by_key in state.store.podgroups.values()):
            return
        if str(PODGROUPS) in state.unreadable or str(PODGROUPS) not in state.served:
            return
        raise NotFound(f"{PODGROUPS.plural}.{PODGROUPS.group}", name)
    resource = next((rt for rt in WORKLOAD_TYPES if rt.kind.lower() == kind), None)
    if resource is None or str(resource) not in state.served or str(resource) in state.unreadable:
        return
    items = state.workloads.get(resource.kind) or []
    if not any(
        (item.get("metadata") or {}).get("namespace") == namespace
        and (item.get("metadata") or {}).get("name") == name
        for item in items
    ):
        raise NotFound(f"{resource.plural}.{resource.group}" if resource.group else resource.plural, name)
