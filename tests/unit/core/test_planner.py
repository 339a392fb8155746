"""The pass: validation, members, order, backfill, elastic growth, replacements, parents, timeouts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from controller.core import PlannerConfig, invalid_spec, plan
from controller.core.model import Admit, GangKey, Plan, Preempt, Reason, Reject, Short, Wait

from .builders import NOW, GangBuilder, GangLike, NodeLike, PodLike, gang, node, pod, snapshot

G = GangKey("ns", "g")


def key(name: str) -> GangKey:
    return GangKey("ns", name)


def run(
    nodes: Sequence[NodeLike], gangs: Sequence[GangLike], pods: Sequence[PodLike] | None = None, **cfg: object
) -> Plan:
    return plan(snapshot(nodes, gangs, pods or []), PlannerConfig(**cfg))  # type: ignore[arg-type]


# ---- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("builder", "message"),
    [
        (gang("g").min(0), "minMember is 0; it must be at least 1"),
        (gang("g").min(3).max(2), "maxMember 2 is below minMember 3"),
        (gang("g").min(3).creatable(2), "minMember is 3 but the workload can only ever create 2 members"),
    ],
)
def test_invalid_specs_are_rejected(builder: GangBuilder, message: str) -> None:
    d = run([node("a").gpus(8)], [builder.gated_members(3)]).for_gang(G)
    assert d == Reject(G, Reason.INVALID_SPEC, message)


def test_valid_specs() -> None:
    assert invalid_spec(gang("g").min(3).max(3).creatable(3).build()) is None
    assert invalid_spec(gang("g").min(1).creatable(None).build()) is None


# ---- members -------------------------------------------------------------------------------------


def test_waiting_for_members_counts_live_members_only() -> None:
    members = [
        pod("a").gpus(1).gated(),
        pod("b").gpus(1).gated(),
        pod("c").gpus(1).gated().terminating(),
        pod("d").gpus(1).phase("Failed"),
    ]
    d = run([node("n").gpus(8)], [gang("g").min(3).members(*members)]).for_gang(G)
    assert d == Wait(G, Reason.WAITING_FOR_MEMBERS, "2 of 3 members exist")


def test_waiting_for_members_that_could_never_run_together_says_so() -> None:
    # 221 of 10000 exist; 10000 one-GPU pods can never run on 16 GPUs: that is the news, not "221 of".
    g = gang("g").min(10000).gated_members(221)
    d = run([node("a").gpus(8), node("b").gpus(8)], [g]).for_gang(G)
    assert isinstance(d, Wait) and d.reason == Reason.UNSCHEDULABLE
    assert d.message.startswith("221 of 10000 members exist, and all 10000 could never run together: ")
    assert "even an empty cluster holds only 16" in d.message
    # The same gang on a cluster that could hold it just waits for its members.
    d = run([node(f"n{i}").gpus(8) for i in range(1250)], [g]).for_gang(G)
    assert d == Wait(G, Reason.WAITING_FOR_MEMBERS, "221 of 10000 members exist")


def test_min_resources_count_only_nodes_the_members_may_use() -> None:
    members = [pod(f"g-{k}").gpus(1).gated().selector(pool="a") for k in range(2)]
    g = gang("g").min(2).min_resources(gpu=8).members(*members)
    nodes = [node("a").gpus(8).label("pool", "a"), node("b").gpus(8).label("pool", "b")]
    busy = pod("busy").gpus(3).on("a")
    # 13 GPUs are free in the cluster, but only 5 where the members may run.
    d = run(nodes, [g], pods=[busy]).for_gang(G)
    assert isinstance(d, Wait) and d.message.endswith("8 nvidia.com/gpu free where its pods may run, 5 are")


def test_min_resources_hold_a_gang_until_that_much_is_free_in_the_cluster() -> None:
    busy = pod("busy").gpus(3).on("a")
    g = gang("g").min(2).min_resources(gpu=8).gated_members(2)
    # The two members fit (5 GPUs free), but the group asked for 8 free before it starts.
    d = run([node("a").gpus(8)], [g], pods=[busy]).for_gang(G)
    assert d == Wait(
        G,
        Reason.INSUFFICIENT_CAPACITY,
        "minResources needs 8 nvidia.com/gpu free where its pods may run, 5 are",
    )
    d = run([node("a").gpus(8)], [g]).for_gang(G)
    assert isinstance(d, Admit)


def test_foreign_gates_block_admission_and_are_named() -> None:
    members = [pod("a").gpus(1).gated().foreign_gate("kueue.x-k8s.io/admission"), pod("b").gpus(1).gated()]
    d = run([node("n").gpus(8)], [gang("g").min(2).members(*members)]).for_gang(G)
    assert d == Wait(
        G, Reason.FOREIGN_GATES, "members carry scheduling gates of other systems: kueue.x-k8s.io/admission"
    )


def test_ungated_pending_members_count_towards_the_minimum() -> None:
    members = [pod("a").gpus(1), pod("b").gpus(1).gated(), pod("c").gpus(1).gated()]
    d = run([node("n").gpus(8)], [gang("g").min(3).members(*members)]).for_gang(G)
    assert isinstance(d, Admit)
    assert set(d.placement) == {"ns/b", "ns/c"}


# ---- order and backfill --------------------------------------------------------------------------


def test_priority_beats_age() -> None:
    old = gang("old").created(NOW - 1000).gated_members(1, gpus=8)
    vip = gang("vip").priority(100).created(NOW - 1).gated_members(1, gpus=8)
    result = run([node("a").gpus(8)], [old, vip])
    assert isinstance(result.for_gang(key("vip")), Admit)
    assert isinstance(result.for_gang(key("old")), Wait)
    assert [d.gang.name for d in result.decisions] == ["vip", "old"]


def test_age_then_name_break_ties() -> None:
    gangs = [gang(n).created(NOW - 10).gated_members(1, gpus=8) for n in ("b", "a")]
    gangs.append(gang("c").created(NOW - 20).gated_members(1, gpus=8))
    result = run([node("n").gpus(8)], gangs)
    assert [d.gang.name for d in result.decisions] == ["c", "a", "b"]
    assert isinstance(result.decisions[0], Admit)


def test_a_podgroups_own_priority_reorders_its_namespace_only() -> None:
    """The PodGroup's own priority re-ranks gangs among the places its namespace already holds."""
    gangs = [
        gang("a1").ns("a").created(NOW - 40).gated_members(1, gpus=8),
        gang("b1").ns("b").created(NOW - 30).gated_members(1, gpus=8),
        gang("a2").ns("a").created(NOW - 20).local_priority(10**9).gated_members(1, gpus=8),
        gang("b2").ns("b").created(NOW - 10).gated_members(1, gpus=8),
    ]
    result = run([node("n").gpus(8)], gangs)
    # a2 jumps its own namespace's a1, never b1: the first place stays namespace a's.
    assert [str(d.gang) for d in result.decisions] == ["a/a2", "b/b1", "a/a1", "b/b2"]
    assert isinstance(result.for_gang(GangKey("a", "a2")), Admit)


def test_a_podgroups_own_priority_preempts_nothing() -> None:
    running = gang("run").ns("b").created(NOW - 900).running_members(["n"], gpus=8)
    claim = gang("claim").ns("a").local_priority(10**9).gated_members(1, gpus=8)
    result = run([node("n").gpus(8)], [running, claim])
    assert isinstance(result.for_gang(GangKey("a", "claim")), Wait)
    governed = gang("claim").ns("a").priority(1000).gated_members(1, gpus=8)
    result = run([node("n").gpus(8)], [running, governed])
    assert isinstance(result.for_gang(GangKey("a", "claim")), Preempt)


def test_backfill_a_gang_that_does_not_fit_does_not_block_smaller_ones() -> None:
    big = gang("big").min(2).created(NOW - 100).gated_members(2, gpus=8)
    small = gang("small").created(NOW - 50).gated_members(1, gpus=2)
    result = run([node("a").gpus(8), node("b").gpus(8)], [big, small], [pod("x").ns("o").gpus(1).on("a")])
    assert isinstance(result.for_gang(key("big")), Wait)
    assert isinstance(result.for_gang(key("small")), Admit)


def test_a_pass_books_what_it_admits() -> None:
    gangs = [gang(f"g{k}").created(NOW - 10 + k).gated_members(1, gpus=4) for k in range(3)]
    result = run([node("a").gpus(8)], gangs)
    assert [type(d).__name__ for d in result.decisions] == ["Admit", "Admit", "Wait"]


def test_cordoned_and_not_ready_nodes_are_never_used() -> None:
    result = run(
        [node("a").gpus(8).cordoned(), node("b").gpus(8).not_ready(), node("c").gpus(1)],
        [gang("g").gated_members(1, gpus=2)],
    )
    d = result.for_gang(G)
    assert isinstance(d, Wait)
    assert d.reason == Reason.UNSCHEDULABLE


# ---- elastic -------------------------------------------------------------------------------------


def test_elastic_members_are_admitted_with_the_minimum_when_they_fit() -> None:
    d = run([node("a").gpus(3)], [gang("g").min(2).max(4).gated_members(4)]).for_gang(G)
    assert isinstance(d, Admit)
    assert sorted(d.placement) == ["ns/g-0", "ns/g-1", "ns/g-2"]


def test_elastic_members_never_exceed_max_member() -> None:
    d = run([node("a").gpus(8)], [gang("g").min(2).max(3).gated_members(5)]).for_gang(G)
    assert isinstance(d, Admit)
    assert len(d.placement) == 3


def test_without_max_member_every_gated_member_may_start() -> None:
    d = run([node("a").gpus(8)], [gang("g").min(2).gated_members(5)]).for_gang(G)
    assert isinstance(d, Admit) and len(d.placement) == 5


def test_elastic_growth_needs_the_minimum_first() -> None:
    d = run([node("a").gpus(1)], [gang("g").min(2).max(4).gated_members(4)]).for_gang(G)
    assert isinstance(d, Wait)


# ---- KAI subgroups --------------------------------------------------------------------------------


def in_subgroup(name: str, *members: str) -> list[PodLike]:
    label = {"kai.scheduler/subgroup-name": name}
    return [
        replace(pod(m).gpus(1).gated().created(NOW - 100 + i).build(), labels=label)
        for i, m in enumerate(members)
    ]


def test_a_gang_waits_until_each_subgroup_has_its_minimum() -> None:
    members = in_subgroup("workers", "w-0", "w-1", "w-2")
    g = gang("g").min(3).subgroups(launcher=1, workers=2).members(*members)
    d = run([node("a").gpus(8)], [g]).for_gang(G)
    assert d == Wait(G, Reason.WAITING_FOR_MEMBERS, "subgroup launcher: 0 of 1 members exist")


def test_the_start_holds_each_subgroups_minimum_before_older_members() -> None:
    # Room for 2. By age alone the start would be a-0 and a-1, and subgroup b would have none.
    members = [*in_subgroup("a", "a-0", "a-1", "a-2"), *in_subgroup("b", "b-0")]
    members[-1] = replace(members[-1], created=NOW)  # the youngest
    g = gang("g").min(2).max(4).subgroups(a=1, b=1).members(*members)
    d = run([node("n").gpus(2)], [g]).for_gang(G)
    assert isinstance(d, Admit) and sorted(d.placement) == ["ns/a-0", "ns/b-0"]


def test_subgroup_minimums_above_min_member_are_all_required() -> None:
    members = [*in_subgroup("a", "a-0", "a-1"), *in_subgroup("b", "b-0", "b-1")]
    g = gang("g").min(1).max(4).subgroups(a=2, b=2).members(*members)
    assert isinstance(run([node("n").gpus(3)], [g]).for_gang(G), Wait)  # 4 needed, room for 3
    d = run([node("n").gpus(4)], [g]).for_gang(G)
    assert isinstance(d, Admit) and len(d.placement) == 4


# ---- already admitted ----------------------------------------------------------------------------


def admitted_gang(
    extra: Sequence[PodLike], min_member: int = 2, max_member: int | None = None
) -> GangBuilder:
    g = (
        gang("g")
        .min(min_member)
        .max(max_member)
        .running_members(["a", "a"])
        .admitted({"ns/g-0": "a", "ns/g-1": "a"})
    )
    return g.members(*extra)


def test_an_admitted_gang_with_nothing_new_gets_no_decision() -> None:
    assert run([node("a").gpus(8)], [admitted_gang([])]).decisions == ()


def test_a_replacement_member_is_admitted_on_its_own() -> None:
    replacement = pod("g-1b").gpus(1).gated().created(NOW - 5)
    failed = replace(pod("g-1").gpus(1).on("a").phase("Failed").build(), group="g")
    g = (
        gang("g")
        .min(2)
        .running_members(["a"])
        .admitted({"ns/g-0": "a", "ns/g-1": "a"})
        .members(failed, replacement)
    )
    d = run([node("a").gpus(2), node("b").gpus(1)], [g]).for_gang(G)
    assert isinstance(d, Admit)
    assert d.placement == {"ns/g-1b": "a"}
    assert d.message == "admitted 1 new member: a 1"


def test_elastic_growth_of_an_admitted_gang_up_to_max_member() -> None:
    extra = [pod(f"new-{k}").gpus(1).gated() for k in range(3)]
    d = run([node("a").gpus(8)], [admitted_gang(extra, max_member=4)]).for_gang(G)
    assert isinstance(d, Admit)
    assert sorted(d.placement) == ["ns/new-0", "ns/new-1"]


def test_an_admitted_gang_at_max_member_gets_no_decision() -> None:
    extra = [pod("new-0").gpus(1).gated()]
    assert run([node("a").gpus(8)], [admitted_gang(extra, max_member=2)]).decisions == ()


def test_new_members_are_admitted_one_by_one_as_they_fit() -> None:
    extra = [pod(f"new-{k}").gpus(2).gated() for k in range(3)]
    d = run([node("a").gpus(6)], [admitted_gang(extra)]).for_gang(G)
    assert isinstance(d, Admit)
    assert sorted(d.placement) == ["ns/new-0", "ns/new-1"]
    assert d.message == "admitted 2 new members: a 2; 1 more wait for room"


def ended_run(phase: str) -> list[PodLike]:
    """Four members of an earlier run that all ended, still listed in the admission record."""
    return [replace(pod(f"old-{k}").gpus(4).on("a").phase(phase).build(), group="g") for k in range(4)]


def test_after_a_run_ends_new_members_must_form_the_gang_whole() -> None:
    old = ended_run("Failed")
    # No admitted member alive: the shell reports admitted_at None.
    g = (
        gang("g")
        .min(4)
        .members(*old)
        .gated_members(4, gpus=4, prefix="new")
        .admitted({f"ns/old-{k}": "a" for k in range(4)}, at=None)
    )
    other = pod("other").ns("x").gpus(8).on("a")  # half the room is taken: 2 of 4 fit
    d = run([node("a").gpus(8), node("b").gpus(8)], [g], [other]).for_gang(G)
    assert isinstance(d, Wait)
    assert d.reason is Reason.INSUFFICIENT_CAPACITY  # never 2 of 4 "replacements"


def test_a_gang_whose_run_is_over_gets_no_decision() -> None:
    g = (
        gang("g")
        .min(4)
        .members(*ended_run("Succeeded"))
        .admitted({f"ns/old-{k}": "a" for k in range(4)}, at=None)
    )
    assert run([node("a").gpus(16)], [g]).decisions == ()


def test_an_admitted_gang_never_gets_a_wait() -> None:
    # an elastic member that does not fit just stays gated: the gang itself stays admitted
    assert run([node("a").gpus(2)], [admitted_gang([pod("new").gpus(1).gated()])]).decisions == ()
    # one it needs (a replacement) is said to wait, as Short, never as Wait
    d = run([node("a").gpus(2)], [admitted_gang([pod("new").gpus(1).gated()], min_member=3)]).for_gang(G)
    assert isinstance(d, Short)


# ---- an admitted gang re-sized (its workload scaled) or short of lost members -------------------


def test_members_a_scale_up_adds_start_together_when_all_fit() -> None:
    new = [pod(f"new-{k}").gpus(2).gated() for k in range(2)]
    d = run([node("a").gpus(8)], [admitted_gang(new, min_member=4)]).for_gang(G)
    assert isinstance(d, Admit)
    assert sorted(d.placement) == ["ns/new-0", "ns/new-1"]


def test_members_a_scale_up_adds_never_start_one_by_one() -> None:
    # Room for one of the two members the gang now needs: neither starts (before re-sizing, the
    # first would have been admitted on its own), and the gang says why; its members keep running.
    new = [pod(f"new-{k}").gpus(2).gated() for k in range(2)]
    d = run([node("a").gpus(5)], [admitted_gang(new, min_member=4)]).for_gang(G)  # 3 GPUs free
    assert isinstance(d, Short)
    assert d.reason is Reason.INSUFFICIENT_CAPACITY
    assert d.missing == 2
    assert d.message == (
        "2 more members needed to reach 4 wait to start together: "
        "needs 2 pods × 2 nvidia.com/gpu; best placement fits 1: a 1"
    )


def test_members_a_scale_up_adds_wait_until_the_workload_made_them_all() -> None:
    d = run([node("a").gpus(8)], [admitted_gang([pod("new-0").gpus(1).gated()], min_member=4)]).for_gang(G)
    assert isinstance(d, Short)
    assert d.reason is Reason.WAITING_FOR_MEMBERS
    assert (
        d.message == "2 more members needed to reach 4; 1 created so far: they start together once all exist"
    )


def test_beyond_the_new_size_members_are_elastic_again() -> None:
    # Needs one more to reach 3; the two after it join as they fit (room for 2 of the 3 here).
    new = [pod(f"new-{k}").gpus(2).gated() for k in range(3)]
    d = run([node("a").gpus(6)], [admitted_gang(new, min_member=3)]).for_gang(G)
    assert isinstance(d, Admit)
    assert sorted(d.placement) == ["ns/new-0", "ns/new-1"]
    assert d.message == "admitted 2 new members: a 2; 1 more wait for room"


def test_replacements_of_several_lost_members_start_together() -> None:
    lost = [pod(f"g-{k}b").gpus(4).gated() for k in (2, 3)]
    g = (
        gang("g")
        .min(4)
        .running_members(["a", "a"], gpus=4)
        .admitted({f"ns/g-{k}": "a" for k in range(4)})
        .members(*lost)
    )
    d = run([node("a").gpus(8), node("b").gpus(4)], [g]).for_gang(G)
    assert isinstance(d, Short)
    assert d.reason is Reason.INSUFFICIENT_CAPACITY
    d = run([node("a").gpus(8), node("b").gpus(8)], [g]).for_gang(G)
    assert isinstance(d, Admit)
    assert d.placement == {"ns/g-2b": "b", "ns/g-3b": "b"}


# ---- timeouts ------------------------------------------------------------------------------------


def test_a_gang_past_its_timeout_waits_with_timed_out() -> None:
    g = gang("g").min(2).created(NOW - 700).timeout(600).gated_members(2, gpus=8)
    d = run([node("a").gpus(8), node("b").gpus(8)], [g], [pod("x").ns("o").gpus(1).on("a")]).for_gang(G)
    assert isinstance(d, Wait)
    assert d.timed_out
    assert (
        d.message
        == "schedule timeout of 10m passed; needs 2 pods × 8 nvidia.com/gpu; best placement fits 1: b 1"
    )


def test_the_default_timeout_applies_when_the_gang_sets_none() -> None:
    g = gang("g").min(3).created(NOW - 100).gated_members(2)
    assert run([node("a").gpus(8)], [g], default_schedule_timeout=60).for_gang(G) == Wait(
        G, Reason.WAITING_FOR_MEMBERS, "schedule timeout of 60s passed; 2 of 3 members exist", timed_out=True
    )
    d = run([node("a").gpus(8)], [g], default_schedule_timeout=600).for_gang(G)
    assert isinstance(d, Wait) and not d.timed_out


def test_the_timeout_counts_from_the_start_of_the_current_wait() -> None:
    # Created long ago, waiting again since it was preempted 100 s ago: not timed out yet.
    g = gang("g").min(3).created(NOW - 7200).waiting_since(NOW - 100).timeout(600).gated_members(2)
    d = run([node("a").gpus(8)], [g]).for_gang(G)
    assert isinstance(d, Wait) and not d.timed_out
    d = run([node("a").gpus(8)], [g.waiting_since(NOW - 601)]).for_gang(G)
    assert isinstance(d, Wait) and d.timed_out


def test_a_timed_out_gang_that_fits_is_still_admitted() -> None:
    g = gang("g").created(NOW - 700).timeout(600).gated_members(1)
    assert isinstance(run([node("a").gpus(8)], [g]).for_gang(G), Admit)


# ---- parent groups -------------------------------------------------------------------------------


def family(c2_members: int = 2, parent_min: int | None = 2) -> list[GangLike]:
    gangs: list[GangLike] = [
        gang("c1").min(2).parent("p").created(NOW - 20).gated_members(2, gpus=2),
        gang("c2").min(2).parent("p").created(NOW - 10).gated_members(c2_members, gpus=2),
    ]
    if parent_min is not None:
        gangs.append(gang("p").min(parent_min))
    return gangs


def test_sibling_groups_are_admitted_together() -> None:
    result = run([node("a").gpus(8)], family())
    assert {d.gang.name for d in result.decisions} == {"c1", "c2"}  # none for the parent
    for d in result.decisions:
        assert isinstance(d, Admit)
        assert d.message.startswith("admitted with its sibling groups of parent p; placed 2 pods")


def test_a_child_never_starts_without_its_siblings() -> None:
    result = run([node("a").gpus(8)], family(c2_members=1))
    expected = "1 of 2 sibling groups of parent p are ready (c2: 1 of 2 members exist)"
    assert result.for_gang(key("c1")) == Wait(key("c1"), Reason.WAITING_FOR_PARENT, expected)
    assert result.for_gang(key("c2")) == Wait(key("c2"), Reason.WAITING_FOR_PARENT, expected)


def test_a_lone_child_without_a_parent_object_waits() -> None:
    g = gang("c1").min(1).parent("p").gated_members(1)
    d = run([node("a").gpus(8)], [g]).for_gang(key("c1"))
    assert isinstance(d, Wait) and d.reason == Reason.WAITING_FOR_PARENT


def test_siblings_are_all_or_nothing() -> None:
    result = run([node("a").gpus(8)], family(), [pod("x").ns("o").gpus(2).on("a")])
    for name in ("c1", "c2"):
        d = result.for_gang(key(name))
        assert isinstance(d, Wait)
        assert d.reason == Reason.INSUFFICIENT_CAPACITY
        assert (
            d.message == "with its sibling groups of parent p: "
            "needs 4 pods × 2 nvidia.com/gpu; best placement fits 3: a 3"
        )


def test_the_parent_min_member_counts_children() -> None:
    gangs = [*family(c2_members=1, parent_min=None), gang("p").min(1)]
    result = run([node("a").gpus(8)], gangs)
    assert isinstance(result.for_gang(key("c1")), Admit)
    assert result.for_gang(key("c2")) == Wait(key("c2"), Reason.WAITING_FOR_MEMBERS, "1 of 2 members exist")


def test_once_a_sibling_runs_the_others_start_on_their_own() -> None:
    running = gang("c1").min(1).parent("p").running_members(["a"]).admitted({"ns/c1-0": "a"})
    late = gang("c2").min(1).parent("p").gated_members(1)
    result = run([node("a").gpus(8)], [running, late, gang("p").min(2)])
    assert isinstance(result.for_gang(key("c2")), Admit)
    assert result.for_gang(key("c1")) is None


def test_an_invalid_sibling_is_rejected_and_holds_the_family() -> None:
    gangs = [gang("c1").min(1).parent("p").gated_members(1), gang("c2").min(0).parent("p"), gang("p").min(2)]
    result = run([node("a").gpus(8)], gangs)
    assert result.for_gang(key("c2")) == Reject(
        key("c2"), Reason.INVALID_SPEC, "minMember is 0; it must be at least 1"
    )
    d = result.for_gang(key("c1"))
    assert isinstance(d, Wait) and d.reason == Reason.WAITING_FOR_PARENT
    assert "c2: invalid" in d.message


def test_a_mixed_gang_that_fits_only_smallest_first_is_admitted() -> None:
    """Biggest first would put the 8-GPU worker on the big-CPU node and leave no room for the
    60-CPU launcher; the other order fits. Neither "Unschedulable" nor a wait."""
    g = gang("g").min(2).members(pod("worker").gpus(8).cpu("16").gated(), pod("launcher").cpu("60").gated())
    d = run([node("a").gpus(8).cpu("64"), node("b").gpus(8).cpu("16")], [g]).for_gang(G)
    assert isinstance(d, Admit)
    assert d.placement == {"ns/worker": "b", "ns/launcher": "a"}


def test_too_big_names_the_resource_no_node_has_enough_of_even_when_gpus_are_busy() -> None:
    busy = [pod(f"b{i}").ns("x").gpus(8).cpu("1").on(f"n{i}") for i in range(2)]
    g = gang("g").members(pod("w").gpus(8).cpu("100").gated())
    nodes = [node("n0").gpus(8).cpu("64"), node("n1").gpus(8).cpu("64")]
    d = run(nodes, [g], busy).for_gang(G)
    assert isinstance(d, Wait) and d.reason is Reason.UNSCHEDULABLE
    assert d.message.endswith("(largest node: 64 cpu)")


def test_a_member_released_without_the_gate_needs_room_in_the_proof_too() -> None:
    """Created before the namespace opted in: ungated, unbound, still a member of minMember 4."""
    g = gang("g").min(4).gated_members(3, gpus=8).members(pod("g-x").gpus(8))
    nodes = [node(f"n{i}").gpus(8) for i in range(4)]
    busy = pod("other").ns("x").gpus(8).on("n3")
    d = run(nodes, [g], [busy]).for_gang(G)
    assert isinstance(d, Wait)  # 3 gated pods would fit, but the gang of 4 does not
    assert d.message == "needs 4 pods × 8 nvidia.com/gpu; best placement fits 3: n0 1, n1 1, n2 1"
    d = run(nodes, [g]).for_gang(G)
    assert isinstance(d, Admit) and sorted(d.placement) == ["ns/g-0", "ns/g-1", "ns/g-2"]


def test_an_ungated_member_that_got_bound_does_not_make_the_gang_admitted() -> None:
    """The scheduler binds an ungated member whenever it fits; the gated rest must still start
    together, never one by one as if the gang were running."""
    g = gang("g").min(4).gated_members(3, gpus=8).members(pod("g-x").gpus(8).on("n3"))
    nodes = [node(f"n{i}").gpus(8) for i in range(4)]
    busy = [pod("o1").ns("x").gpus(8).on("n1"), pod("o2").ns("x").gpus(8).on("n2")]
    d = run(nodes, [g], busy).for_gang(G)
    assert isinstance(d, Wait) and d.reason is Reason.INSUFFICIENT_CAPACITY
    d = run(nodes, [g]).for_gang(G)  # room for all three: admitted together
    assert isinstance(d, Admit) and sorted(d.placement) == ["ns/g-0", "ns/g-1", "ns/g-2"]
