"""Settings that would deadlock a gated gang (DESIGN.md §3): fixed where possible, else warned about.

Each function returns the admission warnings that explain what it did.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from shared.constants import GATE
from webhook.patch import PatchBuilder
from webhook.shapes import get_in, integer, text

PARALLEL = "Parallel"
ORDERED_READY = "OrderedReady"


def ordered_ready(builder: PatchBuilder, statefulset: dict[str, Any]) -> list[str]:
    """OrderedReady (also the default) never creates pod N+1 while pod N waits at the gate."""
    policy = get_in(statefulset, "spec", "podManagementPolicy")
    if policy == PARALLEL:
        return []
    builder.set(("spec", "podManagementPolicy"), PARALLEL)
    was = f"was {policy}" if isinstance(policy, str) and policy else f"was the default {ORDERED_READY}"
    return [
        f"phalanx: spec.podManagementPolicy set to {PARALLEL} ({was}): {ORDERED_READY} never creates "
        f"pod N+1 while pod N waits at gate {GATE}"
    ]


def active_deadline(workload: dict[str, Any], path: Sequence[str], kind: str) -> list[str]:
    """The deadline runs from the Job's start, including the time its pods wait at the gate."""
    seconds = integer(get_in(workload, *path), 0)
    if seconds <= 0:
        return []
    return [
        f"phalanx: {kind} {'.'.join(path)}={seconds} keeps counting while pods wait at gate {GATE} "
        f"for the whole gang to fit"
    ]


def foreign_scheduler(
    builder: PatchBuilder, spec: dict[str, Any], foreign: Collection[str], target: str, where: str
) -> list[str]:
    """A gang scheduler that is not installed would leave the pods pending forever.

    ``builder`` is scoped to the pod or pod template whose ``spec`` this is; ``where`` names it.
    """
    name = text(spec.get("schedulerName"))
    if not name or name not in foreign or name == target:
        return []
    builder.set(("spec", "schedulerName"), target)
    field = f"{where}.spec.schedulerName" if where else "spec.schedulerName"
    return [f"phalanx: {field} {name} replaced by {target}; Phalanx does the gang scheduling"]
