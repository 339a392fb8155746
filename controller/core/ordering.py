"""The order in which a pass considers gangs.

Across namespaces: priority (high first), then age, then namespace and name -- ``Gang.priority`` is
the members' pod priority, which Kubernetes governs (PriorityClass admission, ResourceQuota
scopes). Inside one namespace, gangs of equal priority are then re-ranked by their PodGroup's own
priority (``Gang.local_priority``), which any tenant can write: a tenant reorders its own gangs
among the places they already hold, and never moves ahead of another namespace's gang.

A gang the cluster-autoscaler provisioned nodes for (``Gang.capacity_booked``) goes before all of
these while its booking lasts.

Deterministic by construction: the keys are total over distinct gangs.
"""

from __future__ import annotations

from collections.abc import Iterable

from controller.core.model import Gang, Pod

GangOrder = tuple[int, int, float, str, str]


def gang_order(gang: Gang) -> GangOrder:
    # A gang whose nodes the cluster-autoscaler provisioned comes first: that room was made for it.
    return (0 if gang.capacity_booked else 1, -gang.priority, gang.created, gang.key.namespace, gang.key.name)


def _local_order(gang: Gang) -> tuple[int, float, str]:
    local = gang.priority if gang.local_priority is None else gang.local_priority
    return (-local, gang.created, gang.key.name)


def ordered(gangs: Iterable[Gang]) -> list[Gang]:
    """Gangs in pass order."""
    return reranked_locally(sorted(gangs, key=gang_order))


def reranked_locally(out: list[Gang]) -> list[Gang]:
    """``out`` (sorted by ``gang_order``) with each namespace's gangs of equal priority re-ranked by
    their PodGroups' own priority, in place; a no-op (no work) when no gang sets one."""
    if all(g.local_priority is None for g in out):
        return out
    places: dict[tuple[str, int], list[int]] = {}
    for i, gang in enumerate(out):
        places.setdefault((gang.key.namespace, gang.priority), []).append(i)
    for positions in places.values():
        if len(positions) > 1:
            reranked = sorted((out[i] for i in positions), key=_local_order)
            for i, gang in zip(positions, reranked, strict=True):
                out[i] = gang
    return out


def member_order(pod: Pod) -> tuple[float, str, str]:
    """Members are admitted oldest first (replacements after the pods they replace)."""
    return (pod.created, pod.name, pod.uid)
