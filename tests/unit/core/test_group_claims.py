"""PodGroup-level claims (native PodGroup spec.resourceClaims) through a whole planning pass: one
claim for the gang, counted once, every member that uses it where its devices are."""

from __future__ import annotations

from dataclasses import replace

from controller.core import messages as msg
from controller.core.devices import with_devices
from controller.core.dra import Claim, DraWorld, GroupClaim, PodClaim
from controller.core.model import Admit, Preempt, Reason, Wait
from controller.core.planner import plan
from tests.unit.core.builders import NOW, gang, node, pod, snapshot
from tests.unit.core.test_devices import DRIVER, spec, world

GROUP = "train"


def members_of(n: int, entry: PodClaim, group: str | None = GROUP) -> tuple[list, object]:  # type: ignore[type-arg]
    members = [
        replace(pod(f"m{i}").gated().group("g").build(), claims=(entry,), scheduling_group=group)
        for i in range(n)
    ]
    return members, gang("g").min(n).members(*members).build()


def with_group(w: DraWorld, *claims: GroupClaim, group: str = GROUP) -> DraWorld:
    return replace(w, group_claims={("ns", group): claims})


def decide(w: DraWorld, members: list, g) -> object:  # type: ignore[no-untyped-def, type-arg]
    snap = snapshot(nodes=[node("a").build(), node("b").build()], pods=members, gangs=[g])
    return plan(replace(snap, devices=w)).decisions[0]


def made_claim(count: int, **kw: object) -> Claim:
    return Claim("ns", "train-gpus-x1", spec(count), **kw)  # type: ignore[arg-type]


def test_a_podgroup_template_claim_is_one_claim_for_the_gang_not_one_per_pod() -> None:
    entry = PodClaim("gpus", template="four")
    members, g = members_of(3, entry)
    w = world(("a", 4), ("b", 4), claims=[made_claim(4)], four=spec(4))
    # Each pod's own claim from the template: 3 × 4 devices, more than the 8 there are.
    assert isinstance(decide(w, members, g), Wait)
    grouped = with_group(w, GroupClaim("gpus", template="four", generated="train-gpus-x1"))
    decision = decide(grouped, members, g)
    assert isinstance(decision, Admit), decision
    # Allocated once, on one node's devices: every member there.
    assert len(set(decision.placement.values())) == 1


def test_a_podgroup_claim_one_device_short_waits_then_fits_where_its_devices_are() -> None:
    entry = PodClaim("gpus", template="five")
    members, g = members_of(2, entry)
    group = GroupClaim("gpus", template="five", generated="train-gpus-x1")
    short = decide(with_group(world(("a", 4), ("b", 4), claims=[made_claim(5)]), group), members, g)
    assert isinstance(short, Wait) and short.reason in (Reason.UNSCHEDULABLE, Reason.INSUFFICIENT_CAPACITY)
    assert DRIVER in short.message
    admitted = decide(with_group(world(("a", 4), ("b", 5), claims=[made_claim(5)]), group), members, g)
    assert isinstance(admitted, Admit) and set(admitted.placement.values()) == {"b"}


def test_a_podgroup_claim_by_name_is_the_named_claim_shared() -> None:
    entry = PodClaim("gpus", claim="shared")
    members, g = members_of(3, entry)
    shared = Claim("ns", "shared", spec(4))
    w = with_group(world(("a", 4), ("b", 4), claims=[shared]), GroupClaim("gpus", claim="shared"))
    decision = decide(w, members, g)
    assert isinstance(decision, Admit) and len(set(decision.placement.values())) == 1


def test_an_entry_that_differs_from_the_podgroup_claim_is_the_pods_own() -> None:
    # Same name, another template: the control plane binds it to the pod, one claim each.
    members, g = members_of(3, PodClaim("gpus", template="four"))
    w = world(("a", 4), ("b", 4), claims=[made_claim(4)], four=spec(4), other=spec(4))
    w = with_group(w, GroupClaim("gpus", template="other", generated="train-gpus-x1"))
    assert isinstance(decide(w, members, g), Wait)
    # A pod of another PodGroup does not use this group's claim either.
    members, g = members_of(3, PodClaim("gpus", template="four"), group="another")
    w = with_group(
        world(("a", 4), ("b", 4), claims=[made_claim(4)], four=spec(4)), GroupClaim("gpus", "four")
    )
    assert isinstance(decide(w, members, g), Wait)


def test_a_podgroup_claim_not_made_yet_waits_and_says_so() -> None:
    members, g = members_of(2, PodClaim("gpus", template="four"))
    w = with_group(world(("a", 8), four=spec(4)), GroupClaim("gpus", template="four"))
    decision = decide(w, members, g)
    assert isinstance(decision, Wait) and decision.reason is Reason.DEVICES_UNPROVEN
    assert decision.message == msg.devices_unproven("m0", msg.device_group_claim_not_made(GROUP, "gpus"))


def test_the_claim_name_in_the_pods_status_serves_when_the_podgroups_is_not_read_yet() -> None:
    members, g = members_of(2, PodClaim("gpus", template="four", generated="train-gpus-x1"))
    w = with_group(
        world(("a", 4), ("b", 4), claims=[made_claim(4)], four=spec(4)), GroupClaim("gpus", "four")
    )
    decision = decide(w, members, g)
    assert isinstance(decision, Admit) and len(set(decision.placement.values())) == 1


def test_an_allocated_podgroup_claim_pins_the_members_to_its_node() -> None:
    members, g = members_of(2, PodClaim("gpus", template="four"))
    allocated = made_claim(
        4, allocated=tuple((DRIVER, "b", f"gpu-{i}") for i in range(4)), allocated_node="b"
    )
    group = GroupClaim("gpus", template="four", generated="train-gpus-x1")
    decision = decide(with_group(world(("a", 4), ("b", 4), claims=[allocated]), group), members, g)
    assert isinstance(decision, Admit) and set(decision.placement.values()) == {"b"}


def running_group(priority: int = 0) -> tuple[list, Claim, object]:  # type: ignore[type-arg]
    """A running gang of 2 on node a whose PodGroup holds one claim of all 4 of a's devices."""
    pods_ = [
        replace(
            pod(f"r{i}").group("r").on("a").priority(priority).started(NOW - 3600).build(),
            claims=(PodClaim("gpus", template="four", generated="r-gpus-x"),),
            scheduling_group="r",
        )
        for i in range(2)
    ]
    ids = tuple((DRIVER, "a", f"gpu-{i}") for i in range(4))
    # reservedFor names the PodGroup, not its pods.
    held = Claim("ns", "r-gpus-x", spec(4), ids, "a", ("podgroup-uid",), reserved_for_groups=("r",))
    running = gang("r").min(2).members(*pods_).priority(priority).admitted({p.uid: "a" for p in pods_})
    return pods_, held, running.build()


def test_devices_reserved_for_a_podgroup_are_held_by_its_running_members() -> None:
    pods_, held, running = running_group()
    snap = snapshot(nodes=[node("a").build()], pods=pods_, gangs=[running])
    out = with_devices(snap, world(("a", 4), claims=[held]))
    assert sorted(p.requests.get(DRIVER, 0) for p in out.pods) == [0, 4]


def test_preempting_a_gang_frees_the_devices_of_its_podgroup_claim() -> None:
    pods_, held, running = running_group(priority=0)
    members, g = members_of(2, PodClaim("gpus", template="four"))
    members = [replace(m, priority=1000) for m in members]
    g = replace(g, priority=1000, members=tuple(members))
    w = world(("a", 4), claims=[held], four=spec(2))
    snap = snapshot(nodes=[node("a").build()], pods=[*pods_, *members], gangs=[running, g])
    decision = plan(replace(snap, devices=w)).for_gang(g.key)
    assert isinstance(decision, Preempt), decision
