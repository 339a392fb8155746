"""Queues: hierarchical water-filling, order by fair share, limits, reclaim (hand-computed)."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from controller.core import PlannerConfig, plan
from controller.core.model import Admit, GangKey, Plan, Preempt, Queue, Reason, Wait
from controller.core.queues import QueueTree, fair_shares, water_fill

from .builders import GPU, NOW, GangBuilder, GangLike, NodeLike, gang, node, queue, snapshot


def key(name: str, namespace: str = "ns") -> GangKey:
    return GangKey(namespace, name)


def waiting(name: str, q: str | None, gpus: int = 1, n: int = 1, created: float = NOW - 100) -> GangBuilder:
    return gang(name).queue(q).min(n).created(created).gated_members(n, gpus=gpus)


def running(
    name: str,
    q: str | None,
    nodes: Sequence[str],
    gpus: int = 1,
    started: float = NOW - 3600,
    priority: int = 0,
) -> GangBuilder:
    return (
        gang(name)
        .queue(q)
        .min(len(nodes))
        .priority(priority)
        .created(started)
        .running_members(nodes, gpus=gpus, started=started)
        .admitted({f"ns/{name}-{k}": n for k, n in enumerate(nodes)})
    )


def run(nodes: Sequence[NodeLike], gangs: Sequence[GangLike], queues: Sequence[Queue]) -> Plan:
    return plan(snapshot(nodes, gangs, queues=queues), PlannerConfig())


def gpu_nodes(count: int, gpus: int) -> list[NodeLike]:
    return [node(f"n{i}").gpus(gpus) for i in range(count)]


def admitted(result: Plan) -> list[str]:
    return [d.gang.name for d in result.decisions if isinstance(d, Admit)]


# ---- water-filling ---------------------------------------------------------------------------------


def test_water_fill_splits_by_weight_and_respreads_what_a_capped_claim_cannot_take() -> None:
    math_inf = float("inf")
    assert water_fill(10, [(math_inf, 1), (math_inf, 1)]) == [5, 5]
    # 10 by weights 1:1:2 would give 2.5 to the first, capped at 2; the 8 left go 1:2.
    shares = water_fill(10, [(2, 1), (math_inf, 1), (math_inf, 2)])
    assert shares == pytest.approx([2, 8 / 3, 16 / 3])
    assert water_fill(10, [(3, 1), (0, 5), (4, 0)]) == [3, 0, 0]  # nothing beyond the caps


def test_flat_fair_share_gives_quotas_then_splits_the_rest_by_weight() -> None:
    tree = QueueTree({q.name: q for q in [queue("a", gpu=(4, None, 1)), queue("b", gpu=(4, None, 3))]})
    fair = fair_shares(tree, {"a": {GPU: 10}, "b": {GPU: 10}}, {GPU: 12}, [GPU])
    # quotas 4 + 4, the 4 left split 1:3
    assert fair["a"][GPU] == pytest.approx(5)
    assert fair["b"][GPU] == pytest.approx(7)


def test_quotas_beyond_capacity_are_scaled_down_by_quota() -> None:
    tree = QueueTree({q.name: q for q in [queue("a", gpu=(6, None, 1)), queue("b", gpu=(2, None, 1))]})
    fair = fair_shares(tree, {"a": {GPU: 10}, "b": {GPU: 10}}, {GPU: 4}, [GPU])
    assert (fair["a"][GPU], fair["b"][GPU]) == pytest.approx((3, 1))


def test_hierarchical_fair_share_fills_departments_then_their_teams() -> None:
    queues = [
        queue("d", gpu=(6, None, 1)),
        queue("e", gpu=(6, None, 1)),
        queue("t1", "d", gpu=(2, None, 1)),
        queue("t2", "d", gpu=(2, None, 1)),
    ]
    tree = QueueTree({q.name: q for q in queues})
    requested = {"t1": {GPU: 10}, "t2": {GPU: 5}, "d": {GPU: 15}, "e": {GPU: 2}}
    fair = fair_shares(tree, requested, {GPU: 16}, [GPU])
    # root: d 6 + e 2 (all it asks), the 8 left all go to d (e asks no more): d 14, e 2.
    # inside d: quotas 2 + 2, the 10 left 1:1 -- t2 capped at 5 (asks 5), t1 gets the rest: 9.
    assert {q: fair[q][GPU] for q in ("d", "e", "t1", "t2")} == pytest.approx(
        {"d": 14, "e": 2, "t1": 9, "t2": 5}
    )


def test_a_limit_caps_the_fair_share_and_the_parents_claim() -> None:
    queues = [queue("d"), queue("e", gpu=(0, None, 1)), queue("t1", "d", gpu=(2, 3, 1))]
    tree = QueueTree({q.name: q for q in queues})
    fair = fair_shares(tree, {"t1": {GPU: 10}, "d": {GPU: 10}, "e": {GPU: 10}}, {GPU: 8}, [GPU])
    # d can use at most 3 (its only team's limit): e gets the other 5.
    assert (fair["d"][GPU], fair["t1"][GPU], fair["e"][GPU]) == pytest.approx((3, 3, 5))


# ---- order -----------------------------------------------------------------------------------------


def test_queues_take_turns_by_how_far_each_is_below_its_fair_share() -> None:
    queues = [queue("a", gpu=(4, None, 1)), queue("b", gpu=(4, None, 1))]
    gangs = [
        waiting("a1", "a", gpus=2, created=NOW - 50),
        waiting("a2", "a", gpus=2, created=NOW - 49),
        waiting("a3", "a", gpus=2, created=NOW - 48),
        waiting("b1", "b", gpus=2, created=NOW - 40),
        waiting("b2", "b", gpus=2, created=NOW - 39),
    ]
    result = run(gpu_nodes(2, 4), gangs, queues)
    # Without queues the three older gangs of a would go first and b2 would wait.
    assert admitted(result) == ["a1", "b1", "a2", "b2"]
    wait = result.for_gang(key("a3"))
    assert isinstance(wait, Wait) and wait.reason == Reason.INSUFFICIENT_CAPACITY


def test_a_gang_without_a_queue_keeps_its_place_in_todays_order() -> None:
    queues = [queue("a", gpu=(4, None, 1)), queue("b", gpu=(4, None, 1))]
    gangs = [
        waiting("a1", "a", gpus=2, created=NOW - 50),
        waiting("a2", "a", gpus=2, created=NOW - 49),
        waiting("u", None, gpus=2, created=NOW - 45),
        waiting("b1", "b", gpus=2, created=NOW - 40),
    ]
    result = run(gpu_nodes(2, 4), gangs, queues)
    assert admitted(result) == ["a1", "b1", "u", "a2"]


def test_a_queue_that_already_uses_its_share_goes_after_one_that_does_not() -> None:
    queues = [queue("a", gpu=(4, None, 1)), queue("b", gpu=(4, None, 1))]
    gangs = [
        running("a0", "a", ["n0", "n0", "n0", "n0"]),
        waiting("a1", "a", gpus=4, created=NOW - 50),
        waiting("b1", "b", gpus=4, created=NOW - 10),
    ]
    result = run(gpu_nodes(2, 4), gangs, queues)
    assert admitted(result) == ["b1"]


# ---- limits ----------------------------------------------------------------------------------------


def test_a_limit_blocks_a_gang_although_gpus_are_free() -> None:
    queues = [queue("team-a", gpu=(2, 4, 1))]
    gangs = [running("r", "team-a", ["n0"] * 4), waiting("w", "team-a", gpus=2)]
    result = run(gpu_nodes(2, 8), gangs, queues)
    wait = result.for_gang(key("w"))
    assert isinstance(wait, Wait) and wait.reason == Reason.QUEUE_LIMIT
    assert wait.message == "queue team-a is at its limit: 4 of 4 nvidia.com/gpu; the gang needs 2"


def test_a_parents_limit_binds_its_children() -> None:
    queues = [queue("dept", gpu=(0, 4, 1)), queue("t1", "dept"), queue("t2", "dept")]
    gangs = [running("r", "t1", ["n0"] * 3), waiting("w", "t2", gpus=2)]
    result = run(gpu_nodes(2, 8), gangs, queues)
    wait = result.for_gang(key("w"))
    assert isinstance(wait, Wait) and wait.reason == Reason.QUEUE_LIMIT
    assert wait.message == (
        "queue dept (parent of t2) would exceed its limit: 3 of 4 nvidia.com/gpu in use; the gang needs 2"
    )


def test_gangs_admitted_in_one_pass_count_against_the_limit() -> None:
    queues = [queue("a", gpu=(0, 4, 1))]
    gangs = [waiting(f"g{i}", "a", gpus=2, created=NOW - 50 + i) for i in range(3)]
    result = run(gpu_nodes(1, 8), gangs, queues)
    assert admitted(result) == ["g0", "g1"]
    wait = result.for_gang(key("g2"))
    assert isinstance(wait, Wait) and wait.reason == Reason.QUEUE_LIMIT


def test_elastic_members_stop_at_the_limit() -> None:
    queues = [queue("a", gpu=(0, 3, 1))]
    gangs = [gang("e").queue("a").min(2).max(6).gated_members(6, gpus=1)]
    result = run(gpu_nodes(1, 8), gangs, queues)
    decision = result.for_gang(key("e"))
    assert isinstance(decision, Admit) and len(decision.placement) == 3


# ---- which queue ------------------------------------------------------------------------------------


def test_a_gang_naming_a_missing_queue_waits_and_says_so() -> None:
    result = run(gpu_nodes(1, 8), [waiting("w", "nope")], [queue("a")])
    wait = result.for_gang(key("w"))
    assert isinstance(wait, Wait) and wait.reason == Reason.QUEUE_NOT_FOUND
    assert wait.message == "queue nope does not exist"


def test_gangs_go_to_leaf_queues_and_broken_parents_are_named() -> None:
    queues = [queue("dept"), queue("t1", "dept"), queue("orphan", "gone")]
    result = run(gpu_nodes(1, 8), [waiting("w", "dept"), waiting("o", "orphan")], queues)
    w, o = result.for_gang(key("w")), result.for_gang(key("o"))
    assert isinstance(w, Wait) and w.reason == Reason.QUEUE_NOT_FOUND and "has child queues (t1)" in w.message
    assert isinstance(o, Wait) and o.message == "queue orphan has parent gone, which does not exist"


# ---- reclaim ---------------------------------------------------------------------------------------


def borrowed_cluster() -> list[GangBuilder]:
    """Team a (quota 4 of 8 GPUs) runs four 2-pod gangs: it borrows 4 GPUs of team b's quota."""
    return [running(f"a{i}", "a", [f"n{i % 2}", f"n{i % 2}"], started=NOW - 4000 + 100 * i) for i in range(4)]


def test_reclaim_takes_back_the_youngest_borrowed_gang_whole() -> None:
    queues = [queue("a", gpu=(4, None, 1)), queue("b", gpu=(4, None, 1))]
    result = run(gpu_nodes(2, 4), [*borrowed_cluster(), waiting("b1", "b", gpus=1, n=2)], queues)
    decision = result.for_gang(key("b1"))
    assert isinstance(decision, Preempt), decision
    assert [(v.gang, v.pods) for v in decision.victims] == [(key("a3"), ("ns/a3-0", "ns/a3-1"))]
    assert decision.reclaimed_from == ("a",)
    assert decision.message.startswith(
        "reclaiming 2 pods from queues above their fair share: ns/a3 (2 pods, queue a); to place"
    )


def test_reclaim_never_takes_a_victim_queue_below_its_quota() -> None:
    # a's quota is 6: of its 8 GPUs only 2 are borrowed, not enough for b's 4-GPU gang.
    queues = [queue("a", gpu=(6, None, 1)), queue("b", gpu=(4, None, 1))]
    result = run(gpu_nodes(2, 4), [*borrowed_cluster(), waiting("b1", "b", gpus=2, n=2)], queues)
    wait = result.for_gang(key("b1"))
    assert isinstance(wait, Wait) and wait.reason == Reason.INSUFFICIENT_CAPACITY


def test_a_queue_beyond_its_quota_does_not_reclaim() -> None:
    queues = [queue("a", gpu=(4, None, 1)), queue("b", gpu=(1, None, 1))]
    result = run(gpu_nodes(2, 4), [*borrowed_cluster(), waiting("b1", "b", gpus=1, n=2)], queues)
    assert isinstance(result.for_gang(key("b1")), Wait)


def test_reclaim_within_a_department_keeps_the_other_department_at_its_quota() -> None:
    # dept x (quota 8) runs a's borrowed gangs; b (in x too) reclaims from its sibling a,
    # though x as a whole is not below its quota -- the room never leaves x.
    queues = [
        queue("x", gpu=(8, None, 1)),
        queue("a", "x", gpu=(4, None, 1)),
        queue("b", "x", gpu=(4, None, 1)),
    ]
    result = run(gpu_nodes(2, 4), [*borrowed_cluster(), waiting("b1", "b", gpus=1, n=2)], queues)
    decision = result.for_gang(key("b1"))
    assert isinstance(decision, Preempt) and [v.gang for v in decision.victims] == [key("a3")]


def test_priority_preemption_stays_inside_a_queue() -> None:
    queues = [queue("a", gpu=(8, None, 1)), queue("b", gpu=(0, None, 1))]
    low = running("low", "a", ["n0", "n0", "n0", "n0"])
    high_b = waiting("hb", "b", gpus=4).priority(100)
    result = run(gpu_nodes(1, 4), [low, high_b], queues)
    assert isinstance(
        result.for_gang(key("hb")), Wait
    )  # b holds no quota to reclaim, a is not lower-queue prey
    high_a = waiting("ha", "a", gpus=4).priority(100)
    result = run(gpu_nodes(1, 4), [low, high_a], queues)
    decision = result.for_gang(key("ha"))
    assert isinstance(decision, Preempt) and decision.reclaimed_from == ()
    assert [v.gang for v in decision.victims] == [key("low")]


def test_gangs_without_a_queue_preempt_as_today() -> None:
    queues = [queue("a", gpu=(8, None, 1))]
    low = running("low", "a", ["n0"] * 4)
    result = run(gpu_nodes(1, 4), [low, waiting("h", None, gpus=4).priority(100)], queues)
    decision = result.for_gang(key("h"))
    assert isinstance(decision, Preempt) and [v.gang for v in decision.victims] == [key("low")]


# ---- report ----------------------------------------------------------------------------------------


def test_the_plan_reports_usage_fair_share_and_gang_counts_per_queue() -> None:
    queues = [queue("x"), queue("a", "x", gpu=(4, 6, 1)), queue("b", "x", gpu=(2, None, 1))]
    gangs = [
        running("r", "a", ["n0", "n0"]),
        waiting("w", "a", gpus=2, n=2),  # would take a to 6: fits its limit
        waiting("big", "b", gpus=16),  # never fits
    ]
    result = run(gpu_nodes(1, 8), gangs, queues)
    a, b, x = result.queues["a"], result.queues["b"], result.queues["x"]
    assert a.allocated == {GPU: 6, "cpu": 4000, "memory": 4 * 2**30}
    assert a.requested[GPU] == 6 and b.requested[GPU] == 16 and x.requested[GPU] == 22
    assert (a.admitted_gangs, a.waiting_gangs, b.waiting_gangs, x.admitted_gangs, x.waiting_gangs) == (
        2,
        0,
        1,
        2,
        1,
    )
    # 8 GPUs: quotas a 4, b 2; the 2 left 1:1 (a capped at 6 by its limit, b asks 16): a 5, b 3.
    assert (a.fair_share[GPU], b.fair_share[GPU], x.fair_share[GPU]) == pytest.approx((5, 3, 8))


def test_without_queues_the_plan_reports_none() -> None:
    assert run(gpu_nodes(1, 8), [waiting("w", None)], []).queues == {}


def test_kai_sibling_groups_start_together_only_within_the_limit() -> None:
    queues = [queue("a", gpu=(0, 3, 1))]
    children = [gang(f"c{i}").queue("a").parent("p").min(2).gated_members(2, gpus=1) for i in range(2)]
    result = run(gpu_nodes(1, 8), children, queues)
    for i in range(2):
        wait = result.for_gang(key(f"c{i}"))
        assert isinstance(wait, Wait) and wait.reason == Reason.QUEUE_LIMIT
        assert wait.message.startswith("with its sibling groups of parent p: queue a would exceed its limit")
    result = run(gpu_nodes(1, 8), children, [queue("a", gpu=(0, 4, 1))])
    assert admitted(result) == ["c0", "c1"]


@pytest.mark.parametrize("seed", range(30))
def test_no_plan_takes_a_queue_or_its_parent_beyond_its_limit(seed: int) -> None:
    rng = random.Random(seed)
    queues = [queue("d0", gpu=(4, rng.choice([None, 6, 10]), 1)), queue("d1", gpu=(4, None, 1))]
    leaves = []
    for d in ("d0", "d1"):
        for t in range(2):
            name = f"{d}-t{t}"
            leaves.append(name)
            queues.append(queue(name, d, gpu=(2, rng.choice([None, 3, 5]), rng.choice([0, 1, 2]))))
    gangs: list[GangBuilder] = []
    for i in range(12):
        per_pod, size = rng.choice([(1, 1), (1, 2), (2, 2), (4, 1)])
        gangs.append(
            gang(f"g{i}")
            .queue(rng.choice(leaves))
            .min(size)
            .max(size + rng.choice([0, 2]))  # elastic members too
            .created(NOW - 100 + i)
            .gated_members(size + 2, gpus=per_pod)
        )
    result = run(gpu_nodes(3, 8), gangs, queues)
    used: dict[str, int] = {}
    parent = {q.name: q.parent for q in queues}
    by_key = {built.key: built for built in (g.build() for g in gangs)}
    assert any(isinstance(d, Admit) for d in result.decisions)
    for d in result.decisions:
        if isinstance(d, Admit):
            q: str | None = by_key[d.gang].queue
            while q is not None:
                used[q] = used.get(q, 0) + sum(
                    m.requests.get(GPU, 0) for m in by_key[d.gang].members if m.uid in d.placement
                )
                q = parent[q]
    for spec in queues:
        limit = spec.resources[GPU].limit
        assert limit is None or used.get(spec.name, 0) <= limit, (spec.name, used, limit)
        assert result.queues[spec.name].allocated.get(GPU, 0) == used.get(spec.name, 0)


def test_gangs_waiting_for_capacity_ask_the_autoscaler_for_no_more_than_their_queue_allows() -> None:
    """Three 8-GPU gangs of a 16-GPU queue on a cluster with no GPU room: each alone is within the
    limit, but only the first two planned may ask for nodes, under the parent's limit across teams."""
    queues = [queue("dept", gpu=(0, 16, 1)), queue("t1", "dept", gpu=(0, 16, 1)), queue("t2", "dept")]
    gangs = [waiting(f"g{i}", "t1" if i < 2 else "t2", gpus=8, created=NOW - 50 + i) for i in range(3)]
    result = run(gpu_nodes(1, 8), [running("busy", None, ["n0"], gpus=8), *gangs], queues)
    waits = [result.for_gang(key(f"g{i}")) for i in range(3)]
    assert all(isinstance(w, Wait) and w.reason == Reason.INSUFFICIENT_CAPACITY for w in waits), waits
    # Planned in queue turns (g0 of t1, g2 of t2, then g1): the third in that order asks nothing.
    assert [w.may_ask for w in waits if isinstance(w, Wait)] == [True, False, True]
