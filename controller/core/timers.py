"""What the clock decides about gangs after a pass: roll back, time out, or look again later.

Pure, as the planner: the gangs, the pass's decisions and ``now`` in, decisions out. The shell
carries them out (controller/pipeline/executor.py) and re-queues each ``Recheck`` for its time.

- An admitted gang whose admitted members did not all bind within the bind timeout is rolled back
  and re-queued whole: its members hold room (pinned, booked) they are not using.
- An admitted gang that has run below minMember for the degraded timeout (a node drained, a member
  evicted, nothing left to bind) is rolled back too: a partial gang holds GPUs and makes no progress
  (as Kueue's waitForPodsReady).
- A waiting gang whose schedule timeout passed is reported once per wait, and with the action
  "release" its members are released.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeAlias

from controller.core import messages as msg
from controller.core.model import Admit, Decision, Gang, GangKey, Wait
from controller.core.state import is_live

# Look again this long after a timeout falls due, so the pass that wakes sees it passed.
RECHECK_MARGIN = 0.05


class RollBackCause(StrEnum):
    """Why an admitted gang is re-queued whole (the ``reason`` label of the rollbacks metric)."""

    BIND_TIMEOUT = "bind_timeout"  # admitted members did not all bind in time
    DEGRADED = "degraded"  # it ran below minMember for the degraded timeout


@dataclass(frozen=True, slots=True)
class TimerConfig:
    bind_timeout: float = 60.0  # seconds from the last admission
    degraded_timeout: float = 300.0  # seconds below minMember; 0: never roll back for it
    default_schedule_timeout: float | None = None  # for gangs that set none; None: wait forever
    release_on_timeout: bool = False  # --schedule-timeout-action release


@dataclass(frozen=True, slots=True)
class RollBack:
    gang: GangKey
    cause: RollBackCause
    message: str  # why, for a person


@dataclass(frozen=True, slots=True)
class TimedOut:
    """A waiting gang's schedule timeout passed: said once per wait (``since`` tells waits apart)."""

    gang: GangKey
    since: float  # start of the wait that timed out
    message: str  # the Wait's own account
    release: str | None  # with action "release": why its members are released; None: report only


@dataclass(frozen=True, slots=True)
class Recheck:
    """Nothing is due yet: look at the gang again at ``at``."""

    gang: GangKey
    at: float


TimerDecision: TypeAlias = RollBack | TimedOut | Recheck


def decide(
    gangs: Iterable[Gang], decisions: Mapping[GangKey, Decision], now: float, config: TimerConfig
) -> tuple[TimerDecision, ...]:
    """Every timer decision of this pass, gang by gang (in the order of ``gangs``)."""
    out: list[TimerDecision] = []
    for gang in gangs:
        decision = decisions.get(gang.key)
        if not isinstance(decision, Admit):
            for found in (_bind_timeout(gang, now, config), _degraded(gang, now, config)):
                if found is not None:
                    out.append(found)
        if isinstance(decision, Wait):
            found = _schedule_timeout(gang, decision, now, config)
            if found is not None:
                out.append(found)
    return tuple(out)


def _due(gang: Gang, due: float, now: float, rollback: RollBack) -> TimerDecision:
    return rollback if now >= due else Recheck(gang.key, due + RECHECK_MARGIN)


def _bind_timeout(gang: Gang, now: float, config: TimerConfig) -> TimerDecision | None:
    if gang.admitted_at is None:
        return None
    bound = sum(1 for p in gang.members if p.bound and not p.finished)
    finished = sum(1 for p in gang.members if p.finished)
    if bound + finished >= gang.min_member:
        return None
    # Only admitted members that have not bound time out. A running gang that lost a member
    # (drained, deleted) waits for its replacement; it is not rolled back for that.
    if not any(p.uid in gang.admitted and is_live(p) and not p.bound for p in gang.members):
        return None
    due = (gang.last_admitted_at or gang.admitted_at) + config.bind_timeout
    message = msg.bind_timed_out(bound, gang.min_member, config.bind_timeout)
    return _due(gang, due, now, RollBack(gang.key, RollBackCause.BIND_TIMEOUT, message))


def _degraded(gang: Gang, now: float, config: TimerConfig) -> TimerDecision | None:
    if config.degraded_timeout <= 0 or gang.degraded_since is None:
        return None
    running = sum(1 for p in gang.members if p.bound and not p.finished and not p.terminating)
    message = msg.degraded_too_long(running, gang.min_member, config.degraded_timeout)
    due = gang.degraded_since + config.degraded_timeout
    return _due(gang, due, now, RollBack(gang.key, RollBackCause.DEGRADED, message))


def _schedule_timeout(gang: Gang, wait: Wait, now: float, config: TimerConfig) -> TimerDecision | None:
    timeout = gang.schedule_timeout or config.default_schedule_timeout
    if wait.timed_out:
        release = msg.not_admitted_within(timeout or 0) if config.release_on_timeout else None
        return TimedOut(gang.key, gang.wait_start, wait.message, release)
    if timeout:
        return Recheck(gang.key, gang.wait_start + timeout + RECHECK_MARGIN)
    return None
