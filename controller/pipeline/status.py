"""What a PodGroup's status should say, computed from its members and the plan's decision.

Pure. The result is the typed ``PodGroupStatus`` (shared/podgroup.py), which the CRD schema is
generated from too. The reconciler writes it only when it differs from what is stored, so a steady
cluster causes no writes at all (no update storms).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, NamedTuple

from controller.core import Admit, AutoscalerNote, Decision, Preempt, Reason, Reject, Short, Wait, is_live
from controller.core import messages as msg
from controller.pipeline.gangs import GangView
from shared.podgroup import Condition, ConditionType, Phase, PodGroupStatus

# Others' condition types on a PodGroup (a user's, another controller's) are left as they are:
# status is written as a merge patch, whose lists replace, so they are carried.
OWNED_CONDITIONS = frozenset(ConditionType)


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def counts(view: GangView) -> PodGroupStatus:
    """The status's member counts (its other fields unset)."""
    live = [p for p in view.members if not p.terminating]
    return PodGroupStatus(
        members=len(live),
        gated=sum(1 for p in live if p.gated),
        scheduled=sum(1 for p in live if p.bound and not p.finished),
        running=sum(1 for p in live if p.phase == "Running"),
        succeeded=sum(1 for p in view.members if p.phase == "Succeeded"),
        failed=sum(1 for p in view.members if p.phase == "Failed"),
    )


class Verdict(NamedTuple):
    """What the status says of the gang right now."""

    phase: Phase
    reason: Reason
    message: str
    admitted: bool  # the Admitted condition's status


def _admitted_verdict(
    decision: Decision | None, n: PodGroupStatus, minimum: int, live: bool
) -> Verdict | None:
    """The verdict of an admitted gang by how its members fare, or None when none applies."""
    if n.members and n.succeeded >= minimum and n.running == 0 and n.gated == 0:
        return Verdict(Phase.FINISHED, Reason.FINISHED, msg.members_succeeded(n.succeeded), True)
    if n.running + n.succeeded >= minimum and n.running > 0:
        return Verdict(Phase.RUNNING, Reason.ADMITTED, msg.members_running(n.running), True)
    # Members that may still make up the gang: bound and not finished ("scheduled", which counts
    # the running ones too), waiting at the gate, or done.
    if n.failed and n.scheduled + n.gated + n.succeeded < minimum:
        return Verdict(Phase.FAILED, Reason.MEMBERS_FAILED, msg.members_failed(n.failed), True)
    if n.scheduled >= minimum:
        return Verdict(Phase.SCHEDULED, Reason.ADMITTED, msg.members_bound(n.scheduled), True)
    if live:
        message = decision.message if isinstance(decision, Admit) else msg.bound_of(n.scheduled, minimum)
        return Verdict(Phase.SCHEDULING, Reason.ADMITTED, message, True)
    return None


def verdict(view: GangView, decision: Decision | None, n: PodGroupStatus) -> Verdict:
    """The phase, reason and message for the gang right now."""
    gang = view.gang
    minimum = max(gang.min_member, 1)
    admitted = (
        isinstance(decision, Admit)
        or bool(gang.admitted)
        or gang.admitted_at is not None
        or n.scheduled + n.succeeded >= minimum
    )
    # With no live member nothing is being scheduled: "Scheduling" would hide a gang that waits.
    live = any(is_live(p) for p in view.members)
    if isinstance(decision, Reject):
        return Verdict(Phase.FAILED, decision.reason, decision.message, False)
    if admitted and gang.degraded_since is not None and not isinstance(decision, (Wait, Admit)):
        why = decision.message if isinstance(decision, Short) else None
        message = msg.degraded(n.scheduled, minimum, iso(gang.degraded_since), why)
        return Verdict(Phase.RUNNING, Reason.DEGRADED, message, True)
    if isinstance(decision, Short):
        # Running (or binding) at its old size; the members a scale-up added wait, gated, together.
        phase = Phase.RUNNING if n.running else Phase.SCHEDULING
        return Verdict(phase, decision.reason, msg.running_short(n.running, decision.message), True)
    if admitted and not isinstance(decision, Wait):
        found = _admitted_verdict(decision, n, minimum, live)
        if found is not None:
            return found
    if isinstance(decision, Preempt):
        return Verdict(Phase.PENDING, Reason.PREEMPTING, decision.message, False)
    if isinstance(decision, Wait):
        if decision.timed_out:
            return Verdict(Phase.FAILED, Reason.SCHEDULING_TIMEOUT, decision.message, False)
        return Verdict(Phase.PENDING, decision.reason, decision.message, False)
    if admitted and live:
        return Verdict(Phase.SCHEDULING, Reason.ADMITTED, msg.bound_of(n.scheduled, minimum), True)
    return Verdict(
        Phase.PENDING, Reason.WAITING_FOR_MEMBERS, msg.waiting_for_members(n.members, minimum), False
    )


def desired(
    view: GangView, decision: Decision | None, now: float, autoscaler: AutoscalerNote | None = None
) -> PodGroupStatus:
    n = counts(view)
    said = verdict(view, decision, n)
    current = view.podgroup.parsed_status
    previous = current.condition(ConditionType.ADMITTED)
    status_word = "True" if said.admitted else "False"
    # As in Kubernetes: the transition time moves when the condition's status does, not its text.
    unchanged = previous is not None and previous.get("status") == status_word
    condition = Condition(
        ConditionType.ADMITTED,
        said.admitted,
        said.reason.value,
        said.message,
        str(previous.get("lastTransitionTime")) if unchanged and previous else iso(now),
        view.podgroup.generation,
    )
    conditions = [condition.to_json()]
    was_degraded = current.condition(ConditionType.DEGRADED)
    if view.gang.degraded_since is not None or was_degraded is not None:
        conditions.append(_degraded_condition(view, was_degraded, now, said.message).to_json())
    if autoscaler is not None:
        conditions.append(_autoscaler_condition(view, autoscaler, now).to_json())
    gang = view.gang
    return replace(
        n,
        phase=said.phase,
        reason=said.reason.value,
        message=said.message,
        schedule_start_time=iso(view.waiting_since) if view.waiting_since is not None else None,
        admitted_time=iso(gang.admitted_at) if gang.admitted_at is not None else None,
        conditions=tuple(merge_conditions(current.conditions, conditions)),
    )


def merge_conditions(current: Any, ours: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conditions to write: each of Phalanx's types where it stood (new ones last), every
    condition of a type Phalanx does not own kept as it is, in its place."""
    by_type = {c["type"]: c for c in ours}
    merged: list[dict[str, Any]] = []
    for condition in current if isinstance(current, list | tuple) else ():
        if not isinstance(condition, Mapping):
            continue  # not a condition (the CRD's schema would not have stored it)
        kind = condition.get("type")
        if kind in by_type:
            merged.append(by_type.pop(kind))
        elif kind not in OWNED_CONDITIONS:
            merged.append(dict(condition))
    merged.extend(c for c in ours if c["type"] in by_type)
    return merged


def _autoscaler_condition(view: GangView, note: AutoscalerNote, now: float) -> Condition:
    previous = view.podgroup.parsed_status.condition(ConditionType.CAPACITY_REQUESTED)
    unchanged = previous is not None and previous.get("reason") == note.reason
    return Condition(
        ConditionType.CAPACITY_REQUESTED,
        note.requested,
        note.reason,
        note.message,
        str(previous.get("lastTransitionTime")) if unchanged and previous else iso(now),
        view.podgroup.generation,
    )


def _degraded_condition(
    view: GangView, previous: Mapping[str, Any] | None, now: float, message: str
) -> Condition:
    since = view.gang.degraded_since
    if since is not None:
        changed = iso(since)
    elif previous is not None and previous.get("status") == "False":
        changed = str(previous.get("lastTransitionTime"))
    else:
        changed = iso(now)
    degraded = since is not None
    return Condition(
        ConditionType.DEGRADED,
        degraded,
        (Reason.DEGRADED if degraded else Reason.WHOLE).value,
        message if degraded else msg.whole(),
        changed,
        view.podgroup.generation,
    )


# What changes as members come and go without changing where the gang stands.
_PROGRESS_FIELDS = frozenset({"members", "gated", "scheduled", "running", "succeeded", "failed", "message"})


def _standing(conditions: Any) -> list[tuple[Any, Any, Any]]:
    return [
        (c.get("type"), c.get("status"), c.get("reason")) for c in conditions or () if isinstance(c, Mapping)
    ]


def progress_only(current: Mapping[str, Any], wanted: PodGroupStatus) -> bool:
    """Does ``wanted`` differ from ``current`` only in counts and messages -- the same phase,
    reason, times and conditions? Such a write may wait a moment: the next one carries it too."""
    for k, v in wanted.to_json().items():
        if k in _PROGRESS_FIELDS:
            continue
        if k == "conditions":
            if _standing(current.get(k)) != _standing(v):
                return False
        elif current.get(k) != v:
            return False
    return True


def differs(current: Mapping[str, Any], wanted: PodGroupStatus) -> bool:
    """Would writing ``wanted`` change ``current``? (A None in wanted means "absent".)"""
    return any(current.get(k) != v for k, v in wanted.to_json().items())
