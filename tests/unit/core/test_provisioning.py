"""core/provisioning.py: which gangs ask the cluster-autoscaler for nodes, as data (no shell)."""

from __future__ import annotations

from dataclasses import replace

from controller.core import (
    BEST_EFFORT_ATOMIC,
    Admit,
    Gang,
    GangKey,
    Node,
    Pod,
    Preempt,
    ProvisioningConfig,
    ProvisioningRequestState,
    Reason,
    RequestCondition,
    RequestPhase,
    Snapshot,
    Wait,
    autoscaler_note,
    decide_provisioning,
    plan,
)

KEY = GangKey("team", "train")
NOW = 1_000_000.0
ON = ProvisioningConfig(enabled=True, retry_seconds=30, max_retry_seconds=600)
GPU = "nvidia.com/gpu"


def member(i: int, gpus: int = 8, gated: bool = True) -> Pod:
    return Pod(f"uid-{i}", "team", f"train-{i}", {GPU: gpus, "pods": 1}, created=float(i), gated=gated)


def gang(*members: Pod, min_member: int | None = None) -> Gang:
    pods = members or (member(0), member(1))
    return Gang(KEY, min_member if min_member is not None else len(pods), pods)


def waits(reason: Reason = Reason.INSUFFICIENT_CAPACITY) -> dict[GangKey, Wait | Admit | Preempt]:
    return {KEY: Wait(KEY, reason, "needs 2 pods × 8 nvidia.com/gpu")}


def request(g: Gang, *conditions: RequestCondition, attempt: int = 0) -> ProvisioningRequestState:
    """The request the core itself would have asked for this gang."""
    first = decide_provisioning([g], waits(), [], ON, NOW).create[0]
    return ProvisioningRequestState(
        "team", first.name.rsplit("-", 1)[0] + f"-{attempt}", KEY, BEST_EFFORT_ATOMIC,
        first.signature, attempt, NOW - 60, conditions,
    )  # fmt: skip


def test_a_gang_waiting_for_capacity_asks_once_with_one_pod_set_per_shape() -> None:
    g = gang(member(0), member(1), member(2, gpus=1))
    result = decide_provisioning([g], waits(), [], ON, NOW)
    assert len(result.create) == 1
    new = result.create[0]
    assert new.class_name == BEST_EFFORT_ATOMIC
    assert [(s.example, s.count) for s in new.shapes] == [("train-0", 2), ("train-2", 1)]
    assert result.gangs[KEY].phase == RequestPhase.REQUESTED
    assert "ProvisioningRequest" in result.gangs[KEY].message
    # Asked already: the same gang asks nothing more.
    again = decide_provisioning([g], waits(), [request(g)], ON, NOW)
    assert again.create == () and again.delete == ()


def test_only_capacity_waits_ask() -> None:
    g = gang()
    for reason in (Reason.QUEUE_LIMIT, Reason.WAITING_FOR_MEMBERS, Reason.PREEMPTING, Reason.RESERVED):
        assert decide_provisioning([g], waits(reason), [], ON, NOW).create == (), reason
    assert decide_provisioning([g], waits(Reason.UNSCHEDULABLE), [], ON, NOW).create != ()
    # Members still missing: the request would be for a gang that is not whole yet.
    short = gang(member(0), min_member=2)
    assert decide_provisioning([short], waits(), [], ON, NOW).create == ()
    # A preemption will place it.
    preempt = {KEY: Preempt(KEY, (), {}, "evicting")}
    assert decide_provisioning([g], preempt, [], ON, NOW).create == ()
    # Switched off: nothing.
    assert decide_provisioning([g], waits(), [], ProvisioningConfig(), NOW).create == ()
    # Its queue's limit is spoken for by the gangs that asked before it in the pass.
    spoken_for = {KEY: Wait(KEY, Reason.INSUFFICIENT_CAPACITY, "short", may_ask=False)}
    assert decide_provisioning([g], spoken_for, [], ON, NOW).create == ()


def test_a_gang_that_stops_waiting_for_capacity_deletes_its_request() -> None:
    g = gang()
    held = request(g)
    result = decide_provisioning([g], waits(Reason.QUEUE_LIMIT), [held], ON, NOW)
    assert result.delete == (held,) and result.create == ()
    # Gone from the snapshot (deleted, finished or settled on its nodes): deleted too.
    assert decide_provisioning([], {}, [held], ON, NOW).delete == (held,)


def test_a_gang_whose_size_changed_replaces_its_request() -> None:
    g = gang()
    held = request(g)
    grown = replace(g, min_member=3, members=(*g.members, member(2)))
    result = decide_provisioning([grown], waits(), [held], ON, NOW)
    assert result.delete == (held,)
    assert [s.count for s in result.create[0].shapes] == [3]


def test_provisioned_request_is_consumed_by_the_admission_and_kept_until_bound() -> None:
    g = gang()
    held = request(g, RequestCondition("Provisioned", True, "CapacityIsProvisioned", "", NOW - 5))
    admit = {KEY: Admit(KEY, {"uid-0": "n1", "uid-1": "n2"}, "admitted")}
    result = decide_provisioning([g], admit, [held], ON, NOW)
    assert result.delete == ()
    assert result.gangs[KEY].consumable and result.gangs[KEY].request == held.name
    # Admitted and bound: the booking is used, the request goes.
    bound = replace(
        g,
        members=tuple(replace(m, gated=False, node_name="n1") for m in g.members),
        admitted={"uid-0": "n1", "uid-1": "n2"},
    )
    assert decide_provisioning([bound], {}, [held], ON, NOW).delete == (held,)


def test_failed_request_is_asked_again_after_a_backoff_that_grows() -> None:
    g = gang()
    failed = RequestCondition("Failed", True, "FailedToBookCapacity", "no room", NOW - 10)
    held = request(g, failed, attempt=1)
    early = decide_provisioning([g], waits(), [held], ON, NOW)
    assert early.create == () and early.delete == ()
    assert early.gangs[KEY].phase == RequestPhase.FAILED
    assert "no room" in early.gangs[KEY].message
    assert early.recheck_in == 60 - 10  # 30 s doubled once
    late = decide_provisioning([g], waits(), [held], ON, NOW + 60)
    assert late.delete == (held,) and late.create[0].attempt == 2
    assert late.create[0].name != held.name


def test_expired_booking_is_asked_again() -> None:
    g = gang()
    held = request(
        g,
        RequestCondition("Provisioned", True, "CapacityIsProvisioned", "", NOW - 700),
        RequestCondition("BookingExpired", True, "CapacityReservationTimeExpired", "", NOW - 100),
    )
    result = decide_provisioning([g], waits(), [held], ON, NOW)
    assert result.delete == (held,) and result.create[0].attempt == 1


def test_capacity_not_found_is_reported_and_left_to_the_autoscaler() -> None:
    g = gang()
    not_found = RequestCondition("Provisioned", False, "CapacityIsNotFound", "CA will try later.", NOW)
    result = decide_provisioning([g], waits(), [request(g, not_found)], ON, NOW)
    assert result.create == () and result.delete == ()
    assert result.gangs[KEY].phase == RequestPhase.NOT_FOUND
    assert "CapacityIsNotFound" in result.gangs[KEY].message


def test_two_requests_for_one_gang_keep_only_the_newest() -> None:
    g = gang()
    old, new = request(g), request(g, attempt=1)
    result = decide_provisioning([g], waits(), [new, old], ON, NOW)
    assert result.delete == (old,) and result.create == ()


def test_without_the_opt_in_a_capacity_wait_says_the_autoscaler_cannot_see_it() -> None:
    decision = waits()[KEY]
    note = autoscaler_note(decision, None, enabled=False)
    assert note is not None and not note.requested
    assert "--provisioning-requests" in note.message and "gated" in note.message
    assert autoscaler_note(decision, None, enabled=True) is None
    assert autoscaler_note(waits(Reason.QUEUE_LIMIT)[KEY], None, enabled=False) is None
    requested = decide_provisioning([gang()], waits(), [], ON, NOW).gangs[KEY]
    said = autoscaler_note(decision, requested, enabled=True)
    assert said is not None and said.requested and said.reason == "Requested"


def test_a_gang_whose_nodes_were_provisioned_is_planned_first_on_them() -> None:
    node = Node("new-0", {GPU: 8, "pods": 110})
    old = Gang(GangKey("team", "older"), 1, (replace(member(0), uid="o", namespace="team"),), priority=10)
    mine = replace(gang(member(1)), min_member=1)
    without = plan(Snapshot((node,), (), (old, mine), NOW))
    assert isinstance(without.for_gang(old.key), Admit)  # higher priority: it would take the node
    booked = plan(Snapshot((node,), (), (old, replace(mine, capacity_booked=True)), NOW))
    assert isinstance(booked.for_gang(KEY), Admit)
    assert not isinstance(booked.for_gang(old.key), Admit)


def test_nodes_registered_before_provisioned_is_written_are_consumed_all_the_same() -> None:
    g = gang()
    held = request(g, RequestCondition("Accepted", True, "Accepted", "", NOW - 5))
    admit = {KEY: Admit(KEY, {"uid-0": "n1", "uid-1": "n2"}, "admitted")}
    result = decide_provisioning([g], admit, [held], ON, NOW)
    assert result.delete == () and result.gangs[KEY].consumable
    failed = request(g, RequestCondition("Failed", True, "x", "", NOW - 5))
    assert decide_provisioning([g], admit, [failed], ON, NOW).delete == (failed,)


def test_a_request_is_kept_through_a_wait_that_passes_and_deleted_by_one_that_does_not() -> None:
    g = gang()
    provisioned = request(g, RequestCondition("Provisioned", True, "CapacityIsProvisioned", "", NOW - 5))
    # A member being recreated, a preemption under way: the booked nodes are not thrown away.
    for reason in (Reason.WAITING_FOR_MEMBERS, Reason.PREEMPTING, Reason.BLOCKED_BY_RESERVATION):
        result = decide_provisioning([g], waits(reason), [provisioned], ON, NOW)
        assert result.delete == () and result.create == (), reason
        assert result.gangs[KEY].request == provisioned.name, reason
    # Held by its queue, or out of time: deleted.
    assert decide_provisioning([g], waits(Reason.QUEUE_LIMIT), [provisioned], ON, NOW).delete == (
        provisioned,
    )
    timed_out = {KEY: Wait(KEY, Reason.WAITING_FOR_MEMBERS, "short", timed_out=True)}
    assert decide_provisioning([g], timed_out, [provisioned], ON, NOW).delete == (provisioned,)
    # A failed request is not kept through such a wait.
    failed = request(g, RequestCondition("Failed", True, "x", "", NOW - 5))
    assert decide_provisioning([g], waits(Reason.PREEMPTING), [failed], ON, NOW).delete == (failed,)


def test_a_replaced_request_that_failed_or_expired_is_told_of_with_the_new_one() -> None:
    g = gang()
    expired = request(
        g,
        RequestCondition("Provisioned", True, "CapacityIsProvisioned", "", NOW - 700),
        RequestCondition("CapacityRevoked", True, "CapacityRevoked", "node group shrank", NOW - 1),
    )
    state = decide_provisioning([g], waits(), [expired], ON, NOW).gangs[KEY]
    assert state.phase == RequestPhase.REQUESTED and state.request != expired.name
    assert state.ended == expired and "node group shrank" in state.ended_message
    failed = request(g, RequestCondition("Failed", True, "FailedToBook", "no room", NOW - 100), attempt=1)
    state = decide_provisioning([g], waits(), [failed], ON, NOW).gangs[KEY]
    assert state.ended == failed and "no room" in state.ended_message
    # Resized while it waited: replaced, but nothing ended.
    grown = replace(g, min_member=3, members=(*g.members, member(2)))
    assert decide_provisioning([grown], waits(), [request(g)], ON, NOW).gangs[KEY].ended is None


def test_an_elastic_gang_asks_for_the_members_it_needs_to_start() -> None:
    # minMember 2 of six 8-GPU members, at most 4; one 4-GPU node: nothing fits.
    members = tuple(member(i) for i in range(6))
    elastic = replace(gang(*members, min_member=2), max_member=4)
    snapshot = Snapshot((Node("small", {GPU: 4, "pods": 110}),), members, (elastic,), NOW)
    decision = plan(snapshot).for_gang(KEY)
    assert isinstance(decision, Wait) and decision.asks_for == ("uid-0", "uid-1")
    new = decide_provisioning([elastic], {KEY: decision}, [], ON, NOW).create[0]
    assert [(s.example, s.count) for s in new.shapes] == [("train-0", 2)]


def test_the_nodes_made_for_a_booked_gang_are_held_for_it_until_it_fits() -> None:
    asked = NOW - 60
    old = Node("old-0", {GPU: 8, "pods": 110}, created=asked - 3600)
    made = Node("new-0", {GPU: 8, "pods": 110}, created=asked + 30)  # one of the nodes asked for
    booked = replace(gang(member(0), member(1), member(2)), capacity_booked=True, capacity_since=asked)
    other_key = GangKey("team", "other")
    other_pods = tuple(replace(member(k), uid=f"o-{k}", name=f"other-{k}") for k in (7, 8))
    other = Gang(other_key, 2, other_pods, priority=100)
    result = plan(Snapshot((old, made), (*booked.members, *other_pods), (booked, other), NOW))
    mine = result.for_gang(KEY)
    assert isinstance(mine, Wait) and "new-0" in mine.message and "held for it" in mine.message
    # The other gang would fit on the old node and the one made for the booked gang: it may not.
    theirs = result.for_gang(other_key)
    assert isinstance(theirs, Wait) and theirs.reason == Reason.BLOCKED_BY_RESERVATION
    assert "team/train" in theirs.message
    # A one-pod gang still takes the old node, which nobody asked for.
    single = Gang(other_key, 1, other_pods[:1], priority=100)
    result = plan(Snapshot((old, made), (*booked.members, other_pods[0]), (booked, single), NOW))
    taken = result.for_gang(other_key)
    assert isinstance(taken, Admit) and set(taken.booked.values()) == {"old-0"}


def test_a_gang_awaiting_its_answer_takes_old_room_but_not_nodes_registered_since_it_asked() -> None:
    asked = NOW - 60
    single = replace(gang(member(0)), min_member=1, capacity_awaited=True, capacity_since=asked)
    made = Node("new-0", {GPU: 8, "pods": 110}, created=asked + 30)
    waits_for_answer = plan(Snapshot((made,), single.members, (single,), NOW)).for_gang(KEY)
    assert isinstance(waits_for_answer, Wait) and "not answered yet" in waits_for_answer.message
    freed = Node("old-0", {GPU: 8, "pods": 110}, created=asked - 3600)  # room that freed meanwhile
    taken = plan(Snapshot((made, freed), single.members, (single,), NOW)).for_gang(KEY)
    assert isinstance(taken, Admit) and set(taken.booked.values()) == {"old-0"}


def test_a_gang_whose_members_are_all_gone_deletes_its_request_while_it_waits_for_them() -> None:
    g = gang()
    provisioned = request(g, RequestCondition("Provisioned", True, "CapacityIsProvisioned", "", NOW - 5))
    empty = replace(g, members=())
    result = decide_provisioning([empty], waits(Reason.WAITING_FOR_MEMBERS), [provisioned], ON, NOW)
    assert result.delete == (provisioned,)


def test_two_booked_gangs_a_node_registered_since_the_later_request_may_be_the_later_gangs() -> None:
    first_asked, then_asked = NOW - 120, NOW - 60
    # a is older (planned first), asked first, and needs two nodes of which none is there yet.
    a = replace(gang(member(0), member(1)), capacity_booked=True, capacity_since=first_asked, created=1.0)
    b_key = GangKey("team", "b")
    b_pod = replace(member(5), uid="b-0", name="b-0")
    b = Gang(b_key, 1, (b_pod,), capacity_booked=True, capacity_since=then_asked, created=2.0)
    made_for_b = Node("new-b", {GPU: 8, "pods": 110}, created=then_asked + 10)
    full = Node("old-full", {GPU: 8, "pods": 110}, created=first_asked - 3600)  # an empty cluster holds 2
    busy = Pod("busy", "other", "busy", {GPU: 8, "pods": 1}, node_name="old-full", phase="Running")
    result = plan(Snapshot((made_for_b, full), (*a.members, b_pod, busy), (a, b), NOW))
    mine = result.for_gang(KEY)
    assert isinstance(mine, Wait) and "new-b" in mine.message  # a does not fit: it holds new-b
    theirs = result.for_gang(b_key)
    assert isinstance(theirs, Admit) and set(theirs.booked.values()) == {"new-b"}


def test_a_booked_gang_holds_only_new_nodes_its_members_fit_on() -> None:
    asked = NOW - 60
    booked = replace(gang(member(0), member(1)), capacity_booked=True, capacity_since=asked)
    cpu_only = Node("new-cpu", {"cpu": 8000, "pods": 110}, created=asked + 5)
    other_key = GangKey("team", "cpu-job")
    cpu_pod = Pod("c-0", "team", "cpu-job-0", {"cpu": 1000, "pods": 1}, gated=True)
    other = Gang(other_key, 1, (cpu_pod,))
    result = plan(Snapshot((cpu_only,), (*booked.members, cpu_pod), (booked, other), NOW))
    mine = result.for_gang(KEY)
    assert isinstance(mine, Wait) and "new-cpu" not in mine.message
    taken = result.for_gang(other_key)
    assert isinstance(taken, Admit) and set(taken.booked.values()) == {"new-cpu"}


def test_a_booked_gang_that_preempts_keeps_its_request() -> None:
    g = gang()
    provisioned = request(g, RequestCondition("Provisioned", True, "CapacityIsProvisioned", "", NOW - 5))
    preempt = {KEY: Preempt(KEY, (), {}, "evicting")}
    result = decide_provisioning([g], preempt, [provisioned], ON, NOW)
    assert result.delete == () and result.gangs[KEY].request == provisioned.name
