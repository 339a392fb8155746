"""Which gangs ask the cluster-autoscaler for capacity, whole, through a ProvisioningRequest.

Gated pods are not scale-up candidates for the cluster-autoscaler (their PodScheduled condition says
SchedulingGated, not Unschedulable), so a gang that does not fit would wait forever on an autoscaled
cluster. Where enabled, a gang that waits for capacity and only for capacity -- all its members
exist, its queue would admit it, no preemption will place it -- gets ONE ProvisioningRequest
(autoscaling.x-k8s.io/v1) with one pod set per member shape. Phalanx follows the request's
conditions: Provisioned -> the next plan sees the new nodes and the members consume the request;
Failed -> asked again after a backoff; BookingExpired / CapacityRevoked while the gang still waits ->
asked again (the ended request is still told of); the gang admitted and bound, gone, timed out or
held by its queue -> deleted. A gang that waits for something that passes (a member being
recreated, a preemption) keeps its request, so its booked nodes are not thrown away. The request
asks for the members the gang needs to start (minMember), not for elastic extras.

Pure: requests and gangs in, what to create and delete and what each gang's request says out.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from controller.core import messages as msg
from controller.core.model import CAPACITY_WAITS, Admit, Decision, Gang, GangKey, Pod, Preempt, Reason, Wait
from controller.core.ordering import member_order
from controller.core.shapes import member_kind
from controller.core.state import is_live

BEST_EFFORT_ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
PROVISIONING_CLASSES = (BEST_EFFORT_ATOMIC, CHECK_CAPACITY)

# A ProvisioningRequest's name is at most 253 characters; the gang's name is cut to leave room.
_NAME_ROOM = 200


@dataclass(frozen=True, slots=True)
class ProvisioningConfig:
    enabled: bool = False
    class_name: str = BEST_EFFORT_ATOMIC
    # A Failed request is asked again after this, doubled per failure, up to the maximum.
    retry_seconds: float = 30.0
    max_retry_seconds: float = 600.0
    # A gang waits this long at most for the answer to its request before it takes any room.
    answer_seconds: float = 300.0


class RequestPhase(StrEnum):
    """Where a gang's request stands, from its conditions."""

    REQUESTED = "Requested"  # created, not accepted yet
    ACCEPTED = "Accepted"  # the autoscaler took it up
    NOT_FOUND = "CapacityNotFound"  # Provisioned=False: the autoscaler found no room yet, retries itself
    PROVISIONED = "Provisioned"  # room provisioned (or found) and booked for the gang
    FAILED = "Failed"
    EXPIRED = "BookingExpired"  # BookingExpired or CapacityRevoked: the booking is gone


# Out and not answered yet: nodes for it may be on their way.
UNANSWERED = frozenset({RequestPhase.REQUESTED, RequestPhase.ACCEPTED})


@dataclass(frozen=True, slots=True)
class RequestCondition:
    type: str  # Accepted | Provisioned | Failed | BookingExpired | CapacityRevoked
    status: bool
    reason: str = ""
    message: str = ""
    at: float = 0.0  # lastTransitionTime, seconds since the epoch


@dataclass(frozen=True, slots=True)
class ProvisioningRequestState:
    """A ProvisioningRequest Phalanx made, as the shell read it."""

    namespace: str
    name: str
    gang: GangKey
    class_name: str
    signature: str  # of the member shapes and counts it asked for
    attempt: int = 0  # how many requests for this gang failed or expired before it
    created: float = 0.0
    conditions: tuple[RequestCondition, ...] = ()

    def condition(self, kind: str) -> RequestCondition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    @property
    def phase(self) -> RequestPhase:
        def true(kind: str) -> RequestCondition | None:
            found = self.condition(kind)
            return found if found is not None and found.status else None

        if true("Failed"):
            return RequestPhase.FAILED
        if true("BookingExpired") or true("CapacityRevoked"):
            return RequestPhase.EXPIRED
        provisioned = self.condition("Provisioned")
        if provisioned is not None:
            return RequestPhase.PROVISIONED if provisioned.status else RequestPhase.NOT_FOUND
        return RequestPhase.ACCEPTED if true("Accepted") else RequestPhase.REQUESTED


@dataclass(frozen=True, slots=True)
class MemberShape:
    """Members that are alike for the autoscaler: one pod set of the request, ``count`` pods made
    from the spec of ``example`` (a member's name)."""

    example: str
    count: int


@dataclass(frozen=True, slots=True)
class NewRequest:
    gang: GangKey
    name: str
    class_name: str
    signature: str
    attempt: int
    shapes: tuple[MemberShape, ...]


@dataclass(frozen=True, slots=True)
class GangProvisioning:
    """What a gang's request says, for its PodGroup and its members' gates."""

    request: str
    class_name: str
    phase: RequestPhase
    message: str
    # The request this one replaced because it failed or its booking ended, and what to say of it
    # (it is deleted in the same pass, so its end would otherwise go untold).
    ended: ProvisioningRequestState | None = None
    ended_message: str = ""

    @property
    def consumable(self) -> bool:
        """Members admitted now consume the request (annotated in the patch that lifts the gate).
        Not only once Provisioned: the kwok and cloud providers' nodes can register before the
        autoscaler writes that condition, and a gang admitted on them uses the room asked for."""
        return self.phase not in (RequestPhase.FAILED, RequestPhase.EXPIRED)


@dataclass(frozen=True, slots=True)
class ProvisioningPlan:
    create: tuple[NewRequest, ...] = ()
    delete: tuple[ProvisioningRequestState, ...] = ()
    gangs: Mapping[GangKey, GangProvisioning] = field(default_factory=dict)
    # Seconds from now at which a failed request is due to be asked again (None: nothing due).
    recheck_in: float | None = None


def _asked(gang: Gang, decision: Decision | None) -> list[Pod]:
    """The members the request is for: those the gang needs to start (gated, live, not admitted),
    oldest first."""
    needed = decision.asks_for if isinstance(decision, Wait) else None
    wanted = set(needed) if needed is not None else None
    return sorted(
        (
            m
            for m in gang.members
            if m.gated and is_live(m) and m.uid not in gang.admitted and (wanted is None or m.uid in wanted)
        ),
        key=member_order,
    )


# Waits that pass without changing what the gang needs (a member being recreated, a preemption, a
# reservation): a request the gang already has is kept through them.
_PASSING_WAITS = frozenset(
    {
        Reason.WAITING_FOR_MEMBERS,
        Reason.WAITING_FOR_PARENT,
        Reason.FOREIGN_GATES,
        Reason.PREEMPTING,
        Reason.RESERVED,
        Reason.BLOCKED_BY_RESERVATION,
        Reason.DEVICES_UNPROVEN,
    }
)
# Phases of a request worth keeping through such a wait (a failed or ended one is not).
_KEPT_PHASES = frozenset({*UNANSWERED, RequestPhase.PROVISIONED, RequestPhase.NOT_FOUND})


def member_shapes(pods: Sequence[Pod]) -> tuple[tuple[MemberShape, ...], str]:
    """Alike members grouped (first met first) and a signature of the groups and their counts."""
    counts: dict[tuple[object, ...], list[Pod]] = {}
    for pod in pods:
        counts.setdefault(member_kind(pod), []).append(pod)
    shapes = tuple(MemberShape(group[0].name, len(group)) for group in counts.values())
    digest = hashlib.sha256(repr(sorted((repr(k), len(v)) for k, v in counts.items())).encode())
    return shapes, digest.hexdigest()[:10]


def request_name(gang: GangKey, signature: str, attempt: int) -> str:
    return f"{gang.name[:_NAME_ROOM]}-{signature}-{attempt}"


def wants_capacity(gang: Gang, decision: Decision | None) -> bool:
    """Does this gang wait for capacity, and for nothing else?"""
    if not isinstance(decision, Wait) or decision.timed_out or decision.reason not in CAPACITY_WAITS:
        return False
    if not decision.may_ask:
        return False  # its queue's limit is spoken for by the gangs asking before it
    live = [m for m in gang.members if is_live(m)]
    return len(live) >= gang.min_member and not gang.admitted and bool(_asked(gang, decision))


def _waits_a_while(decision: Decision | None) -> bool:
    if isinstance(decision, Preempt):
        return True  # its victims are being evicted: it starts once they are gone
    return isinstance(decision, Wait) and not decision.timed_out and decision.reason in _PASSING_WAITS


def _retry_delay(config: ProvisioningConfig, attempt: int) -> float:
    return float(min(config.max_retry_seconds, config.retry_seconds * (2 ** min(attempt, 20))))


def _describe(request: ProvisioningRequestState, retry_in: float | None = None) -> str:
    phase = request.phase
    if phase == RequestPhase.REQUESTED:
        return msg.provisioning_requested(request.name, request.class_name)
    if phase == RequestPhase.ACCEPTED:
        return msg.provisioning_accepted(request.name)
    if phase == RequestPhase.PROVISIONED:
        return msg.provisioning_provisioned(request.name)
    cond = request.condition("Provisioned" if phase == RequestPhase.NOT_FOUND else "Failed")
    if phase == RequestPhase.EXPIRED:
        cond = request.condition("BookingExpired") or request.condition("CapacityRevoked")
    why = msg.provisioning_condition(cond.reason, cond.message) if cond is not None else ""
    if phase == RequestPhase.NOT_FOUND:
        return msg.provisioning_not_found(request.name, why)
    if phase == RequestPhase.FAILED:
        return msg.provisioning_failed(request.name, why, retry_in or 0.0)
    return msg.provisioning_expired(request.name, why)


def decide(
    gangs: Iterable[Gang],
    decisions: Mapping[GangKey, Decision],
    requests: Iterable[ProvisioningRequestState],
    config: ProvisioningConfig,
    now: float,
) -> ProvisioningPlan:
    """What to create and delete so that each gang waiting for capacity has exactly one current
    request, and what each gang's request says."""
    by_gang: dict[GangKey, list[ProvisioningRequestState]] = {}
    for request in requests:
        by_gang.setdefault(request.gang, []).append(request)
    for found in by_gang.values():
        found.sort(key=lambda r: (r.attempt, r.created, r.name))
    create: list[NewRequest] = []
    delete: list[ProvisioningRequestState] = []
    states: dict[GangKey, GangProvisioning] = {}
    recheck: list[float] = []
    seen: set[GangKey] = set()

    def ask(
        gang: Gang, asked: list[Pod], attempt: int, ended: ProvisioningRequestState | None = None
    ) -> None:
        shapes, signature = member_shapes(asked)
        name = request_name(gang.key, signature, attempt)
        create.append(NewRequest(gang.key, name, config.class_name, signature, attempt, shapes))
        states[gang.key] = GangProvisioning(
            name,
            config.class_name,
            RequestPhase.REQUESTED,
            msg.provisioning_requested(name, config.class_name),
            ended,
            _describe(ended) if ended is not None else "",
        )

    for gang in gangs:
        seen.add(gang.key)
        mine = by_gang.get(gang.key, [])
        # Never two requests for one gang: only the newest counts, older ones go.
        current = mine[-1] if mine else None
        delete.extend(mine[:-1])
        decision = decisions.get(gang.key)
        if config.enabled and wants_capacity(gang, decision):
            asked = _asked(gang, decision)
            _, signature = member_shapes(asked)
            if current is None:
                ask(gang, asked, 0)
                continue
            phase = current.phase
            if current.signature != signature:  # the gang grew or shrank while it waited
                delete.append(current)
                ask(gang, asked, current.attempt)
            elif phase == RequestPhase.FAILED:
                failed = current.condition("Failed")
                due = (failed.at if failed is not None else current.created) + _retry_delay(
                    config, current.attempt
                )
                if now >= due:
                    delete.append(current)
                    ask(gang, asked, current.attempt + 1, ended=current)
                else:
                    recheck.append(due - now)
                    states[gang.key] = _state(current, _describe(current, due - now))
            elif phase == RequestPhase.EXPIRED:
                delete.append(current)
                ask(gang, asked, current.attempt + 1, ended=current)
            else:
                states[gang.key] = _state(current, _describe(current))
        elif current is not None and _consuming(gang, decision) and _state(current, "").consumable:
            # Admitted on the room asked for: kept until its members are bound.
            states[gang.key] = _state(current, _describe(current))
        elif (
            current is not None
            and config.enabled
            and _waits_a_while(decision)
            and current.phase in _KEPT_PHASES
            and any(is_live(m) for m in gang.members)  # not a gang whose members are all gone
        ):
            states[gang.key] = _state(current, _describe(current))
        elif current is not None:
            delete.append(current)
    for key, orphaned in by_gang.items():
        if key not in seen:
            delete.extend(orphaned)  # the gang is gone, finished or settled on its nodes
    return ProvisioningPlan(
        create=tuple(create),
        delete=tuple(delete),
        gangs=states,
        recheck_in=min(recheck) if recheck else None,
    )


def _state(request: ProvisioningRequestState, message: str) -> GangProvisioning:
    return GangProvisioning(request.name, request.class_name, request.phase, message)


def _consuming(gang: Gang, decision: Decision | None) -> bool:
    """Admitted now, or admitted with members not bound yet: they consume the booked room."""
    if isinstance(decision, Admit):
        return True
    return bool(gang.admitted) and any(
        m.uid in gang.admitted and is_live(m) and not m.bound for m in gang.members
    )


# The CapacityRequested condition's reason of a gang waiting for capacity with requests off.
REQUESTS_OFF = "ProvisioningRequestsOff"
# ... and with requests on while the API server does not serve them (no autoscaler CRD).
REQUESTS_NOT_SERVED = "ProvisioningRequestsNotServed"


@dataclass(frozen=True, slots=True)
class AutoscalerNote:
    """The PodGroup's CapacityRequested condition: whether the autoscaler was asked, and what it said."""

    requested: bool
    reason: str
    message: str


def autoscaler_note(
    decision: Decision | None, provisioning: GangProvisioning | None, enabled: bool, served: bool = True
) -> AutoscalerNote | None:
    """What a gang's PodGroup says about the cluster-autoscaler (None: nothing to say);
    ``served``: the API server serves ProvisioningRequests (the autoscaler's CRD is installed)."""
    if provisioning is not None:
        return AutoscalerNote(True, provisioning.phase.value, provisioning.message)
    if not isinstance(decision, Wait) or decision.reason not in CAPACITY_WAITS:
        return None
    if not enabled:
        return AutoscalerNote(False, REQUESTS_OFF, msg.autoscaler_blind())
    if not served:
        return AutoscalerNote(False, REQUESTS_NOT_SERVED, msg.provisioning_requests_not_served())
    return None
