"""Counterfactuals of `kubectl phalanx explain`: each answer is checked by planning with it applied."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.core import PlannerConfig
from controller.core.model import Admit, GangKey, Reason, Short, Snapshot, Wait
from controller.core.whatif import (
    AddDomain,
    AddNodes,
    FreeInDomain,
    FreeOnNode,
    Remove,
    _smallest,
    add_domain,
    add_nodes,
    explain,
    free_in_domain,
    free_on_node,
    remove,
    starts,
    without,
)

from .builders import NOW, gang, node, pod, queue, snapshot

BIG = GangKey("ns", "big")
CFG = PlannerConfig(preemption_min_runtime_seconds=0.0)


def waiting_big(n: int = 8, priority: int = 0) -> object:
    return gang("big").min(n).priority(priority).created(NOW - 10).gated_members(n, gpus=1)


def running(name: str, placement: list[str], priority: int = 0, gpus: int = 1) -> object:
    return (
        gang(name)
        .min(len(placement))
        .priority(priority)
        .created(NOW - 1000)
        .running_members(placement, gpus=gpus)
        .admitted({f"ns/{name}-{k}": n for k, n in enumerate(placement)})
    )


def eight_on_five_free(priority: int = 0) -> Snapshot:
    """One 8-GPU node, 3 GPUs held by a running gang: 5 free, the big gang needs 8."""
    return snapshot(
        [node("a").gpus(8)],
        [running("small", ["a", "a", "a"]), waiting_big(priority=priority)],  # type: ignore[list-item]
    )


def test_smallest_finds_the_first_true_of_a_monotone_predicate() -> None:
    calls: list[int] = []

    def works(n: int) -> bool:
        calls.append(n)
        return n >= 11

    assert _smallest(1, 64, works) == 11
    assert len(calls) < 12  # doubling and bisection, not a scan
    assert _smallest(1, 8, lambda n: False) is None
    assert _smallest(1, 8, lambda n: True) == 1


def test_free_on_node_names_the_missing_gpus_and_who_holds_them() -> None:
    snap = eight_on_five_free()
    assert not starts(snap, BIG, CFG)
    [fix] = free_on_node(snap, BIG, CFG)
    assert (fix.node, fix.resource, fix.amount) == ("a", "nvidia.com/gpu", 3)
    assert [h[0] for h in fix.holders] == ["ns/small-0", "ns/small-1", "ns/small-2"]
    assert all(h[2] == "ns/small" for h in fix.holders)
    # One GPU fewer is not enough: the answer is the smallest.
    fewer = replace(snap.nodes[0], allocatable={**snap.nodes[0].allocatable, "nvidia.com/gpu": 10})
    assert not starts(replace(snap, nodes=(fewer,)), BIG, CFG)


def test_add_nodes_copies_a_node_the_gang_can_use() -> None:
    snap = snapshot(
        [
            node("cpu-only").cpu("32"),
            node("a").gpus(8).label("pool", "x"),
            node("b").gpus(4).label("pool", "x"),
        ],
        [
            running("small", ["a"] * 7 + ["b"] * 4),
            gang("big")
            .min(8)
            .created(NOW - 10)
            .members(*(pod(f"big-{k}").gpus(1).gated().select("pool", "x") for k in range(8))),
        ],
    )
    assert not starts(snap, BIG, CFG)
    fixes = add_nodes(snap, BIG, CFG)
    assert fixes[0] == AddNodes("a", 1, fixes[0].allocatable)
    assert dict(fixes[0].allocatable)["nvidia.com/gpu"] == 8
    # 1 GPU free: one more 8-GPU node will do, or two more 4-GPU nodes.
    assert AddNodes("b", 2, fixes[1].allocatable) == fixes[1]
    assert all(f.like != "cpu-only" for f in fixes)


def test_add_nodes_keeps_the_order_gangs_ahead_take_room_first() -> None:
    ahead = gang("first").min(8).priority(10).created(NOW - 50).gated_members(8, gpus=1)
    snap = snapshot([node("a").gpus(8)], [running("small", ["a"] * 3), ahead, waiting_big()])  # type: ignore[list-item]
    [fix] = add_nodes(snap, BIG, CFG)
    assert fix.count == 2  # the first new node goes to the gang ahead


def test_remove_names_the_lower_priority_gang_and_is_checked() -> None:
    snap = eight_on_five_free(priority=100)
    fix = remove(snap, BIG, CFG)
    assert fix is not None
    [victim] = fix.victims
    assert (victim.label, victim.pods, victim.priority, victim.lower_priority) == ("ns/small", 3, 0, True)
    assert starts(without(snap, {"ns/small-0", "ns/small-1", "ns/small-2"}), BIG, CFG)


def test_remove_marks_equal_priority_work_as_not_preemptible() -> None:
    fix = remove(eight_on_five_free(priority=0), BIG, CFG)
    assert fix is not None
    assert [(v.label, v.lower_priority) for v in fix.victims] == [("ns/small", False)]


def test_remove_is_none_when_nothing_running_is_in_the_way() -> None:
    snap = snapshot([node("a").gpus(4)], [waiting_big()])  # type: ignore[list-item]
    assert remove(snap, BIG, CFG) is None


def test_explain_waiting_gang_place_partial_and_fixes() -> None:
    # Ahead in the order, but too big to ever fit (even with the GPUs freed below).
    ahead = gang("first").min(12).priority(10).created(NOW - 50).gated_members(12, gpus=1)
    snap = snapshot([node("a").gpus(8)], [running("small", ["a"] * 3), ahead, waiting_big()])  # type: ignore[list-item]
    out = explain(snap, BIG, CFG)
    assert isinstance(out.decision, Wait)
    assert out.decision.reason is Reason.INSUFFICIENT_CAPACITY
    assert (out.position, out.of) == (3, 3)  # running gang (same priority, older) and "first" first
    assert out.ahead == (GangKey("ns", "first"),)
    assert out.partial is not None
    assert (out.partial.needed, out.partial.placed, out.partial.nodes) == (8, 5, (("a", 5),))
    kinds = [type(f) for f in out.fixes]
    assert kinds == [FreeOnNode, AddNodes, Remove]


def test_explain_an_admitted_gang_suggests_nothing() -> None:
    snap = snapshot([node("a").gpus(8)], [waiting_big()])  # type: ignore[list-item]
    out = explain(snap, BIG, CFG)
    assert isinstance(out.decision, Admit)
    assert out.fixes == ()
    assert out.partial is None


def test_explain_a_gang_short_of_members_suggests_no_room() -> None:
    snap = snapshot([node("a").gpus(8)], [gang("big").min(4).gated_members(2)])
    out = explain(snap, BIG, CFG)
    assert isinstance(out.decision, Wait) and out.decision.reason is Reason.WAITING_FOR_MEMBERS
    assert out.fixes == ()


def test_explain_a_scaled_up_gang_whose_new_members_wait_suggests_room() -> None:
    # Running with 3 on a 4-GPU node, scaled to 5: its 2 new members wait, together, for room.
    grown = (
        gang("big")
        .min(5)
        .created(NOW - 1000)
        .running_members(["a", "a", "a"])
        .admitted({f"ns/big-{k}": "a" for k in range(3)})
        .gated_members(2, gpus=1, prefix="new")
    )
    out = explain(snapshot([node("a").gpus(4)], [grown]), BIG, CFG)  # type: ignore[list-item]
    assert isinstance(out.decision, Short) and out.decision.reason is Reason.INSUFFICIENT_CAPACITY
    # Nothing else holds room on its node: more nodes (proved by planning with them) is the fix.
    assert [type(f) for f in out.fixes] == [AddNodes]


def test_explain_unknown_gang() -> None:
    with pytest.raises(KeyError):
        explain(snapshot([node("a")]), BIG)


def test_an_elastic_gang_needs_room_for_its_minimum_only() -> None:
    elastic = gang("big").min(7).max(16).created(NOW - 10).gated_members(16, gpus=1)
    snap = snapshot([node("a").gpus(8)], [running("small", ["a"] * 2), elastic])  # type: ignore[list-item]
    assert not starts(snap, BIG, CFG)
    [free] = free_on_node(snap, BIG, CFG)
    assert free.amount == 1  # 6 free + 1 = the minimum of 7, not room for all 16
    [more] = add_nodes(snap, BIG, CFG)
    assert more.count == 1


def test_nodes_the_gang_may_not_use_are_neither_freed_nor_copied() -> None:
    snap = snapshot(
        [node("a").gpus(8), node("t").gpus(8).taint("dedicated", "other")],
        [
            running("small", ["a"] * 3),
            gang("other")
            .min(8)
            .running_members(["t"] * 8)
            .admitted({f"ns/other-{k}": "t" for k in range(8)}),
            waiting_big(),
        ],  # type: ignore[list-item]
    )
    assert [f.node for f in free_on_node(snap, BIG, CFG)] == ["a"]
    assert [f.like for f in add_nodes(snap, BIG, CFG)] == ["a"]


def test_explain_places_the_gang_in_the_order_queues_give_it() -> None:
    # Queue qa already holds 6 GPUs of its share; qb nothing: qb's younger gang goes first.
    qa_running = running("qa-run", ["a"] * 6)
    older = gang("old").queue("qa").min(4).created(NOW - 60).gated_members(4)
    younger = gang("young").queue("qb").min(4).created(NOW - 30).gated_members(4)
    snap = snapshot(
        [node("a").gpus(8), node("b").gpus(8)],
        [qa_running.queue("qa"), older, younger],  # type: ignore[attr-defined]
        queues=[queue("qa", gpu=(4, None, 1.0)), queue("qb", gpu=(4, None, 1.0))],
    )
    out = explain(snap, GangKey("ns", "old"), CFG)
    assert out.ahead == (GangKey("ns", "young"),)
    assert out.position == 3


def test_the_partial_placement_of_a_gang_held_to_one_rack_stays_in_one_rack() -> None:
    nodes = [node("a").gpus(4).rack("r1"), node("b").gpus(4).rack("r2"), node("c").gpus(4).rack("r2")]
    rack = "topology.kubernetes.io/rack"
    # r1 has 4 GPUs free, r2 5 (3 of c's taken): 6 one-GPU pods fit the cluster, not one rack.
    held = gang("big").min(6).gated_members(6, gpus=1).requires(rack)
    out = explain(snapshot(nodes, [held], [pod("busy").ns("other").gpus(3).on("c")]), BIG, CFG)
    assert isinstance(out.decision, Wait) and out.decision.reason is Reason.INSUFFICIENT_CAPACITY
    assert out.partial is not None
    assert (out.partial.needed, out.partial.placed, out.partial.nodes) == (6, 5, (("b", 4), ("c", 1)))


# ---- a gang held to one domain: room inside a domain, or a new domain -----------------------------

RACK = "topology.kubernetes.io/rack"


def held_to_a_rack() -> Snapshot:
    """Racks r1, r2 of two 4-GPU nodes; r1 has 5 GPUs free, r2 3: the cluster has the 8 the gang
    needs, no rack has."""
    nodes = [node(n).gpus(4).rack("r1" if n[0] == "a" else "r2") for n in ("a1", "a2", "b1", "b2")]
    busy = [
        pod("x").ns("other").gpus(3).on("a1"),
        pod("y").ns("other").gpus(4).on("b1"),
        pod("z").ns("other").gpus(1).on("b2"),
    ]
    return snapshot(nodes, [gang("big").min(8).gated_members(8, gpus=1).requires(RACK)], busy)


def test_free_in_domain_names_the_gpus_missing_in_the_best_rack() -> None:
    snap = held_to_a_rack()
    decision = explain(snap, BIG, CFG).decision
    assert isinstance(decision, Wait), decision
    assert f"no single {RACK} domain has 8 free nvidia.com/gpu; the best, r1, has 5" in decision.message
    fixes = free_in_domain(snap, BIG, CFG)
    assert [(f.key, f.value, f.amount) for f in fixes] == [(RACK, "r1", 3), (RACK, "r2", 5)]
    assert [h[0] for h in fixes[0].holders] == ["other/x"]


def test_add_domain_copies_a_rack_with_room_for_the_gang() -> None:
    [fix] = add_domain(held_to_a_rack(), BIG, CFG)[:1]
    assert (fix.key, fix.like, fix.nodes, fix.free) == (RACK, "r1", 2, 8)


def test_explain_offers_both_for_a_gang_held_to_a_rack() -> None:
    fixes = explain(held_to_a_rack(), BIG, CFG).fixes
    assert any(isinstance(f, FreeInDomain) and (f.value, f.amount) == ("r1", 3) for f in fixes), fixes
    assert any(isinstance(f, AddDomain) and (f.like, f.free) == ("r1", 8) for f in fixes), fixes
    # A gang free to span racks starts at once: nothing to suggest.
    spanning = replace(held_to_a_rack(), gangs=(replace(held_to_a_rack().gangs[0], required_topology=None),))
    assert starts(spanning, BIG, CFG)
    assert free_in_domain(spanning, BIG, CFG) == [] and add_domain(spanning, BIG, CFG) == []
