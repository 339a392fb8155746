"""Starvation reservations: an old gang that cannot fit gets nodes kept free for it."""

from __future__ import annotations

from collections.abc import Sequence

from controller.core import PlannerConfig, plan
from controller.core.model import Admit, GangKey, Plan, Reason, Wait

from .builders import NOW, GangBuilder, GangLike, gang, node, pod, snapshot

S = GangKey("ns", "starving")


def key(name: str) -> GangKey:
    return GangKey("ns", name)


def run(gangs: Sequence[GangLike], **cfg: object) -> Plan:
    """Node a: 4 of 8 GPUs busy; node b: 1 of 8 busy (most free room now)."""
    nodes = [node("a").gpus(8), node("b").gpus(8)]
    pods = [pod("x").ns("o").gpus(4).on("a"), pod("y").ns("o").gpus(1).on("b")]
    cfg.setdefault("starvation_age_seconds", 1800)
    cfg.setdefault("preemption", False)
    return plan(snapshot(nodes, gangs, pods), PlannerConfig(**cfg))  # type: ignore[arg-type]


def starving(age: float = 7200, name: str = "starving") -> GangBuilder:
    return gang(name).created(NOW - age).gated_members(1, gpus=8)


def test_a_starving_gang_gets_the_node_with_most_free_room() -> None:
    d = run([starving()]).for_gang(S)
    assert isinstance(d, Wait)
    assert d.reason == Reason.RESERVED
    assert d.reserved_nodes == ("b",)
    assert d.message == (
        "waiting for 2h00m; reserved 1 node (b) until the pods there finish — "
        "needs 1 pod × 8 nvidia.com/gpu; best placement fits 0"
    )


def test_younger_gangs_may_not_use_reserved_nodes() -> None:
    result = run(
        [starving(), gang("needs-b").gated_members(1, gpus=6), gang("fits-a").gated_members(1, gpus=2)]
    )
    blocked = result.for_gang(key("needs-b"))
    assert isinstance(blocked, Wait)
    assert blocked.reason == Reason.BLOCKED_BY_RESERVATION
    assert blocked.message.startswith(
        "would fit, but that room is reserved for starving gang ns/starving; needs 1 pod"
    )
    fits = result.for_gang(key("fits-a"))
    assert isinstance(fits, Admit) and fits.placement == {"ns/fits-a-0": "a"}


def test_higher_priority_gangs_come_first_and_are_not_blocked() -> None:
    result = run([starving(), gang("vip").priority(10).gated_members(1, gpus=6)])
    assert isinstance(result.for_gang(key("vip")), Admit)


def test_a_young_gang_gets_no_reservation() -> None:
    d = run([starving(age=60)]).for_gang(S)
    assert isinstance(d, Wait) and d.reason == Reason.INSUFFICIENT_CAPACITY


def test_reservations_can_be_switched_off() -> None:
    d = run([starving()], starvation_age_seconds=None).for_gang(S)
    assert isinstance(d, Wait) and d.reason == Reason.INSUFFICIENT_CAPACITY


def test_only_the_first_starving_gang_reserves() -> None:
    result = run([starving(), starving(age=5000, name="second")])
    assert result.for_gang(S).reason == Reason.RESERVED  # type: ignore[union-attr]
    second = result.for_gang(key("second"))
    assert isinstance(second, Wait) and second.reason == Reason.INSUFFICIENT_CAPACITY


def test_a_timed_out_gang_gets_no_reservation() -> None:
    g = gang("starving").created(NOW - 7200).timeout(3600).gated_members(1, gpus=8)
    d = run([g]).for_gang(S)
    assert isinstance(d, Wait) and d.timed_out and d.reason == Reason.INSUFFICIENT_CAPACITY


def test_an_unschedulable_gang_gets_no_reservation() -> None:
    g = gang("starving").created(NOW - 7200).gated_members(1, gpus=16)
    d = run([g]).for_gang(S)
    assert isinstance(d, Wait) and d.reason == Reason.UNSCHEDULABLE


def test_a_reservation_spans_as_many_nodes_as_needed() -> None:
    g = gang("starving").min(2).created(NOW - 7200).gated_members(2, gpus=8)
    d = run([g]).for_gang(S)
    assert isinstance(d, Wait)
    assert d.reserved_nodes == ("a", "b")


def test_daemonset_room_is_never_expected_to_free_up() -> None:
    nodes = [node("a").gpus(8).cpu("8"), node("b").gpus(8).cpu("8")]
    pods = [
        pod("ds-b").ns("kube-system").cpu("4").on("b").owner("DaemonSet"),
        pod("x").ns("o").gpus(4).on("a"),
        pod("y").ns("o").gpus(1).on("b"),
    ]
    g = gang("starving").created(NOW - 7200).members(pod("p").gpus(8).cpu("6").gated())
    d = plan(
        snapshot(nodes, [g], pods), PlannerConfig(preemption=False, starvation_age_seconds=1800)
    ).for_gang(S)
    assert isinstance(d, Wait)
    assert d.reserved_nodes == ("a",)  # b has the most free GPUs now, but its DaemonSet keeps 4 cores
