"""Network-attached devices (ResourceSlices with ``allNodes`` or a ``nodeSelector``) and
``firstAvailable`` alternatives, through a whole planning pass (controller/core/devices.py)."""

from __future__ import annotations

from dataclasses import replace

from controller.core.devices import with_devices
from controller.core.dra import (
    Claim,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    DraWorld,
    NodeReach,
    PodClaim,
)
from controller.core.model import Admit, Gang, Node, Pod, Requirement, Wait
from controller.core.planner import plan
from tests.unit.core.builders import NOW, gang, node, pod, snapshot

DRIVER = "gpu.example.com"
CLASS = DeviceClass(DRIVER, (f"device.driver == '{DRIVER}'",))
ALL_NODES = NodeReach(all_nodes=True)
RACK_1 = NodeReach(terms=((Requirement("rack", "In", ("r1",)),),))
H100 = f"device.attributes['{DRIVER}'].model == 'H100'"
A100 = f"device.attributes['{DRIVER}'].model == 'A100'"


def local(node_name: str, n: int, model: str = "H100") -> list[Device]:
    return [Device(DRIVER, node_name, f"gpu-{i}", node_name, {f"{DRIVER}/model": model}) for i in range(n)]


def shared(pool: str, n: int, reach: NodeReach = ALL_NODES) -> list[Device]:
    return [
        Device(DRIVER, pool, f"dev-{i}", None, {f"{DRIVER}/model": "H100"}, reach=reach) for i in range(n)
    ]


def world(devices: list[Device], claims: list[Claim] = (), **templates: ClaimSpec) -> DraWorld:  # type: ignore[assignment]
    return DraWorld(
        devices=tuple(devices),
        classes={CLASS.name: CLASS},
        claims={(c.namespace, c.name): c for c in claims},
        templates={("ns", name): spec for name, spec in templates.items()},
    )


def spec(count: int = 1, selectors: tuple[str, ...] = ()) -> ClaimSpec:
    return ClaimSpec((DeviceRequest("gpus", DRIVER, selectors, count),))


def first_available(*alternatives: tuple[int, str]) -> ClaimSpec:
    subs = tuple(DeviceRequest(f"gpus/{i}", DRIVER, (sel,), n) for i, (n, sel) in enumerate(alternatives))
    return ClaimSpec((DeviceRequest("gpus", "", alternatives=subs),))


def gang_of(n: int, template: str = "t") -> tuple[list[Pod], Gang]:
    members = [
        replace(pod(f"m{i}").gated().group("g").build(), claims=(PodClaim("gpus", template=template),))
        for i in range(n)
    ]
    return members, gang("g").min(n).members(*members).build()


def decide(w: DraWorld, n: int, nodes: list[Node] | None = None) -> object:
    members, g = gang_of(n)
    nodes = nodes or [node("a").label("rack", "r1").build(), node("b").label("rack", "r2").build()]
    snap = snapshot(nodes=nodes, pods=members, gangs=[g])
    return plan(replace(snap, devices=w)).decisions[0]


def test_devices_all_nodes_reach_count_once() -> None:
    assert isinstance(decide(world(shared("net", 4), t=spec(1)), 4), Admit)
    # Two nodes reach the same 4 devices: 4, not 8.
    assert isinstance(decide(world(shared("net", 4), t=spec(1)), 5), Wait)


def test_devices_a_node_selector_reaches_only_count_on_the_nodes_it_matches() -> None:
    decision = decide(world(shared("net", 4, RACK_1), t=spec(2)), 2)
    assert isinstance(decision, Admit)
    assert set(decision.placement.values()) == {"a"}
    by_name = NodeReach(terms=((Requirement("metadata.name", "In", ("b",), field=True),),))
    decision = decide(world(shared("net", 2, by_name), t=spec(1)), 2)
    assert isinstance(decision, Admit) and set(decision.placement.values()) == {"b"}
    nowhere = NodeReach(terms=((Requirement("rack", "In", ("r9",)),),))
    assert isinstance(decide(world(shared("net", 4, nowhere), t=spec(1)), 1), Wait)


def test_shared_devices_are_dealt_in_shares_of_the_largest_request() -> None:
    # 4 devices reached by both nodes; each member asks for 2: both members must find 2 on a node.
    nodes = [node("a").build(), node("b").build()]
    out = with_devices(snapshot(nodes=nodes), world(shared("net", 4), t=spec(2)))
    assert [n.allocatable.get(DRIVER, 0) for n in out.nodes] == [2, 2]
    assert isinstance(decide(world(shared("net", 4), t=spec(2)), 2, nodes), Admit)
    assert isinstance(decide(world(shared("net", 4), t=spec(2)), 3, nodes), Wait)


def test_shared_devices_beside_node_local_ones_of_the_class_are_not_counted() -> None:
    # The scheduler could give a member on a the shared device another member was planned on.
    w = world([*local("a", 1), *shared("net", 2)], t=spec(1))
    out = with_devices(snapshot(nodes=[node("a").build(), node("b").build()]), w)
    assert [n.allocatable.get(DRIVER, 0) for n in out.nodes] == [1, 0]
    assert isinstance(decide(w, 2), Wait)
    # Two pools whose node sets overlap but differ: neither counts on the nodes they share.
    overlapping = world([*shared("p1", 2, ALL_NODES), *shared("p2", 2, RACK_1)], t=spec(1))
    assert isinstance(decide(overlapping, 1), Wait)


def test_allocated_shared_devices_are_not_free_and_a_holder_frees_them_on_its_node() -> None:
    holder = pod("r0").group("r").on("b").started(NOW - 3600).build()
    held = Claim(
        "ns", "r0-gpus", spec(3), tuple((DRIVER, "net", f"dev-{i}") for i in range(3)), None, (holder.uid,)
    )
    w = world(shared("net", 4), claims=[held], t=spec(1))
    members, g = gang_of(2)
    running = gang("r").min(1).members(holder).admitted({holder.uid: "b"}).build()
    snap = snapshot(nodes=[node("a").build(), node("b").build()], pods=[holder, *members], gangs=[running, g])
    out = with_devices(snap, w)
    # The holder's 3 devices count on its node, and it requests them; 1 is free.
    assert sum(n.allocatable.get(DRIVER, 0) for n in out.nodes) == 4
    assert next(p for p in out.pods if p.uid == holder.uid).requests[DRIVER] == 3
    assert isinstance(plan(replace(snap, devices=w)).for_gang(g.key), Wait)
    orphan = replace(held, reserved_for=())  # allocated, held by no live pod: never free
    out = with_devices(snap, world(shared("net", 4), claims=[orphan], t=spec(1)))
    assert sum(n.allocatable.get(DRIVER, 0) for n in out.nodes) == 1


def test_first_available_takes_the_first_alternative_with_room() -> None:
    w = world([*local("a", 4), *local("b", 2, "A100")], t=first_available((2, H100), (1, A100)))
    decision = decide(w, 2)
    assert isinstance(decision, Admit)
    assert set(decision.placement.values()) == {"a"}  # 2 × 2 H100 on a


def test_first_available_falls_back_only_on_nodes_where_earlier_ones_cannot_be_met() -> None:
    # 3 members: a has room for one H100 pair only, so the gang falls back to 1 A100 each; the
    # scheduler would take H100 on a (a pair is free there), so the A100s of a do not count.
    devices = [*local("a", 2), *[replace(d, name=f"a100-{d.name}") for d in local("a", 4, "A100")]]
    devices += local("b", 3, "A100")
    w = world(devices, t=first_available((2, H100), (1, A100)))
    decision = decide(w, 3)
    assert isinstance(decision, Admit)
    assert set(decision.placement.values()) == {"b"}
    assert isinstance(decide(w, 4), Wait)


def test_first_available_without_room_for_any_asks_for_the_first() -> None:
    w = world(local("a", 1), t=first_available((2, H100), (2, A100)))
    decision = decide(w, 1)
    assert isinstance(decision, Wait)
    assert "gpu.example.com" in decision.message


def test_an_allocated_shared_claim_on_shared_devices_holds_its_members_to_the_nodes_they_reach() -> None:
    members = [
        replace(pod(f"m{i}").gated().group("g").build(), claims=(PodClaim("gpus", claim="shared"),))
        for i in range(2)
    ]
    g = gang("g").min(2).members(*members).build()
    allocated = Claim("ns", "shared", spec(1), ((DRIVER, "net", "dev-0"),), allocated_reach=RACK_1)
    nodes = [node("a").label("rack", "r1").build(), node("b").label("rack", "r2").build()]
    snap = snapshot(nodes=nodes, pods=members, gangs=[g])
    decision = plan(replace(snap, devices=world(shared("net", 2, RACK_1), claims=[allocated]))).decisions[0]
    assert isinstance(decision, Admit) and set(decision.placement.values()) == {"a"}
    anywhere = replace(allocated, allocated_reach=ALL_NODES)
    decision = plan(replace(snap, devices=world(shared("net", 2), claims=[anywhere]))).decisions[0]
    assert isinstance(decision, Admit)


def test_distinct_attribute_counts_requests_of_devices_with_different_values() -> None:
    # a: 4 devices on 2 NICs (values 0, 0, 1, 1); a request of 2 distinct-NIC devices fits twice,
    # one of 3 never.
    devices = [
        Device(DRIVER, "a", f"gpu-{i}", "a", {f"{DRIVER}/model": "H100", f"{DRIVER}/nic": i // 2})
        for i in range(4)
    ]

    def distinct(count: int) -> ClaimSpec:
        return replace(spec(count), distinct_attributes=((f"{DRIVER}/nic", ()),))

    assert isinstance(decide(world(devices, t=distinct(2)), 2), Admit)
    assert isinstance(decide(world(devices, t=distinct(2)), 3), Wait)
    assert isinstance(decide(world(devices, t=distinct(3)), 1), Wait)
    assert isinstance(decide(world(devices, t=spec(3)), 1), Admit)


def test_distinct_requests_bound() -> None:
    from controller.core.devices import _distinct_requests

    assert _distinct_requests([3, 1], 2) == 1
    assert _distinct_requests([2, 2, 2], 3) == 2
    assert _distinct_requests([5], 1) == 5
    assert _distinct_requests([4], 2) == 0


def test_a_pass_after_a_claim_is_released_drops_the_devices_from_its_holder_and_gang() -> None:
    holder = pod("r0").group("r").on("a").started(NOW - 3600).build()
    held = Claim(
        "ns", "r0-gpus", spec(2), ((DRIVER, "a", "gpu-0"), (DRIVER, "a", "gpu-1")), "a", (holder.uid,)
    )
    running = gang("r").min(1).members(holder).admitted({holder.uid: "a"}).build()
    snap = snapshot(nodes=[node("a").build()], pods=[holder], gangs=[running])
    before = with_devices(snap, world(local("a", 4), claims=[held]))
    assert before.gangs[0].members[0].requests[DRIVER] == 2
    assert with_devices(snap, world(local("a", 4), claims=[held])).gangs[0] is before.gangs[0]
    after = with_devices(snap, world(local("a", 4)))  # the same pod and gang records
    assert DRIVER not in after.pods[0].requests
    assert DRIVER not in after.gangs[0].members[0].requests
    assert after.nodes[0].allocatable[DRIVER] == 4


def test_selectors_built_again_take_what_the_previous_evaluated() -> None:
    from controller.core.device_cel import Selectors

    evaluated: list[str] = []

    class Counting(Selectors):
        def _evaluate(self, expression: str, device: Device) -> bool | str:
            evaluated.append(device.name)
            return super()._evaluate(expression, device)

    first = Counting()
    devices = local("a", 2) + local("b", 1, "A100")
    assert [first.matches(H100, d) for d in devices] == [True, True, False]
    assert evaluated == ["gpu-0", "gpu-0"]  # devices alike but for their name: one evaluation each
    again = Counting(first)
    assert [again.matches(H100, d) for d in devices] == [True, True, False]
    assert len(evaluated) == 2
    again.forget_previous()
    assert again.matches(H100, devices[2]) is False and len(evaluated) == 2
