"""Whole-gang preemption of strictly lower-priority work."""

from __future__ import annotations

from collections.abc import Sequence

from controller.core import PlannerConfig, plan
from controller.core.model import Admit, GangKey, Plan, Preempt, Reason, Victim, Wait

from .builders import NOW, GangBuilder, GangLike, NodeLike, PodLike, gang, node, pod, snapshot

H = GangKey("ns", "high")


def key(name: str) -> GangKey:
    return GangKey("ns", name)


def high(gpus: int = 8, n: int = 1, priority: int = 100) -> GangBuilder:
    return gang("high").min(n).priority(priority).created(NOW - 10).gated_members(n, gpus=gpus)


def low(
    name: str, nodes: list[str], gpus: int = 8, priority: int = 0, started: float = NOW - 3600
) -> GangBuilder:
    return (
        gang(name)
        .min(len(nodes))
        .priority(priority)
        .running_members(nodes, gpus=gpus, started=started)
        .admitted({f"ns/{name}-{k}": n for k, n in enumerate(nodes)})
    )


def run(
    nodes: Sequence[NodeLike], gangs: Sequence[GangLike], pods: Sequence[PodLike] | None = None, **cfg: object
) -> Plan:
    cfg.setdefault("starvation_age_seconds", None)
    return plan(snapshot(nodes, gangs, pods or [], budgets=cfg.pop("budgets", None)), PlannerConfig(**cfg))  # type: ignore[arg-type]


def victims_of(d: object) -> list[tuple[str, tuple[str, ...]]]:
    assert isinstance(d, Preempt), d
    return [(v.gang.name if v.gang else "-", v.pods) for v in d.victims]


def test_a_whole_gang_is_preempted() -> None:
    nodes = [node("a").gpus(8), node("b").gpus(8)]
    result = run(nodes, [high(gpus=8), low("low", ["a", "a"], gpus=4)], [pod("x").ns("o").gpus(1).on("b")])
    d = result.for_gang(H)
    assert isinstance(d, Preempt)
    assert d.victims == (Victim(key("low"), ("ns/low-0", "ns/low-1"), "ns", gpus=8),)
    assert d.placement == {"ns/high-0": "a"}
    assert d.message.startswith(
        "preempting 2 pods of lower priority: ns/low (2 pods, priority 0); to place 1 pod × 8"
    )
    # The cost, on the preemptor's status: GPUs evicted for GPUs gained.
    assert (d.gpus_evicted, d.gpus_gained) == (8, 8)
    assert d.message.endswith("; evicts 8 nvidia.com/gpu for 8 gained")


def test_the_cost_is_what_the_victims_held_against_what_the_preemptor_gets() -> None:
    # Node a: 2 GPUs free beside a 2 × 3-GPU gang; a 1 × 4-GPU gang costs that whole gang.
    d = run([node("a").gpus(8)], [high(gpus=4), low("low", ["a", "a"], gpus=3)]).for_gang(H)
    assert isinstance(d, Preempt)
    assert [v.gpus for v in d.victims] == [6]
    assert (d.gpus_evicted, d.gpus_gained) == (6, 4)
    assert d.message.endswith("; evicts 6 nvidia.com/gpu for 4 gained")


def test_nothing_is_preempted_when_the_gang_fits() -> None:
    assert isinstance(
        run([node("a").gpus(8), node("b").gpus(8)], [high(), low("low", ["a"])]).for_gang(H), Admit
    )


def test_policy_never_does_not_preempt() -> None:
    d = run([node("a").gpus(8)], [high().never_preempts(), low("low", ["a"])]).for_gang(H)
    assert isinstance(d, Wait) and d.reason == Reason.INSUFFICIENT_CAPACITY


def test_preemption_can_be_switched_off() -> None:
    assert isinstance(
        run([node("a").gpus(8)], [high(), low("low", ["a"])], preemption=False).for_gang(H), Wait
    )


def test_equal_priority_is_never_preempted() -> None:
    assert isinstance(run([node("a").gpus(8)], [high(priority=0), low("low", ["a"])]).for_gang(H), Wait)


def test_a_non_preemptible_gang_is_never_preempted() -> None:
    assert isinstance(
        run([node("a").gpus(8)], [high(), low("low", ["a"]).not_preemptible()]).for_gang(H), Wait
    )


def test_a_gang_with_a_non_preemptible_pod_is_never_preempted() -> None:
    g = gang("low").min(1).members(pod("low-0").gpus(8).on("a").not_preemptible())
    assert isinstance(run([node("a").gpus(8)], [high(), g]).for_gang(H), Wait)


def test_work_younger_than_the_minimum_runtime_is_never_preempted() -> None:
    young = low("low", ["a"], started=NOW - 60)
    assert isinstance(
        run([node("a").gpus(8)], [high(), young], preemption_min_runtime_seconds=300).for_gang(H), Wait
    )
    assert isinstance(
        run([node("a").gpus(8)], [high(), young], preemption_min_runtime_seconds=30).for_gang(H), Preempt
    )


def test_a_pod_not_yet_started_counts_as_young() -> None:
    g = gang("low").min(1).members(pod("low-0").gpus(8).on("a").started(None))
    assert isinstance(
        run([node("a").gpus(8)], [high(), g], preemption_min_runtime_seconds=300).for_gang(H), Wait
    )


def test_disruption_budgets_are_respected() -> None:
    nodes = [node("a").gpus(8)]
    g = gang("low").min(2).members(*(pod(f"low-{k}").gpus(4).on("a").pdb("ns/train") for k in range(2)))
    assert isinstance(run(nodes, [high(), g], budgets={"ns/train": 1}).for_gang(H), Wait)
    assert isinstance(run(nodes, [high(), g]).for_gang(H), Wait)  # unknown budget: nothing allowed
    assert isinstance(run(nodes, [high(), g], budgets={"ns/train": 2}).for_gang(H), Preempt)


def test_the_lowest_priority_goes_first() -> None:
    gangs = [high(), low("mid", ["a"], priority=50), low("cheap", ["b"], priority=10)]
    assert victims_of(run([node("a").gpus(8), node("b").gpus(8)], gangs).for_gang(H)) == [
        ("cheap", ("ns/cheap-0",))
    ]


def test_then_the_fewest_gpus() -> None:
    gangs = [
        high(gpus=2),
        low("whole", ["a"], gpus=8),
        low("small", ["b"], gpus=2),
        gang("keep").members(pod("keep-0").gpus(6).on("b").not_preemptible()),
    ]
    assert victims_of(run([node("a").gpus(8), node("b").gpus(8)], gangs).for_gang(H)) == [
        ("small", ("ns/small-0",))
    ]


def test_then_the_youngest() -> None:
    gangs = [high(), low("old", ["a"], started=NOW - 9000), low("young", ["b"], started=NOW - 4000)]
    assert victims_of(run([node("a").gpus(8), node("b").gpus(8)], gangs).for_gang(H)) == [
        ("young", ("ns/young-0",))
    ]


def test_victims_the_placement_does_not_need_are_added_back() -> None:
    # "cheap" (1 GPU) goes first in cost order but freeing node a never helps: it is added back.
    gangs = [
        high(),
        low("cheap", ["a"], gpus=1),
        gang("keep").members(pod("keep-0").gpus(7).on("a").not_preemptible()),
        low("whole", ["b"], gpus=8),
    ]
    assert victims_of(run([node("a").gpus(8), node("b").gpus(8)], gangs).for_gang(H)) == [
        ("whole", ("ns/whole-0",))
    ]


def test_only_as_much_as_needed_is_preempted() -> None:
    gangs = [high(gpus=4), low("l1", ["a"], gpus=4, started=NOW - 5000), low("l2", ["a"], gpus=4)]
    assert victims_of(run([node("a").gpus(8)], gangs).for_gang(H)) == [("l2", ("ns/l2-0",))]


def test_elastic_members_above_the_minimum_go_first() -> None:
    elastic = (
        gang("elastic")
        .min(1)
        .max(2)
        .members(
            pod("e-old").gpus(4).on("a").started(NOW - 9000), pod("e-new").gpus(4).on("a").started(NOW - 4000)
        )
    )
    whole = low("whole", ["b"], gpus=4)
    nodes = [node("a").gpus(8), node("b").gpus(4)]
    d = run(nodes, [high(gpus=4), elastic, whole]).for_gang(H)
    assert victims_of(d) == [("elastic", ("ns/e-new",))]


def test_a_gang_is_never_cut_below_its_minimum() -> None:
    elastic = gang("elastic").min(1).members(pod("e0").gpus(4).on("a"), pod("e1").gpus(4).on("a"))
    d = run([node("a").gpus(8)], [high(gpus=8), elastic]).for_gang(H)
    assert victims_of(d) == [("elastic", ("ns/e0", "ns/e1"))]


def test_non_gang_pods_only_in_opted_in_namespaces() -> None:
    nodes = [node("a").gpus(8)]
    opted = pod("batch").ns("ns").gpus(8).on("a")
    assert victims_of(run(nodes, [high()], [opted]).for_gang(H)) == [("-", ("ns/batch",))]
    other = pod("batch").ns("elsewhere").gpus(8).on("a")
    assert isinstance(run(nodes, [high()], [other]).for_gang(H), Wait)


def test_a_held_room_whose_victims_are_gone_admits_the_preemptor() -> None:
    g = high().held({"ns/high-0": "a"})
    assert isinstance(run([node("a").gpus(8)], [g]).for_gang(H), Admit)


def test_a_preemptor_waits_while_its_victims_terminate() -> None:
    g = high().held({"ns/high-0": "a"})
    victim = gang("low").min(1).members(pod("low-0").gpus(8).on("a").terminating())
    d = run([node("a").gpus(8)], [g, victim]).for_gang(H)
    assert d == Wait(H, Reason.PREEMPTING, "waiting for 1 preempted pod to terminate")


def test_later_gangs_do_not_take_the_room_being_freed() -> None:
    nodes = [node("a").gpus(8)]
    gangs = [high(gpus=8), low("low", ["a"], gpus=4), gang("mid").priority(50).gated_members(1, gpus=4)]
    result = run(nodes, gangs)
    assert isinstance(result.for_gang(H), Preempt)
    mid = result.for_gang(key("mid"))
    assert isinstance(mid, Wait)


def test_a_younger_gang_of_equal_priority_does_not_take_a_held_room() -> None:
    holder = gang("h").priority(10).created(NOW - 500).gated_members(1, gpus=8).held({"ns/h-0": "a"})
    younger = gang("q").priority(10).created(NOW - 100).gated_members(1, gpus=4)
    victim = pod("v").ns("ns").gpus(4).on("a").terminating()  # 4 of the 8 GPUs are free already
    result = run([node("a").gpus(8)], [holder, younger], [victim])
    assert result.for_gang(key("h")) == Wait(
        key("h"), Reason.PREEMPTING, "waiting for 1 preempted pod to terminate"
    )
    assert isinstance(result.for_gang(key("q")), Wait)  # behind the holder in the pass order


def test_two_preemptors_never_share_victims() -> None:
    nodes = [node("a").gpus(8), node("b").gpus(8)]
    gangs = [
        high(),
        gang("high2").priority(90).gated_members(1, gpus=8),
        low("l1", ["a"], started=NOW - 5000),
        low("l2", ["b"]),
    ]
    result = run(nodes, gangs)
    first, second = result.for_gang(H), result.for_gang(key("high2"))
    assert victims_of(first) == [("l2", ("ns/l2-0",))]
    assert victims_of(second) == [("l1", ("ns/l1-0",))]


def test_a_gang_that_can_never_fit_does_not_preempt() -> None:
    assert run([node("a").gpus(8)], [high(gpus=16), low("low", ["a"])]).for_gang(H) == Wait(
        H,
        Reason.UNSCHEDULABLE,
        "needs 1 pod × 16 nvidia.com/gpu; no node can ever hold a pod of "
        "1 cpu, 1Gi memory, 16 nvidia.com/gpu (largest node: 8 nvidia.com/gpu)",
        asks_for=("ns/high-0",),
    )


def test_a_timed_out_gang_does_not_preempt() -> None:
    g = high().created(NOW - 1000).timeout(100)
    d = run([node("a").gpus(8)], [g, low("low", ["a"])]).for_gang(H)
    assert isinstance(d, Wait) and d.timed_out


def test_preempt_placement_names_nodes_even_for_free_gangs() -> None:
    g = high().free()
    d = run([node("a").gpus(8)], [g, low("low", ["a"])]).for_gang(H)
    assert isinstance(d, Preempt)
    assert d.placement == {"ns/high-0": "a"}
