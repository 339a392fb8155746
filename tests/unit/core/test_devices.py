"""DRA devices as room and demand (controller/core/devices.py) through a whole planning pass."""

from __future__ import annotations

from dataclasses import replace

from controller.core import messages as msg
from controller.core.devices import with_devices
from controller.core.dra import Claim, ClaimSpec, Device, DeviceClass, DeviceRequest, DraWorld, PodClaim
from controller.core.model import Admit, Reason, Wait
from controller.core.planner import plan
from tests.unit.core.builders import NOW, gang, node, pod, snapshot

DRIVER = "gpu.example.com"
CLASS = DeviceClass(DRIVER, (f"device.driver == '{DRIVER}'",))


def devices(node_name: str, n: int) -> list[Device]:
    return [
        Device(
            DRIVER,
            node_name,
            f"gpu-{i}",
            node_name,
            {f"{DRIVER}/model": "H100" if i % 2 == 0 else "A100", f"{DRIVER}/nvlinkDomain": i // 4},
            {f"{DRIVER}/memory": 80 * 2**30 * 1000},
        )
        for i in range(n)
    ]


def world(*per_node: tuple[str, int], claims: list[Claim] = (), **templates: ClaimSpec) -> DraWorld:  # type: ignore[assignment]
    return DraWorld(
        devices=tuple(d for name, n in per_node for d in devices(name, n)),
        classes={CLASS.name: CLASS},
        claims={(c.namespace, c.name): c for c in claims},
        templates={("ns", name): spec for name, spec in templates.items()},
    )


def spec(count: int = 1, selectors: tuple[str, ...] = (), match: str | None = None) -> ClaimSpec:
    request = DeviceRequest("gpus", DRIVER, selectors, count)
    return ClaimSpec((request,), ((match, ()),) if match else ())


def gang_of(n: int, template: str = "t", claim: str | None = None) -> tuple:
    members = [
        replace(
            pod(f"m{i}").gated().group("g").build(),
            claims=(PodClaim("gpus", template=None if claim else template, claim=claim),),
        )
        for i in range(n)
    ]
    return members, gang("g").min(n).members(*members).build()


def decide(w: DraWorld, members: list, g) -> object:  # type: ignore[no-untyped-def]
    snap = snapshot(nodes=[node("a").build(), node("b").build()], pods=members, gangs=[g])
    return plan(replace(snap, devices=w)).decisions[0]


def test_gang_one_device_short_waits_and_whole_fits_are_pinned_to_device_nodes() -> None:
    members, g = gang_of(3, "t")
    short = decide(world(("a", 4), ("b", 1), t=spec(2)), members, g)
    assert isinstance(short, Wait) and short.reason is Reason.UNSCHEDULABLE
    assert "gpu.example.com" in short.message
    admitted = decide(world(("a", 4), ("b", 2), t=spec(2)), members, g)
    assert isinstance(admitted, Admit)
    assert sorted(admitted.placement.values()) == ["a", "a", "b"]


def test_allocated_devices_are_not_free() -> None:
    members, g = gang_of(2, "t")
    used = Claim("other", "c", spec(1), allocated=tuple((DRIVER, "a", f"gpu-{i}") for i in range(3)))
    assert isinstance(decide(world(("a", 4), claims=[used], t=spec(1)), members, g), Wait)
    assert isinstance(decide(world(("a", 5), claims=[used], t=spec(1)), members, g), Admit)


def test_selector_counts_only_matching_devices() -> None:
    selector = (f"device.attributes['{DRIVER}'].model == 'H100'",)
    members, g = gang_of(3, "t")
    # 4 devices on a: 2 are H100; b has 2 devices: 1 is H100
    assert isinstance(decide(world(("a", 4), ("b", 2), t=spec(1, selector)), members, g), Admit)
    members, g = gang_of(4, "t")
    assert isinstance(decide(world(("a", 4), ("b", 2), t=spec(1, selector)), members, g), Wait)


def test_quantity_selector() -> None:
    selector = (f"device.capacity['{DRIVER}'].memory.compareTo(quantity('40Gi')) >= 0",)
    members, g = gang_of(2, "t")
    assert isinstance(decide(world(("a", 2), t=spec(1, selector)), members, g), Admit)
    bigger = (f"device.capacity['{DRIVER}'].memory.isGreaterThan(quantity('100Gi'))",)
    assert isinstance(decide(world(("a", 2), t=spec(1, bigger)), members, g), Wait)


def test_match_attribute_counts_whole_requests_per_domain() -> None:
    # a: 6 devices = domains of 4 and 2; 4 devices in one domain fit once, not twice
    members, g = gang_of(2, "t")
    w = world(("a", 6), t=spec(3, match=f"{DRIVER}/nvlinkDomain"))
    assert isinstance(decide(w, members, g), Wait)
    w = world(("a", 8), t=spec(3, match=f"{DRIVER}/nvlinkDomain"))
    assert isinstance(decide(w, members, g), Admit)


def test_failing_expression_waits_and_says_so() -> None:
    members, g = gang_of(2, "t")
    w = world(("a", 8), t=spec(1, (f"device.attributes['{DRIVER}'].nosuch == 1",)))
    decision = decide(w, members, g)
    assert isinstance(decision, Wait) and decision.reason is Reason.DEVICES_UNPROVEN
    assert "could not be evaluated" in decision.message


def test_shared_claim_counts_once_and_holds_the_gang_to_one_node() -> None:
    members, g = gang_of(3, claim="shared")
    shared = Claim("ns", "shared", spec(4))
    decision = decide(world(("a", 4), ("b", 4), claims=[shared]), members, g)
    assert isinstance(decision, Admit)
    assert len(set(decision.placement.values())) == 1


def test_allocated_shared_claim_pins_members_to_its_node() -> None:
    members, g = gang_of(2, claim="shared")
    shared = Claim("ns", "shared", spec(1), allocated=((DRIVER, "b", "gpu-0"),), allocated_node="b")
    decision = decide(world(("a", 4), ("b", 4), claims=[shared]), members, g)
    assert isinstance(decision, Admit)
    assert set(decision.placement.values()) == {"b"}


def test_missing_template_waits() -> None:
    members, g = gang_of(1, "nosuch")
    decision = decide(world(("a", 4)), members, g)
    assert isinstance(decision, Wait)
    assert decision.message == msg.devices_unproven("m0", msg.device_template_missing("nosuch"))


def holders(n: int, node_name: str, devices_each: int, priority: int = 0) -> tuple[list, list[Claim], object]:  # type: ignore[type-arg]
    """A running gang of ``n`` pods on one node, each holding ``devices_each`` allocated devices."""
    pods_, claims = [], []
    for i in range(n):
        p = pod(f"r{i}").group("r").on(node_name).priority(priority).started(NOW - 3600).build()
        pods_.append(p)
        ids = tuple((DRIVER, node_name, f"gpu-{i * devices_each + k}") for k in range(devices_each))
        claims.append(Claim("ns", f"r{i}-gpus", spec(devices_each), ids, node_name, (p.uid,)))
    running = gang("r").min(n).members(*pods_).priority(priority).admitted({p.uid: node_name for p in pods_})
    return pods_, claims, running.build()


def test_a_queue_limit_counts_devices_by_the_class_name() -> None:
    from controller.core.model import Queue, QueueResource

    _, claims, running = holders(2, "a", 2)
    members, g = gang_of(2, "t")
    g = replace(g, queue="team")
    running = replace(running, queue="team")
    w = world(("a", 8), claims=claims, t=spec(1))
    queues = {"team": Queue("team", resources={DRIVER: QueueResource(quota=4, limit=5)})}
    snap = snapshot(nodes=[node("a").build()], pods=[*running.members, *members], gangs=[running, g])
    decision = plan(replace(snap, devices=w, queues=queues)).for_gang(g.key)
    assert isinstance(decision, Wait) and decision.reason is Reason.QUEUE_LIMIT, decision
    assert DRIVER in decision.message


def test_preempting_a_gang_frees_the_devices_its_claims_hold() -> None:
    from controller.core.model import Preempt

    _, claims, running = holders(2, "a", 4, priority=0)
    members, g = gang_of(2, "t")
    g = replace(g, priority=1000)
    members = [replace(m, priority=1000) for m in members]
    g = replace(g, members=tuple(members))
    w = world(("a", 8), claims=claims, t=spec(4))
    snap = snapshot(nodes=[node("a").build()], pods=[*running.members, *members], gangs=[running, g])
    decision = plan(replace(snap, devices=w)).for_gang(g.key)
    assert isinstance(decision, Preempt), decision


def test_a_translation_reuses_what_did_not_change_and_redoes_what_did() -> None:
    members, g = gang_of(2, "t")
    snap = replace(
        snapshot(nodes=[node("a").build()], pods=members, gangs=[g]), devices=world(("a", 4), t=spec(1))
    )
    first = with_devices(snap, snap.devices)
    again = with_devices(snap, snap.devices)
    assert again.pods == first.pods and all(a is b for a, b in zip(again.pods, first.pods, strict=True))
    assert again.gangs[0] is first.gangs[0]
    assert [p.requests[DRIVER] for p in first.gangs[0].members] == [1, 1]
    # The template asks for more: the same pods get the new demand.
    more = with_devices(snap, world(("a", 4), t=spec(3)))
    assert [p.requests[DRIVER] for p in more.pods] == [3, 3]
    assert [p.requests[DRIVER] for p in more.gangs[0].members] == [3, 3]
    # A pod changed (a new record with the same uid): translated from the new record, in its gang too.
    changed = replace(members[0], priority=5)
    snap = replace(snap, pods=(changed, members[1]), gangs=(replace(g, members=(changed, members[1])),))
    out = with_devices(snap, world(("a", 4), t=spec(3)))
    assert {p.name: p.priority for p in out.pods} == {"m0": 5, "m1": 0}
    assert [p.priority for p in out.gangs[0].members] == [5, 0]
    assert [p.requests[DRIVER] for p in out.pods] == [3, 3]


def test_node_room_follows_a_change_of_devices_or_classes() -> None:
    snap = snapshot(nodes=[node("a").build()], pods=[], gangs=[])
    assert with_devices(snap, world(("a", 4))).nodes[0].allocatable[DRIVER] == 4
    assert with_devices(snap, world(("a", 4))).nodes[0].allocatable[DRIVER] == 4
    assert with_devices(snap, world(("a", 2))).nodes[0].allocatable[DRIVER] == 2
    mapped = replace(world(("a", 2)), classes={DRIVER: replace(CLASS, extended_resource="example.com/gpu")})
    room = with_devices(snap, mapped).nodes[0].allocatable
    assert room.get("example.com/gpu") == 2 and DRIVER not in room


def test_a_huge_quantity_in_a_selector_is_an_expression_error_not_a_stalled_pass() -> None:
    members, g = gang_of(2, "t")
    huge = (f"device.capacity['{DRIVER}'].memory.compareTo(quantity('1e999999999')) < 0",)
    decision = decide(world(("a", 8), t=spec(1, huge)), members, g)
    assert isinstance(decision, Wait) and decision.reason is Reason.DEVICES_UNPROVEN
