"""What a PodGroup's status should say, computed from its members and the plan's decision.

Pure. The reconciler writes the result only when it differs from what is stored, so a steady
cluster causes no writes at all (no update storms).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from controller.core.model import Admit, Decision, Preempt, Reason, Reject, Short, Wait
from controller.core.state import is_live
from controller.pipeline.gangs import DEGRADED_CONDITION, GangView

CONDITION = "Admitted"
DEGRADED = DEGRADED_CONDITION  # reason and condition type
# The condition types Phalanx writes. Others on a PodGroup (a user's, another controller's) are
# left as they are: status is written as a merge patch, whose lists replace, so they are carried.
OWNED_CONDITIONS = frozenset({CONDITION, DEGRADED})


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def counts(view: GangView) -> dict[str, int]:
    live = [p for p in view.members if not p.terminating]
    return {
        "members": len(live),
        "gated": sum(1 for p in live if p.gated),
        "scheduled": sum(1 for p in live if p.bound and not p.finished),
        "running": sum(1 for p in live if p.phase == "Running"),
        "succeeded": sum(1 for p in view.members if p.phase == "Succeeded"),
        "failed": sum(1 for p in view.members if p.phase == "Failed"),
    }


def _admitted_verdict(
    decision: Decision | None, n: Mapping[str, int], minimum: int, live: bool
) -> tuple[str, str, str, bool] | None:
    """The verdict of an admitted gang by how its members fare, or None when none applies."""
    if n["members"] and n["succeeded"] >= minimum and n["running"] == 0 and n["gated"] == 0:
        return "Finished", "Finished", f"{n['succeeded']} members succeeded", True
    if n["running"] + n["succeeded"] >= minimum and n["running"] > 0:
        return "Running", Reason.ADMITTED.value, f"{n['running']} members running", True
    # Members that may still make up the gang: bound and not finished ("scheduled", which counts
    # the running ones too), waiting at the gate, or done.
    if n["failed"] and n["scheduled"] + n["gated"] + n["succeeded"] < minimum:
        return "Failed", "MembersFailed", f"{n['failed']} members failed", True
    if n["scheduled"] >= minimum:
        return "Scheduled", Reason.ADMITTED.value, f"{n['scheduled']} members bound to nodes", True
    if live:
        bound = f"{n['scheduled']} of {minimum} members bound"
        message = decision.message if isinstance(decision, Admit) else bound
        return "Scheduling", Reason.ADMITTED.value, message, True
    return None


def _verdict(view: GangView, decision: Decision | None, n: Mapping[str, int]) -> tuple[str, str, str, bool]:
    """(phase, reason, message, admitted) for the gang right now."""
    gang = view.gang
    minimum = max(gang.min_member, 1)
    admitted = (
        isinstance(decision, Admit)
        or bool(gang.admitted)
        or gang.admitted_at is not None
        or n["scheduled"] + n["succeeded"] >= minimum
    )
    # With no live member nothing is being scheduled: "Scheduling" would hide a gang that waits.
    live = any(is_live(p) for p in view.members)
    if isinstance(decision, Reject):
        return "Failed", decision.reason.value, decision.message, False
    if admitted and view.degraded_since is not None and not isinstance(decision, (Wait, Admit)):
        message = (
            f"{n['scheduled']} of {minimum} members running since {iso(view.degraded_since)}; "
            "the rest are gone (node drained, pod evicted) and no replacement could be placed"
        )
        if isinstance(decision, Short):
            message = f"{message}: {decision.message}"
        return "Running", DEGRADED, message, True
    if isinstance(decision, Short):
        # Running (or binding) at its old size; the members a scale-up added wait, gated, together.
        phase = "Running" if n["running"] else "Scheduling"
        return phase, decision.reason.value, f"{n['running']} members running; {decision.message}", True
    if admitted and not isinstance(decision, Wait):
        verdict = _admitted_verdict(decision, n, minimum, live)
        if verdict is not None:
            return verdict
    if isinstance(decision, Preempt):
        return "Pending", Reason.PREEMPTING.value, decision.message, False
    if isinstance(decision, Wait):
        if decision.timed_out:
            return "Failed", Reason.SCHEDULING_TIMEOUT.value, decision.message, False
        return "Pending", decision.reason.value, decision.message, False
    if admitted and live:
        return "Scheduling", Reason.ADMITTED.value, f"{n['scheduled']} of {minimum} members bound", True
    return "Pending", Reason.WAITING_FOR_MEMBERS.value, f"{n['members']} of {minimum} members exist", False


def desired(view: GangView, decision: Decision | None, now: float) -> dict[str, Any]:
    n = counts(view)
    phase, reason, message, admitted = _verdict(view, decision, n)
    current = view.podgroup.status
    previous = next((c for c in current.get("conditions") or () if c.get("type") == CONDITION), None)
    condition_status = "True" if admitted else "False"
    # As in Kubernetes: the transition time moves when the condition's status does, not its text.
    unchanged = previous is not None and previous.get("status") == condition_status
    condition = {
        "type": CONDITION,
        "status": condition_status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": previous.get("lastTransitionTime") if unchanged and previous else iso(now),
        "observedGeneration": view.podgroup.generation,
    }
    conditions = [condition]
    was_degraded = next((c for c in current.get("conditions") or () if c.get("type") == DEGRADED), None)
    if view.degraded_since is not None or was_degraded is not None:
        conditions.append(_degraded_condition(view, was_degraded, now, reason, message))
    status: dict[str, Any] = {
        "phase": phase,
        **n,
        "reason": reason,
        "message": message,
        "scheduleStartTime": iso(view.waiting_since) if view.waiting_since is not None else None,
        "conditions": merge_conditions(current.get("conditions"), conditions),
    }
    # None is kept on purpose: written as a merge patch, it removes a stale admittedTime.
    status["admittedTime"] = iso(view.gang.admitted_at) if view.gang.admitted_at is not None else None
    return status


def merge_conditions(current: Any, ours: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conditions to write: each of Phalanx's types where it stood (new ones last), every
    condition of a type Phalanx does not own kept as it is, in its place."""
    by_type = {c["type"]: c for c in ours}
    merged: list[dict[str, Any]] = []
    for condition in current if isinstance(current, list) else ():
        if not isinstance(condition, dict):
            continue  # not a condition (the CRD's schema would not have stored it)
        kind = condition.get("type")
        if kind in by_type:
            merged.append(by_type.pop(kind))
        elif kind not in OWNED_CONDITIONS:
            merged.append(condition)
    merged.extend(c for c in ours if c["type"] in by_type)
    return merged


def _degraded_condition(
    view: GangView, previous: Mapping[str, Any] | None, now: float, reason: str, message: str
) -> dict[str, Any]:
    degraded = view.degraded_since is not None
    if degraded:
        since = iso(view.degraded_since or now)
    elif previous is not None and previous.get("status") == "False":
        since = str(previous.get("lastTransitionTime"))
    else:
        since = iso(now)
    return {
        "type": DEGRADED,
        "status": "True" if degraded else "False",
        "reason": DEGRADED if degraded else "Whole",
        "message": message if degraded else "every member the gang needs is running or done",
        "lastTransitionTime": since,
        "observedGeneration": view.podgroup.generation,
    }


def differs(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Would writing ``wanted`` change ``current``? (A None in wanted means "absent".)"""
    return any(current.get(k) != v for k, v in wanted.items())
