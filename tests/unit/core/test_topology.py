"""A gang held to one topology domain (``Gang.required_topology``): placed inside one domain of a
node label or not at all, with a message that says which domain came closest; its preemption and
its new members stay inside one domain too."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from controller.core import PlannerConfig, plan
from controller.core.model import Admit, GangKey, Preempt, Reason, Short, Wait

from .builders import NOW, GangLike, NodeLike, PodLike, gang, node, pod, snapshot

RACK = "topology.kubernetes.io/rack"
CLIQUE = "nvidia.com/gpu.clique"
G = GangKey("ns", "g")


def run(nodes: Sequence[NodeLike], gangs: Sequence[GangLike], pods: Sequence[PodLike] = ()) -> object:
    config = PlannerConfig(starvation_age_seconds=None)
    return plan(snapshot(nodes, gangs, pods), config)


def decide(nodes: Sequence[NodeLike], gangs: Sequence[GangLike], pods: Sequence[PodLike] = ()) -> object:
    return run(nodes, gangs, pods).for_gang(G)  # type: ignore[attr-defined]


def busy(node_name: str, gpus: int) -> PodLike:
    return pod(f"busy-{node_name}").ns("other").gpus(gpus).on(node_name)


def racks_of(decision: object, nodes: Sequence[NodeLike]) -> set[str]:
    assert isinstance(decision, Admit | Preempt), decision
    built = {n.build().name: n.build() for n in nodes if not isinstance(n, str)}  # type: ignore[union-attr]
    placed = decision.booked.values() if isinstance(decision, Admit) else decision.placement.values()
    return {built[str(name)].labels[RACK] for name in placed}


# Two racks of two 8-GPU nodes; 4 GPUs taken on one node of each: 12 free per rack, 24 in all.
RACKS = [
    node("a1").gpus(8).rack("r1"),
    node("a2").gpus(8).rack("r1"),
    node("b1").gpus(8).rack("r2"),
    node("b2").gpus(8).rack("r2"),
]
HALF_BUSY = [busy("a2", 4), busy("b2", 4)]


def test_the_gang_lands_inside_one_rack() -> None:
    # Free: a1 7, a2 5 (r1: one pod of 4 each), b1 0, b2 4. Best fit across the cluster takes a1
    # (the most room) and then b2 (the least room that fits): two racks. Only r1 holds both.
    pods = [busy("a1", 1), busy("a2", 3), busy("b1", 8), busy("b2", 4)]
    decision = decide(RACKS, [gang("g").min(2).gated_members(2, gpus=4).requires(RACK)], pods)
    assert racks_of(decision, RACKS) == {"r1"}


def test_it_waits_when_only_the_cluster_has_room_and_says_so() -> None:
    g = gang("g").min(4).gated_members(4, gpus=4)
    assert isinstance(decide(RACKS, [g], HALF_BUSY), Admit)  # across racks it fits
    decision = decide(RACKS, [g.requires(RACK)], HALF_BUSY)
    assert isinstance(decision, Wait) and decision.reason == Reason.INSUFFICIENT_CAPACITY
    assert decision.message == (
        "needs 4 pods × 4 nvidia.com/gpu inside one topology.kubernetes.io/rack domain; no single "
        "topology.kubernetes.io/rack domain has 16 free nvidia.com/gpu; the best, r1, has 12; the "
        "cluster as a whole has 24 nvidia.com/gpu free and would fit it across domains"
    )


def test_the_best_domain_is_named_and_the_cluster_count_given_when_it_does_not_fit_either() -> None:
    pods = [busy("a2", 4), busy("b1", 8), busy("b2", 6)]  # r1: 12 free, r2: 2
    decision = decide(RACKS, [gang("g").min(4).gated_members(4, gpus=4).requires(RACK)], pods)
    assert isinstance(decision, Wait) and decision.reason == Reason.INSUFFICIENT_CAPACITY
    assert decision.message.endswith(
        "has 16 free nvidia.com/gpu; the best, r1, has 12; the cluster as a whole has 14 nvidia.com/gpu free"
    )


def test_room_in_pieces_the_pods_do_not_fit_is_said_as_pods() -> None:
    # r1 has 16 free GPUs, but as 6 + 6 + 4: no 7-GPU pod fits there.
    nodes = [node(f"a{k}").gpus(8).rack("r1") for k in range(3)] + [node("b1").gpus(8).rack("r2")]
    pods = [busy("a0", 2), busy("a1", 2), busy("a2", 4), busy("b1", 8)]
    decision = decide(nodes, [gang("g").min(2).gated_members(2, gpus=7).requires(RACK)], pods)
    assert isinstance(decision, Wait)
    assert decision.message.endswith(
        "no single topology.kubernetes.io/rack domain has room for all of them: the best, r1, fits 0"
    )


def test_nodes_without_the_label_are_never_used() -> None:
    nodes = [*RACKS, node("big").gpus(16)]
    decision = decide(nodes, [gang("g").min(4).gated_members(4, gpus=4).requires(RACK)], HALF_BUSY)
    assert isinstance(decision, Wait), decision
    # Across racks (and the unlabelled node) it would fit: the message says so.
    assert decision.message.endswith("would fit it across domains")


def test_any_label_key_makes_domains() -> None:
    nodes = [
        node("a").gpus(4).label(CLIQUE, "c1"),
        node("b").gpus(4).label(CLIQUE, "c2"),
        node("c").gpus(4).label(CLIQUE, "c2"),
    ]
    decision = decide(nodes, [gang("g").min(2).gated_members(2, gpus=4).requires(CLIQUE)])
    assert isinstance(decision, Admit)
    assert sorted(decision.booked.values()) == ["b", "c"]


def test_a_label_no_node_carries_is_unschedulable() -> None:
    decision = decide(RACKS, [gang("g").min(2).gated_members(2).requires("example.com/pod")])
    assert isinstance(decision, Wait) and decision.reason == Reason.UNSCHEDULABLE
    assert decision.message.endswith("no node is labelled example.com/pod")


def test_a_gang_larger_than_any_domain_is_unschedulable() -> None:
    decision = decide(RACKS, [gang("g").min(3).gated_members(3, gpus=8).requires(RACK)])
    assert isinstance(decision, Wait) and decision.reason == Reason.UNSCHEDULABLE
    assert decision.message == (
        "needs 3 pods × 8 nvidia.com/gpu inside one topology.kubernetes.io/rack domain; no "
        "topology.kubernetes.io/rack domain could ever hold them (the largest, r1, holds 2)"
    )


def test_a_failure_inside_one_domain_does_not_fail_the_same_demand_cluster_wide() -> None:
    # The pass's fit memo keys on the requirement: the second gang, alike but free to span racks,
    # must not inherit the first one's failure.
    first = gang("first").min(4).gated_members(4, gpus=4).requires(RACK).created(NOW - 200)
    second = gang("second").min(4).gated_members(4, gpus=4).created(NOW - 100)
    result = run(RACKS, [first, second], HALF_BUSY)
    assert isinstance(result.for_gang(GangKey("ns", "first")), Wait)  # type: ignore[attr-defined]
    assert isinstance(result.for_gang(GangKey("ns", "second")), Admit)  # type: ignore[attr-defined]


def test_elastic_members_stay_inside_the_domain() -> None:
    g = gang("g").min(2).max(4).gated_members(4, gpus=4).requires(RACK)
    decision = decide(RACKS, [g], [busy("a2", 4), busy("b1", 4), busy("b2", 8)])
    assert isinstance(decision, Admit)
    # r1 holds 3 of the 4; the room for a fourth on b1 is in the other rack.
    assert Counter(decision.booked.values()) == Counter({"a1": 2, "a2": 1})


def test_a_replacement_joins_the_running_members_in_their_rack() -> None:
    running = (
        gang("g")
        .min(3)
        .requires(RACK)
        .running_members(["b1", "b1"], gpus=4)
        .admitted({"ns/g-0": "b1", "ns/g-1": "b1"})
        .members(pod("g-2").gpus(4).gated().created(NOW - 5))
    )
    # r2 has room left only on b2 (6 of 8 free); a1 in r1 has 4 free, the tightest fit elsewhere.
    # The replacement goes to b2.
    decision = decide(RACKS, [running], [busy("b2", 2), busy("a1", 4)])
    assert isinstance(decision, Admit) and decision.booked == {"ns/g-2": "b2"}
    # r2 full: it waits for its own rack, though r1 is empty.
    short = decide(RACKS, [running], [busy("b2", 8)])
    assert isinstance(short, Short) and short.reason == Reason.INSUFFICIENT_CAPACITY
    assert short.message == (
        "1 more member needed to reach 3 wait to start together: needs 1 pod × 4 nvidia.com/gpu "
        "inside topology.kubernetes.io/rack=r2, where the gang runs; it has 0 nvidia.com/gpu free; "
        "the cluster as a whole has 16 nvidia.com/gpu free and would fit it across domains"
    )


# ---- preemption inside one domain ---------------------------------------------------------------


def low(name: str, nodes: list[str], gpus: int) -> GangLike:
    return (
        gang(name)
        .min(len(nodes))
        .priority(0)
        .running_members(nodes, gpus=gpus)
        .admitted({f"ns/{name}-{k}": n for k, n in enumerate(nodes)})
    )


def high(n: int, gpus: int) -> GangLike:
    return gang("g").min(n).priority(100).created(NOW - 10).gated_members(n, gpus=gpus)


# a1 runs x (8 GPUs, rack r1), a2 is free; b1 and b2 run y and z (4 GPUs each, rack r2).
VICTIMS = [low("x", ["a1"], 8), low("y", ["b1"], 4), low("z", ["b2"], 4)]


def victims(decision: object) -> list[str]:
    assert isinstance(decision, Preempt), decision
    return sorted(v.gang.name for v in decision.victims if v.gang is not None)


def test_preemption_frees_one_domain_for_a_gang_held_to_it() -> None:
    # Free to span racks, evicting y alone (the cheapest) gives a2 + b1.
    spanning = decide(RACKS, [high(2, 8), *VICTIMS])
    assert victims(spanning) == ["y"]
    assert racks_of(spanning, RACKS) == {"r1", "r2"}
    held = decide(RACKS, [high(2, 8).requires(RACK), *VICTIMS])  # type: ignore[attr-defined]
    # The cheapest way into one rack: y and z (4 + 4 GPUs, r2); x (8 GPUs, r1) stays.
    assert victims(held) == ["y", "z"]
    assert racks_of(held, RACKS) == {"r2"}


def test_victims_outside_every_domain_are_not_counted() -> None:
    # The cheapest victim runs on a node without the label: evicting it cannot help.
    nodes = [node("u").gpus(8), node("a1").gpus(8).rack("r1"), node("a2").gpus(8).rack("r1")]
    gangs = [high(2, 8).requires(RACK), low("w", ["u"], 2), low("x", ["a1"], 8)]  # type: ignore[attr-defined]
    assert victims(decide(nodes, gangs)) == ["x"]


# ---- disruption mode Single -------------------------------------------------------------------------


def test_single_mode_gives_up_single_pods_not_the_gang() -> None:
    nodes = [node("a").gpus(8)]
    four = gang("s").min(4).priority(0).running_members(["a"] * 4, gpus=2)
    four = four.admitted({f"ns/s-{k}": "a" for k in range(4)})
    whole = decide(nodes, [high(1, 4), four])
    assert isinstance(whole, Preempt)
    assert [(len(v.pods), v.whole) for v in whole.victims] == [(4, True)]
    single = decide(nodes, [high(1, 4), four.single_disruption()])
    assert isinstance(single, Preempt)
    assert [(len(v.pods), v.gpus, v.whole) for v in single.victims] == [(2, 4, False)]
    assert single.message.startswith("preempting 2 pods of lower priority: ns/s (2 pods, priority 0)")
