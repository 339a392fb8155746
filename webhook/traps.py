"""Settings that would deadlock a gated gang, of the built-in kinds and the operators' alike: fixed
where possible, else warned about (docs/user-guide.md, "What the webhook does").

Each function returns the admission warnings that explain what it did.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from shared import constants as c
from shared.jsonread import get_in, integer, items, obj, strings, text
from shared.kinds import JOBSET, LEADERWORKERSET
from shared.workloads import GVK, REPLICATED_JOBS
from webhook.patch import PatchBuilder

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
        f"pod N+1 while pod N waits at gate {c.GATE}"
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
        f"at gate {c.GATE}, and cannot change)"
    ]


def active_deadline(workload: dict[str, Any], path: Sequence[str], kind: str) -> list[str]:
    """The deadline runs from the Job's start, including the time its pods wait at the gate."""
    seconds = integer(get_in(workload, *path), 0)
    if seconds <= 0:
        return []
    return [
        f"phalanx: {kind} {'.'.join(path)}={seconds} keeps counting while pods wait at gate {c.GATE} "
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
            for cond in items(rule.get("onPodConditions"))
        )
        for rule in rules
    )
    if ignores:
        return []
    return [
        "phalanx: pods of this Job evicted by preemption count against its backoffLimit "
        "(add a podFailurePolicy rule Ignore on condition DisruptionTarget, with restartPolicy Never)"
    ]


# ---- the operators' kinds ----------------------------------------------------------------------

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
# Where each kind says it is suspended (Kueue creates them suspended and resumes them on admission).
SUSPEND_PATHS: dict[str, tuple[str, ...]] = {
    "Job": ("spec", "suspend"),
    "JobSet": ("spec", "suspend"),
    "RayCluster": ("spec", "suspend"),
    "TrainJob": ("spec", "suspend"),
    "MPIJob": ("spec", "runPolicy", "suspend"),
}
JOBSET_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
LEADER_READY = "LeaderReady"
LEADER_CREATED = "LeaderCreated"


def kueue_managed(kind: str, workload: dict[str, Any]) -> list[str]:
    queue = strings(get_in(workload, "metadata", "labels")).get(KUEUE_QUEUE_LABEL)
    path = SUSPEND_PATHS.get(kind)
    suspended = path is not None and get_in(workload, *path) is True
    if not queue and not suspended:
        return []
    why = f"label {KUEUE_QUEUE_LABEL}={queue}" if queue else f"{'.'.join(path or ())}: true"
    return [
        f"phalanx: {kind} is suspended or managed by Kueue ({why}): it stays suspended, and no pod is "
        f"created, until Kueue admits it (or it is resumed); then its pods form their gang"
    ]


def jobset_traps(jobset: dict[str, Any]) -> list[str]:
    found = []
    if get_in(jobset, "spec", "startupPolicy", "startupPolicyOrder") == "InOrder":
        found.append(
            "phalanx: spec.startupPolicy.startupPolicyOrder InOrder creates a replicatedJob's Jobs only "
            f"once the previous ones run, but the whole JobSet is one gang waiting at gate {c.GATE}: "
            "it never starts (use AnyOrder)"
        )
    waiting = [
        text(obj(r).get("name")) or str(i)
        for i, r in enumerate(items(get_in(jobset, *REPLICATED_JOBS)))
        if items(obj(r).get("dependsOn"))
    ]
    if waiting:
        found.append(
            f"phalanx: replicatedJobs {', '.join(waiting)} use dependsOn: their Jobs are created only "
            f"after others run or finish, but the whole JobSet is one gang waiting at gate {c.GATE}: "
            "it never starts"
        )
    exclusive = strings(get_in(jobset, "metadata", "annotations")).get(JOBSET_EXCLUSIVE) or any(
        JOBSET_EXCLUSIVE in strings(get_in(r, "template", "metadata", "annotations"))
        for r in items(get_in(jobset, *REPLICATED_JOBS))
    )
    if exclusive:
        found.append(
            f"phalanx: {JOBSET_EXCLUSIVE}: JobSet's pod webhook refuses follower pods until the "
            f"leader pod is scheduled, but the leader waits at gate {c.GATE} for its followers: "
            "the gang never forms (use a nodeSelector or affinity instead)"
        )
    return found


def leader_ready(builder: PatchBuilder, lws: dict[str, Any]) -> list[str]:
    """LeaderReady creates the workers only once the leader runs; the leader waits for them."""
    if get_in(lws, "spec", "startupPolicy") != LEADER_READY:
        return []
    builder.set(("spec", "startupPolicy"), LEADER_CREATED)
    return [
        f"phalanx: spec.startupPolicy set to {LEADER_CREATED} (was {LEADER_READY}): {LEADER_READY} "
        f"creates the workers only once the leader is ready, but the leader waits at gate {c.GATE} "
        "for its workers"
    ]


def operator_traps(gvk: GVK, builder: PatchBuilder, workload: dict[str, Any]) -> list[str]:
    """Settings of the operators' kinds that deadlock a gated gang (fixed or warned about), and
    Kueue's suspension, which keeps the gang from forming at all."""
    found = kueue_managed(gvk[2], workload)
    if gvk == JOBSET:
        found += jobset_traps(workload)
    elif gvk == LEADERWORKERSET:
        found += leader_ready(builder, workload)
    return found
