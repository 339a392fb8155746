"""The order in which a pass considers gangs: priority (high first), then age, then name.

Deterministic by construction: the key is total over distinct gangs.
"""

from __future__ import annotations

from collections.abc import Iterable

from controller.core.model import Gang, Pod

GangOrder = tuple[int, float, str, str]


def gang_order(gang: Gang) -> GangOrder:
    return (-gang.priority, gang.created, gang.key.namespace, gang.key.name)


def ordered(gangs: Iterable[Gang]) -> list[Gang]:
    return sorted(gangs, key=gang_order)


def member_order(pod: Pod) -> tuple[float, str, str]:
    """Members are admitted oldest first (replacements after the pods they replace)."""
    return (pod.created, pod.name, pod.uid)
