"""What counts as used room: bound and nominated pods, reservations of admitted gangs, held rooms."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from controller.core import plan
from controller.core.model import Admit, GangKey, Reason, Wait

from .builders import NOW, GangBuilder, NodeLike, PodLike, gang, node, pod, snapshot

G = GangKey("ns", "g")


def admitted_nodes(decision: object) -> list[str]:
    assert isinstance(decision, Admit), decision
    return sorted(decision.booked.values())


def one_gang_on(nodes: Sequence[NodeLike], pods: Sequence[PodLike], gpus: int = 4) -> object:
    s = snapshot(nodes, [gang("g").gated_members(1, gpus=gpus)], pods)
    return plan(s).for_gang(G)


def test_bound_pods_of_any_namespace_hold_room() -> None:
    d = one_gang_on([node("a").gpus(8), node("b").gpus(8)], [pod("x").ns("other").gpus(6).on("a")])
    assert admitted_nodes(d) == ["b"]


def test_nominated_pods_hold_room_on_their_nominated_node() -> None:
    d = one_gang_on([node("a").gpus(8), node("b").gpus(8)], [pod("x").gpus(6).nominated("a")])
    assert admitted_nodes(d) == ["b"]


def test_finished_pods_hold_nothing() -> None:
    pods = [pod("x").gpus(8).on("a").phase("Succeeded"), pod("y").gpus(8).on("a").phase("Failed")]
    assert admitted_nodes(one_gang_on([node("a").gpus(8)], pods)) == ["a"]


def test_terminating_pods_still_hold_room_until_gone() -> None:
    d = one_gang_on([node("a").gpus(8)], [pod("x").gpus(8).on("a").terminating()])
    assert isinstance(d, Wait) and d.reason == Reason.INSUFFICIENT_CAPACITY


def test_pods_on_unknown_nodes_are_ignored() -> None:
    assert admitted_nodes(one_gang_on([node("a").gpus(8)], [pod("x").gpus(8).on("gone")])) == ["a"]


def test_every_resource_counts_cpu_memory_and_pod_slots() -> None:
    nodes = [
        node("a").gpus(8).cpu("4"),
        node("b").gpus(8).pods(1),
        node("c").gpus(8).memory("1Gi"),
        node("d").gpus(8),
    ]
    pods = [
        pod("x").cpu("3500m").on("a"),
        pod("y").cpu("100m").on("b"),
        pod("z").cpu("100m").memory("512Mi").on("c"),
    ]
    assert admitted_nodes(one_gang_on(nodes, pods)) == ["d"]


def test_admitted_unbound_members_reserve_their_room() -> None:
    other = gang("other").gated_members(2, gpus=4).admitted({"ns/other-0": "a", "ns/other-1": "a"}).build()
    # the gates are lifted, the scheduler has not bound them yet
    other = replace(other, members=tuple(replace(m, gated=False) for m in other.members))
    s = snapshot([node("a").gpus(8), node("b").gpus(8)], [other, gang("g").gated_members(1, gpus=4)])
    assert admitted_nodes(plan(s).for_gang(G)) == ["b"]


def test_a_bound_admitted_member_is_not_counted_twice() -> None:
    other = gang("other").running_members(["a"], gpus=4).admitted({"ns/other-0": "a"})
    s = snapshot([node("a").gpus(8)], [other, gang("g").gated_members(1, gpus=4)])
    assert admitted_nodes(plan(s).for_gang(G)) == ["a"]


def test_unpinned_admitted_members_are_counted_on_their_booked_node() -> None:
    other = (
        gang("other")
        .free()
        .gated_members(1, gpus=8)
        .admitted({"ns/other-0": None})
        .booked({"ns/other-0": "a"})
    )
    built = other.build()
    built = replace(built, members=tuple(replace(m, gated=False) for m in built.members))
    s = snapshot([node("a").gpus(8), node("b").gpus(8)], [built, gang("g").gated_members(1, gpus=8)])
    assert admitted_nodes(plan(s).for_gang(G)) == ["b"]


def held(priority: int) -> GangBuilder:
    """A preemptor whose room on node a is held; it cannot use it yet (foreign gate)."""
    return (
        gang("holder")
        .priority(priority)
        .members(pod("h").gpus(8).gated().foreign_gate("other.io/wait"))
        .held({"ns/h": "a"})
    )


def test_held_room_is_closed_to_lower_priority_gangs() -> None:
    s = snapshot([node("a").gpus(8)], [held(10), gang("g").priority(5).gated_members(1, gpus=8)])
    d = plan(s).for_gang(G)
    assert isinstance(d, Wait) and d.reason == Reason.INSUFFICIENT_CAPACITY


def test_held_room_is_open_to_higher_priority_gangs() -> None:
    s = snapshot([node("a").gpus(8)], [held(10), gang("g").priority(20).gated_members(1, gpus=8)])
    assert admitted_nodes(plan(s).for_gang(G)) == ["a"]


def test_held_room_is_open_to_equal_priority_gangs() -> None:
    # Held against gangs of *lower* priority only: an equal-priority gang ordered before the holder
    # (older) may take the room; the holder then preempts again.
    g = gang("g").priority(10).created(NOW - 1000).gated_members(1, gpus=8)
    s = snapshot([node("a").gpus(8)], [held(10), g])
    assert admitted_nodes(plan(s).for_gang(G)) == ["a"]


def test_the_holder_itself_uses_its_held_room() -> None:
    h = gang("holder").priority(10).members(pod("h").gpus(8).gated()).held({"ns/h": "a"})
    low = gang("g").priority(5).created(NOW - 1000).gated_members(1, gpus=8)
    result = plan(snapshot([node("a").gpus(8)], [h, low]))
    assert admitted_nodes(result.for_gang(GangKey("ns", "holder"))) == ["a"]
    assert isinstance(result.for_gang(G), Wait)
