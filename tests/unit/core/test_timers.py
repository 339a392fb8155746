"""core/timers.py: what the clock decides about gangs, as data (no shell, no clock)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from controller.core import (
    Admit,
    Gang,
    GangKey,
    Pod,
    Reason,
    Recheck,
    RollBack,
    RollBackCause,
    TimedOut,
    TimerConfig,
    Wait,
    decide_timers,
)
from controller.core.timers import RECHECK_MARGIN

KEY = GangKey("team", "g")
T0 = 1_000_000.0
CONFIG = TimerConfig(bind_timeout=60, degraded_timeout=300)


def member(i: int, node: str | None = None, phase: str = "Pending", gated: bool = False) -> Pod:
    return Pod(f"uid-{i}", "team", f"g-{i}", {"pods": 1}, node_name=node, phase=phase, gated=gated)


def admitted(members: tuple[Pod, ...], **changes: Any) -> Gang:
    """A gang of 4 admitted at T0, every member in its admission."""
    placement: dict[str, str | None] = {p.uid: "node-a" for p in members}
    gang = Gang(KEY, 4, members, admitted=placement, admitted_at=T0, last_admitted_at=T0)
    return replace(gang, **changes)


def test_admitted_members_that_do_not_bind_in_time_are_rolled_back_with_a_sentence() -> None:
    gang = admitted((member(0, "node-a"), member(1, "node-a"), member(2), member(3)))
    (decision,) = decide_timers([gang], {}, T0 + 60, CONFIG)
    assert decision == RollBack(
        KEY, RollBackCause.BIND_TIMEOUT, "only 2 of 4 admitted members bound within 60s"
    )


def test_before_the_bind_timeout_the_gang_is_looked_at_again_when_it_falls_due() -> None:
    gang = admitted((member(0, "node-a"), member(1), member(2), member(3)), last_admitted_at=T0 + 10)
    assert decide_timers([gang], {}, T0 + 30, CONFIG) == (Recheck(KEY, T0 + 70 + RECHECK_MARGIN),)


def test_a_gang_admitted_in_this_pass_is_not_rolled_back() -> None:
    gang = admitted((member(0), member(1), member(2), member(3)))
    admit = Admit(KEY, {}, "placed")
    assert decide_timers([gang], {KEY: admit}, T0 + 600, CONFIG) == ()


def test_a_running_gang_that_lost_a_member_waits_for_its_replacement_not_the_bind_timeout() -> None:
    # Three run; the fourth is gone (no admitted member is left unbound): not the bind timeout's case.
    gang = admitted(tuple(member(i, "node-a", "Running") for i in range(3)))
    assert decide_timers([gang], {}, T0 + 600, CONFIG) == ()


def test_a_gang_degraded_for_the_timeout_is_rolled_back() -> None:
    running = tuple(member(i, "node-a", "Running") for i in range(3))
    gang = admitted(running, degraded_since=T0 + 100)
    assert decide_timers([gang], {}, T0 + 399, CONFIG) == (Recheck(KEY, T0 + 400 + RECHECK_MARGIN),)
    (decision,) = decide_timers([gang], {}, T0 + 400, CONFIG)
    assert decision == RollBack(KEY, RollBackCause.DEGRADED, "ran with 3 of 4 members for 300s")


def test_the_degraded_timeout_can_be_turned_off() -> None:
    gang = admitted(tuple(member(i, "node-a", "Running") for i in range(3)), degraded_since=T0)
    off = TimerConfig(bind_timeout=60, degraded_timeout=0)
    assert decide_timers([gang], {}, T0 + 10_000, off) == ()


def test_a_waiting_gang_is_looked_at_again_when_its_schedule_timeout_falls_due() -> None:
    gang = Gang(KEY, 4, (member(0, gated=True),), schedule_timeout=120, waiting_since=T0)
    wait = Wait(KEY, Reason.WAITING_FOR_MEMBERS, "1 of 4 members exist")
    assert decide_timers([gang], {KEY: wait}, T0 + 5, CONFIG) == (Recheck(KEY, T0 + 120 + RECHECK_MARGIN),)
    # Without a timeout of its own the default counts; with neither, nothing is due, ever.
    bare = Gang(KEY, 4, (member(0, gated=True),), waiting_since=T0)
    assert decide_timers([bare], {KEY: wait}, T0 + 5, CONFIG) == ()
    default = TimerConfig(default_schedule_timeout=30)
    assert decide_timers([bare], {KEY: wait}, T0 + 5, default) == (Recheck(KEY, T0 + 30 + RECHECK_MARGIN),)


def test_a_timed_out_gang_is_reported_and_released_only_with_the_release_action() -> None:
    gang = Gang(KEY, 4, (member(0, gated=True),), schedule_timeout=120, waiting_since=T0)
    wait = Wait(KEY, Reason.SCHEDULING_TIMEOUT, "schedule timeout of 120s passed; 1 of 4 members exist", True)
    report = decide_timers([gang], {KEY: wait}, T0 + 121, CONFIG)
    assert report == (TimedOut(KEY, T0, wait.message, None),)
    release = TimerConfig(release_on_timeout=True)
    (decision,) = decide_timers([gang], {KEY: wait}, T0 + 121, release)
    assert decision == TimedOut(KEY, T0, wait.message, "not admitted within 120s")
