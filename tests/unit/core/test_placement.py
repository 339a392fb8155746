"""Gang placement: all or nothing, packing, topology, pins, and what the messages say."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest

from controller.core import PlannerConfig, plan
from controller.core.model import Admit, GangKey, Reason, Wait

from .builders import GangBuilder, NodeLike, PodBuilder, PodLike, gang, node, pod, req, snapshot

G = GangKey("ns", "g")


def decide(
    nodes: Sequence[NodeLike], g: GangBuilder, pods: Sequence[PodLike] | None = None, **kw: object
) -> object:
    return plan(snapshot(nodes, [g], pods or []), PlannerConfig(**kw)).for_gang(G)  # type: ignore[arg-type]


def per_node(decision: object) -> dict[str, int]:
    assert isinstance(decision, Admit), decision
    return dict(Counter(decision.booked.values()))


def busy(node_name: str, gpus: int, name: str | None = None) -> PodBuilder:
    return pod(name or f"busy-{node_name}").ns("other").gpus(gpus).on(node_name)


# ---- all or nothing ------------------------------------------------------------------------------


def test_five_plus_five_on_eight_gpus_admits_one_and_explains_the_other() -> None:
    s = snapshot(
        [node("a").gpus(8)], [gang("g1").min(5).gated_members(5), gang("g2").min(5).gated_members(5)]
    )
    result = plan(s)
    first, second = result.for_gang(GangKey("ns", "g1")), result.for_gang(GangKey("ns", "g2"))
    assert isinstance(first, Admit) and len(first.placement) == 5
    assert second == Wait(
        GangKey("ns", "g2"),
        Reason.INSUFFICIENT_CAPACITY,
        "needs 5 pods × 1 nvidia.com/gpu; best placement fits 3: a 3",
        asks_for=tuple(f"ns/g2-{k}" for k in range(5)),  # what a capacity request would be for
    )


def test_the_message_of_the_design_document() -> None:
    nodes = [node("node-a").gpus(4), node("node-b").gpus(4), node("node-c").gpus(4)]
    pods = [busy("node-a", 2), busy("node-b", 2), busy("node-c", 3)]
    d = decide(nodes, gang("g").min(8).gated_members(8), pods)
    assert isinstance(d, Wait)
    assert d.reason == Reason.INSUFFICIENT_CAPACITY
    assert d.message == "needs 8 pods × 1 nvidia.com/gpu; best placement fits 5: node-a 2, node-b 2, node-c 1"


def test_nothing_is_admitted_when_the_minimum_does_not_fit() -> None:
    d = decide([node("a").gpus(4)], gang("g").min(5).gated_members(5))
    assert isinstance(d, Wait)


def test_the_message_names_the_binding_resource() -> None:
    # plenty of GPUs, not enough CPU
    nodes = [node("a").gpus(8).cpu("4"), node("b").gpus(8).cpu("4")]
    members = [pod(f"p{k}").gpus(1).cpu("3").gated() for k in range(2)]
    d = decide(nodes, gang("g").min(2).members(*members), [pod("x").ns("other").cpu("2").on("b")])
    assert isinstance(d, Wait)
    assert d.message == "needs 2 pods × 3 cpu; best placement fits 1: a 1"


def test_identical_members_are_grouped_in_the_message() -> None:
    members = [pod("launcher").cpu("2").gated(), *(pod(f"w{k}").gpus(8).gated() for k in range(3))]
    nodes = [node("a").gpus(8), node("b").gpus(8), node("c").gpus(8)]
    d = decide(nodes, gang("g").min(4).members(*members), [busy("b", 1), busy("c", 1)])
    assert isinstance(d, Wait)
    assert d.message == "needs 3 pods × 8 nvidia.com/gpu + 1 pod × 2 cpu; best placement fits 2: a 2"


# ---- packing -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpus", "expected"),
    [(1, "tight"), (3, "mid"), (5, "roomy"), (8, "empty")],
)
def test_best_fit_picks_the_node_left_with_least_room(gpus: int, expected: str) -> None:
    nodes = [node(n).gpus(8) for n in ("empty", "mid", "roomy", "tight")]
    pods = [busy("tight", 7), busy("mid", 4), busy("roomy", 2)]
    d = decide(nodes, gang("g").members(pod("p").gpus(gpus).gated()), pods)
    assert per_node(d) == {expected: 1}


def test_a_gang_that_fits_on_one_node_uses_one_node() -> None:
    nodes = [node("a").gpus(8), node("b").gpus(8), node("c").gpus(8)]
    d = decide(nodes, gang("g").min(4).gated_members(4), [busy("a", 6), busy("b", 6)])
    assert per_node(d) == {"c": 4}


def test_a_gang_spans_as_few_nodes_as_possible() -> None:
    nodes = [node(n).gpus(8) for n in ("a", "b", "c", "d")]
    pods = [busy("a", 7), busy("b", 7), busy("c", 2)]  # free: 1, 1, 6, 8
    d = decide(nodes, gang("g").min(10).gated_members(10), pods)
    assert per_node(d) == {"d": 8, "c": 2}


def test_biggest_members_are_placed_first() -> None:
    # 2 + 2 + 4 on two nodes with 4 free each: smallest-first could split the 4-GPU pod's room
    members = [pod("small-0").gpus(2).gated(), pod("small-1").gpus(2).gated(), pod("big").gpus(4).gated()]
    nodes = [node("a").gpus(8), node("b").gpus(8)]
    d = decide(nodes, gang("g").min(3).members(*members), [busy("a", 4), busy("b", 4)])
    assert isinstance(d, Admit)
    assert d.placement["ns/big"] in ("a", "b")
    assert d.placement["ns/small-0"] == d.placement["ns/small-1"] != d.placement["ns/big"]


def test_cpu_only_gangs_are_placed_too() -> None:
    members = [pod(f"p{k}").cpu("20").gated() for k in range(3)]
    d = decide([node("a").cpu("32"), node("b").cpu("64")], gang("g").min(3).members(*members))
    assert per_node(d) == {"b": 3}


# ---- topology ------------------------------------------------------------------------------------


def test_a_gang_stays_in_one_rack_when_it_fits_there() -> None:
    nodes = [
        node("a1").gpus(8).rack("r1"),
        node("a2").gpus(8).rack("r1"),
        node("b1").gpus(8).rack("r2"),
        node("b2").gpus(8).rack("r2"),
    ]
    pods = [busy("a2", 4), busy("b1", 2), busy("b2", 2)]  # r1 free 12, r2 free 12 but in 6 + 6
    d = decide(nodes, gang("g").min(4).gated_members(4, gpus=3), pods)
    # cluster-wide best fit would take a1 (8 -> two pods) then a2; rack r1 holds all four (a1 2, a2 1... no)
    placed = per_node(d)
    racks = {name[0] for name in placed}
    assert len(racks) == 1


def test_the_tightest_rack_that_fits_is_chosen() -> None:
    nodes = [node(f"{r}{k}").gpus(8).rack(r) for r in ("x", "y", "z") for k in range(2)]
    pods = [busy("x0", 8), busy("x1", 6), busy("y0", 4), busy("z0", 1)]  # x: 2 free, y: 12, z: 15
    d = decide(nodes, gang("g").min(3).gated_members(3, gpus=4), pods)
    assert set(per_node(d)) == {"y0", "y1"}


def test_a_zone_is_preferred_when_no_rack_fits() -> None:
    nodes = [
        node("a").gpus(8).zone("z1").rack("r1"),
        node("b").gpus(8).zone("z1").rack("r2"),
        node("c").gpus(8).zone("z2").rack("r3"),
        node("d").gpus(8).zone("z2").rack("r4"),
    ]
    pods = [busy("a", 4), busy("b", 4), busy("c", 1), busy("d", 1)]
    d = decide(nodes, gang("g").min(2).gated_members(2, gpus=6), pods)
    assert set(per_node(d)) == {"c", "d"}


def test_without_a_single_domain_the_gang_spans_domains() -> None:
    nodes = [node("a").gpus(8).rack("r1"), node("b").gpus(8).rack("r2")]
    d = decide(nodes, gang("g").min(2).gated_members(2, gpus=8))
    assert per_node(d) == {"a": 1, "b": 1}


def test_fewer_nodes_beat_a_tighter_rack() -> None:
    nodes = [node(n).gpus(8).rack(n[0]) for n in ("x0", "x1", "y0", "y1")]
    pods = [busy("x0", 5), busy("y0", 5), busy("y1", 5)]  # x: 3 + 8 free, y: 3 + 3 free
    d = decide(nodes, gang("g").min(2).gated_members(2, gpus=3), pods)
    assert per_node(d) == {"x1": 2}


def test_topology_label_keys_are_configurable() -> None:
    nodes = [node(n).gpus(8).label("example.com/pod", n[0]) for n in ("x0", "x1", "y0", "y1")]
    pods = [busy("x0", 4), busy("x1", 4), busy("y0", 5), busy("y1", 5)]  # x: 4 + 4, y: 3 + 3
    g = gang("g").min(2).gated_members(2, gpus=3)
    assert set(per_node(decide(nodes, g, pods, topologies=(("pods", ("example.com/pod",)),)))) == {"y0", "y1"}
    assert set(per_node(decide(nodes, g, pods))) == {"x0", "y0"}  # no rack labels: best fit only


# ---- pins ----------------------------------------------------------------------------------------


def test_pinned_gangs_get_their_nodes() -> None:
    d = decide([node("a").gpus(8)], gang("g").min(2).gated_members(2))
    assert isinstance(d, Admit)
    assert d.placement == {"ns/g-0": "a", "ns/g-1": "a"}
    assert d.message == "placed 2 pods on 1 node: a 2"
    assert d.notes == ()


def test_free_gangs_get_no_pins_but_a_proven_fit() -> None:
    d = decide([node("a").gpus(8)], gang("g").free().min(2).gated_members(2))
    assert isinstance(d, Admit)
    assert d.placement == {"ns/g-0": None, "ns/g-1": None}
    assert d.booked == {"ns/g-0": "a", "ns/g-1": "a"}
    assert "not pinned" in d.message
    assert isinstance(decide([node("a").gpus(1)], gang("g").free().min(2).gated_members(2)), Wait)


def test_unmodelled_members_are_booked_but_not_pinned() -> None:
    members = [pod("web-0").gpus(4).gated().unmodelled("inter-pod affinity"), pod("web-1").gpus(4).gated()]
    d = decide([node("a").gpus(8)], gang("g").min(2).members(*members))
    assert isinstance(d, Admit)
    assert d.placement == {"ns/web-0": None, "ns/web-1": "a"}
    assert d.booked == {"ns/web-0": "a", "ns/web-1": "a"}
    assert d.notes == ("web-0: inter-pod affinity not modelled, placed without a pin",)


def test_pins_respect_constraints() -> None:
    nodes = [node("a").gpus(8).label("gpu", "a100"), node("b").gpus(8).label("gpu", "h100").taint("x")]
    members = [pod("p").gpus(1).gated().selector(gpu="h100").tolerate("x", operator="Exists")]
    assert per_node(decide(nodes, gang("g").members(*members))) == {"b": 1}


# ---- never fits ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "member", "message"),
    [
        (
            [node("a").gpus(8).label("gpu", "h100")],
            pod("p").gpus(1).gated().selector(gpu="a100"),
            "needs 1 pod × 1 nvidia.com/gpu; no Ready node matches nodeSelector gpu=a100",
        ),
        (
            [
                node("a").gpus(8).taint("nvidia.com/gpu", "present"),
                node("b").gpus(8).taint("dedicated", "infra"),
            ],
            pod("p").gpus(1).gated(),
            "needs 1 pod × 1 nvidia.com/gpu; every node has an untolerated taint "
            "(e.g. dedicated=infra:NoSchedule)",
        ),
        (
            [node("a").gpus(8).label("zone", "z1")],
            pod("p").gpus(1).gated().affinity([req("zone", "In", "z9")]),
            "needs 1 pod × 1 nvidia.com/gpu; no Ready node matches the required node affinity",
        ),
        (
            [node("a").gpus(8).cordoned(), node("b").gpus(8).not_ready()],
            pod("p").gpus(1).gated(),
            "needs 1 pod × 1 nvidia.com/gpu; no node is Ready and schedulable",
        ),
        (
            [node("a").gpus(8)],
            pod("p").gpus(16).gated(),
            "needs 1 pod × 16 nvidia.com/gpu; no node can ever hold a pod of "
            "1 cpu, 1Gi memory, 16 nvidia.com/gpu (largest node: 8 nvidia.com/gpu)",
        ),
        (
            [node("a").gpus(8)],
            pod("p").request("example.com/fpga", 1).gated(),
            "needs 1 pod × 1 example.com/fpga; no node offers example.com/fpga",
        ),
    ],
)
def test_constraint_failures_are_unschedulable(
    nodes: Sequence[NodeLike], member: PodBuilder, message: str
) -> None:
    d = decide(nodes, gang("g").members(member))
    assert isinstance(d, Wait)
    assert (d.reason, d.message) == (Reason.UNSCHEDULABLE, message)


def test_too_big_even_for_an_empty_cluster_is_unschedulable() -> None:
    d = decide([node("a").gpus(8), node("b").gpus(8)], gang("g").min(3).gated_members(3, gpus=8))
    assert isinstance(d, Wait)
    assert (d.reason, d.message) == (
        Reason.UNSCHEDULABLE,
        "needs 3 pods × 8 nvidia.com/gpu; even an empty cluster holds only 2",
    )


def test_daemonset_pods_never_leave_so_they_count_against_an_empty_cluster() -> None:
    ds = pod("ds").ns("kube-system").cpu("2").on("a").owner("DaemonSet")
    d = decide([node("a").gpus(8).cpu("8")], gang("g").members(pod("p").cpu("7").gated()), [ds])
    assert isinstance(d, Wait) and d.reason == Reason.UNSCHEDULABLE


def test_busy_but_possible_is_insufficient_capacity() -> None:
    d = decide([node("a").gpus(8)], gang("g").min(2).gated_members(2, gpus=8), [busy("a", 1)])
    assert isinstance(d, Wait)
    assert d.reason == Reason.UNSCHEDULABLE  # two 8-GPU pods can never fit on one 8-GPU node
    d = decide(
        [node("a").gpus(8), node("b").gpus(8)], gang("g").min(2).gated_members(2, gpus=8), [busy("a", 1)]
    )
    assert isinstance(d, Wait)
    assert (d.reason, d.message) == (
        Reason.INSUFFICIENT_CAPACITY,
        "needs 2 pods × 8 nvidia.com/gpu; best placement fits 1: b 1",
    )


def test_long_node_lists_are_truncated() -> None:
    nodes = [node(f"n{k:02d}").gpus(1) for k in range(12)]
    d = decide(nodes, gang("g").min(11).gated_members(11), [busy("n10", 1), busy("n11", 1)], message_nodes=3)
    assert isinstance(d, Wait)
    assert d.message.endswith("best placement fits 10: n00 1, n01 1, n02 1, … (+7 more nodes)")
