"""Settings that would deadlock a gated gang: fixed where possible, else warned about (README,
"What the webhook does").

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


def keep_parallel(builder: PatchBuilder, statefulset: dict[str, Any], old: dict[str, Any]) -> list[str]:
    """On UPDATE: the policy cannot change after creation, so a manifest re-applied with the
    OrderedReady that Phalanx replaced (or without one: the default) keeps Parallel."""
    was = get_in(old, "spec", "podManagementPolicy")
    policy = get_in(statefulset, "spec", "podManagementPolicy")
    if was != PARALLEL or policy == PARALLEL:
        return []
    builder.set(("spec", "podManagementPolicy"), PARALLEL)
    return [
        f"phalanx: spec.podManagementPolicy kept {PARALLEL} (it was set at creation so pods can wait "
        f"at gate {GATE}, and cannot change)"
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


# Preemption evicts a victim gang's pods through the Eviction API, which marks them with the
# DisruptionTarget condition. Without a rule that ignores it, each eviction counts against the
# Job's backoffLimit, and a gang preempted once can fail for good instead of re-queueing whole.
IGNORE_DISRUPTIONS = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def disruptions_count_as_failures(builder: PatchBuilder, job: dict[str, Any]) -> list[str]:
    policy = get_in(job, "spec", "podFailurePolicy")
    restart = get_in(job, "spec", "template", "spec", "restartPolicy")
    if policy is None and restart == "Never":
        builder.set(("spec", "podFailurePolicy"), {"rules": [IGNORE_DISRUPTIONS]})
        # The API requires podReplacementPolicy Failed with a podFailurePolicy (it was defaulted to
        # TerminatingOrFailed before admission webhooks run).
        builder.set(("spec", "podReplacementPolicy"), "Failed")
        return [
            "phalanx: spec.podFailurePolicy added (Ignore pods with condition DisruptionTarget) so that "
            "pods evicted to make room for a higher-priority gang do not count against backoffLimit "
            "(and spec.podReplacementPolicy set to Failed, which that requires)"
        ]
    rules = get_in(job, "spec", "podFailurePolicy", "rules")
    ignores = isinstance(rules, list) and any(
        isinstance(rule, dict)
        and rule.get("action") == "Ignore"
        and any(
            isinstance(cond, dict) and cond.get("type") == "DisruptionTarget"
            for cond in _list(rule.get("onPodConditions"))
        )
        for rule in rules
    )
    if ignores:
        return []
    return [
        "phalanx: pods of this Job evicted by preemption count against its backoffLimit "
        "(add a podFailurePolicy rule Ignore on condition DisruptionTarget, with restartPolicy Never)"
    ]
