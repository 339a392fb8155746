"""DRA devices counted where they are really taken (controller/core/devices.py, planner.py):
admitted members not placed yet, claims several pods hold, claims the scheduler made for an
extended resource, overlapping classes and requests, and what is not modelled."""

from __future__ import annotations

from dataclasses import replace

from controller.core import messages as msg
from controller.core.devices import with_devices
from controller.core.dra import Claim, ClaimSpec, Device, DeviceClass, DeviceRequest, DraWorld, PodClaim
from controller.core.model import Admit, Decision, Gang, Pod, Preempt, Reason, Wait
from controller.core.planner import plan
from tests.unit.core.builders import NOW, gang, node, pod, snapshot

DRIVER = "gpu.example.com"
GPU_CLASS = DeviceClass(DRIVER, (f"device.driver == '{DRIVER}'",))
MODEL = f"device.attributes['{DRIVER}'].model == 'H100'"
DOMAIN = f"{DRIVER}/nvlinkDomain"


def devices(node_name: str, n: int) -> list[Device]:
    """``n`` devices: even ones H100, odd ones A100; nvlink domains of 4 in order."""
    return [
        Device(
            DRIVER,
            node_name,
            f"gpu-{i}",
            node_name,
            {f"{DRIVER}/model": "H100" if i % 2 == 0 else "A100", DOMAIN: i // 4},
        )
        for i in range(n)
    ]


def world(
    *per_node: tuple[str, int],
    claims: tuple[Claim, ...] = (),
    classes: tuple[DeviceClass, ...] = (GPU_CLASS,),
    **templates: ClaimSpec,
) -> DraWorld:
    return DraWorld(
        devices=tuple(d for name, n in per_node for d in devices(name, n)),
        classes={c.name: c for c in classes},
        claims={(c.namespace, c.name): c for c in claims},
        templates={("ns", name): spec for name, spec in templates.items()},
    )


def spec(count: int = 1, selectors: tuple[str, ...] = (), device_class: str = DRIVER) -> ClaimSpec:
    return ClaimSpec((DeviceRequest("gpus", device_class, selectors, count),))


def members(
    name: str, n: int, template: str = "t", claim: str | None = None, gated: bool = True
) -> list[Pod]:
    out = []
    for i in range(n):
        built = pod(f"{name}{i}").group(name)
        out.append(
            replace(
                (built.gated() if gated else built).build(),
                claims=(PodClaim("gpus", template=None if claim else template, claim=claim),),
            )
        )
    return out


def decisions(w: DraWorld, *gangs: Gang, nodes: tuple[str, ...] = ("a",)) -> dict[str, Decision]:
    pods = [m for g in gangs for m in g.members]
    snap = snapshot(nodes=[node(n).build() for n in nodes], pods=pods, gangs=list(gangs))
    result = plan(replace(snap, devices=w))
    return {g.key.name: d for g in gangs if (d := result.for_gang(g.key)) is not None}


# ---- admitted members the scheduler has not placed yet ----------------------------------------


def test_devices_of_admitted_members_not_yet_placed_are_not_free() -> None:
    # Gang A is admitted onto node a (its gates lifted), the scheduler has not allocated its claims.
    started = members("a", 2, gated=False)
    a = gang("a").min(2).members(*started).admitted({m.uid: "a" for m in started}).build()
    b = gang("b").min(1).members(*members("b", 1)).build()
    w = world(("a", 8), t=spec(4))
    decision = decisions(w, a, b)["b"]
    assert isinstance(decision, Wait), decision
    # With room for all three, B fits: A's members are counted once each.
    assert isinstance(decisions(world(("a", 12), t=spec(4)), a, b)["b"], Admit)


def test_an_admitted_members_allocated_claim_is_not_counted_again() -> None:
    started = members("a", 2, gated=False)
    # a0's claim (made from the template) is allocated already: its 4 devices are off the room.
    started[0] = replace(started[0], claims=(PodClaim("gpus", template="t", generated="a0-gpus"),))
    done = Claim(
        "ns", "a0-gpus", spec(4), tuple((DRIVER, "a", f"gpu-{i}") for i in range(4)), "a", (started[0].uid,)
    )
    a = gang("a").min(2).members(*started).admitted({m.uid: "a" for m in started}).build()
    b = gang("b").min(1).members(*members("b", 1)).build()
    assert isinstance(decisions(world(("a", 12), claims=(done,), t=spec(4)), a, b)["b"], Admit)
    assert isinstance(decisions(world(("a", 11), claims=(done,), t=spec(4)), a, b)["b"], Wait)


# ---- who is charged for held devices -----------------------------------------------------------


def test_a_tenants_claim_annotated_as_extended_is_still_charged() -> None:
    holder = pod("h").group("h").on("a").build()
    forged = Claim(
        "ns",
        "mine",
        spec(8),
        tuple((DRIVER, "a", f"gpu-{i}") for i in range(8)),
        "a",
        (holder.uid,),
        extended=True,
    )
    h = gang("h").min(1).members(holder).admitted({holder.uid: "a"}).build()
    b = gang("b").min(1).members(*members("b", 1)).build()
    decision = decisions(world(("a", 8), claims=(forged,), t=spec(1)), h, b)["b"]
    assert isinstance(decision, Wait), decision
    snap = snapshot(nodes=[node("a").build()], pods=[holder], gangs=[h])
    assert with_devices(snap, world(("a", 8), claims=(forged,))).pods[0].requests[DRIVER] == 8


def test_the_schedulers_extended_resource_claim_is_counted_by_the_pods_own_request() -> None:
    mapped = replace(GPU_CLASS, extended_resource="example.com/gpu")
    holder = replace(
        pod("h").group("h").on("a").request("example.com/gpu", 8).build(), extended_claim="h-extended"
    )
    made = Claim(
        "ns",
        "h-extended",
        spec(8),
        tuple((DRIVER, "a", f"gpu-{i}") for i in range(8)),
        "a",
        (holder.uid,),
        extended=True,
        owner=holder.uid,
    )
    snap = snapshot(nodes=[node("a").build()], pods=[holder], gangs=[])
    translated = with_devices(snap, world(("a", 8), claims=(made,), classes=(mapped,)))
    assert translated.pods[0].requests["example.com/gpu"] == 8  # not 16
    # The same claim, not controlled by its holder: charged as any claim.
    stray = replace(made, owner="someone-else")
    translated = with_devices(snap, world(("a", 8), claims=(stray,), classes=(mapped,)))
    assert translated.pods[0].requests["example.com/gpu"] == 16


def test_a_claim_several_pods_hold_is_not_freed_by_preempting_one() -> None:
    low = [pod(f"r{i}").group("r").on("a").started(NOW - 3600).build() for i in range(2)]
    both = Claim(
        "ns",
        "shared",
        spec(4),
        tuple((DRIVER, "a", f"gpu-{i}") for i in range(4)),
        "a",
        tuple(p.uid for p in low),
    )
    running = gang("r").min(1).members(*low).admitted({p.uid: "a" for p in low}).single_disruption().build()
    urgent = [replace(m, priority=1000) for m in members("u", 1, template="t")]
    preemptor = gang("u").min(1).priority(1000).members(*urgent).build()
    decision = decisions(world(("a", 4), claims=(both,), t=spec(4)), running, preemptor)["u"]
    assert not isinstance(decision, Preempt | Admit), decision


# ---- overlapping requests and classes; what is not modelled -----------------------------------


def test_all_devices_requests_are_unproven() -> None:
    every = ClaimSpec((DeviceRequest("gpus", DRIVER, all_devices=True),))
    decision = decisions(world(("a", 8), t=every), gang("g").members(*members("g", 1)).build())["g"]
    assert isinstance(decision, Wait) and decision.reason is Reason.DEVICES_UNPROVEN, decision
    assert msg.device_allocation_mode("All") in decision.message


def test_differently_narrowed_requests_over_the_same_devices_are_not_both_admitted() -> None:
    # Node a: 8 devices; H100 are gpu-0,2,4,6; nvlink domain 0 is gpu-0..3. Each request's own
    # room is 4 and the class has 8, but together they need 6 of the devices both may take.
    h100 = ClaimSpec((DeviceRequest("gpus", DRIVER, (MODEL,), 4),))
    domain0 = ClaimSpec(
        (DeviceRequest("gpus", DRIVER, (f"device.attributes['{DRIVER}'].nvlinkDomain == 0",), 4),)
    )
    x = gang("x").members(*members("x", 1, template="h100")).build()
    y = gang("y").members(*members("y", 1, template="domain0")).build()
    out = decisions(world(("a", 8), h100=h100, domain0=domain0), x, y)
    admitted = [name for name, d in out.items() if isinstance(d, Admit)]
    assert len(admitted) == 1, out
    other = out["y" if admitted == ["x"] else "x"]
    assert isinstance(other, Wait) and other.reason is Reason.DEVICES_UNPROVEN, other
    assert msg.device_requests_overlap(DRIVER) in other.message


def test_the_same_narrow_request_in_two_gangs_is_counted_together() -> None:
    h100 = ClaimSpec((DeviceRequest("gpus", DRIVER, (MODEL,), 2),))
    x = gang("x").members(*members("x", 1, template="h100")).build()
    y = gang("y").members(*members("y", 1, template="h100")).build()
    out = decisions(world(("a", 8), h100=h100), x, y)
    assert all(isinstance(d, Admit) for d in out.values()), out
    out = decisions(world(("a", 6), h100=h100), x, y)  # 3 H100: one gang waits for room
    assert sorted(type(d).__name__ for d in out.values()) == ["Admit", "Wait"], out


def test_requests_of_the_same_devices_with_different_counts_share_their_room() -> None:
    def h100(count: int) -> ClaimSpec:
        return ClaimSpec((DeviceRequest("gpus", DRIVER, (MODEL,), count),))

    launcher = replace(members("g", 1, template="one")[0], uid="launcher", name="launcher")
    g = gang("g").min(3).members(launcher, *members("g", 2, template="two")).build()
    assert isinstance(decisions(world(("a", 10), one=h100(1), two=h100(2)), g)["g"], Admit)  # 5 H100
    assert isinstance(decisions(world(("a", 8), one=h100(1), two=h100(2)), g)["g"], Wait)  # 4 H100
    x = gang("x").members(*members("x", 1, template="two")).build()
    y = gang("y").members(*members("y", 1, template="four")).build()
    out = decisions(world(("a", 8), two=h100(2), four=h100(4)), x, y)  # 4 H100: not 6
    assert sorted(type(d).__name__ for d in out.values()) == ["Admit", "Wait"], out


def test_a_constraint_naming_a_first_available_request_holds_for_its_subrequests() -> None:
    nested = ClaimSpec(
        (DeviceRequest("gpus", "", alternatives=(DeviceRequest("gpus/big", DRIVER, count=3),)),),
        ((DOMAIN, ("gpus",)),),
    )
    # 6 devices in nvlink domains of 4 and 2: one group of 3 fits, not two.
    g = gang("g").min(2).members(*members("g", 2, template="t")).build()
    assert isinstance(decisions(world(("a", 6), t=nested), g)["g"], Wait)
    assert isinstance(decisions(world(("a", 8), t=nested), g)["g"], Admit)


def test_members_sharing_an_unallocated_claim_land_on_one_node_under_a_wider_required_level() -> None:
    shared = Claim("ns", "shared", spec(2))
    pods = [
        replace(m, requests={**m.requests, "cpu": 40_000}) for m in members("g", 2, claim="shared")
    ]  # one member per node: both only fit apart
    g = gang("g").min(2).requires("rack").members(*pods).build()
    nodes = [node(n).label("rack", "r1").build() for n in ("a", "b")]
    snap = snapshot(nodes=nodes, pods=pods, gangs=[g])
    decision = plan(replace(snap, devices=world(("a", 4), ("b", 4), claims=(shared,)))).for_gang(g.key)
    assert not isinstance(decision, Admit), decision


def test_a_request_of_a_narrower_class_counts_its_own_devices() -> None:
    # Class "h100" selects a subset of class "gpu.example.com"'s devices (sorted after it).
    h100 = DeviceClass("h100", (f"device.driver == '{DRIVER}'", MODEL))
    g = gang("g").min(2).members(*members("g", 2, template="t")).build()
    w = world(("a", 4), classes=(GPU_CLASS, h100), t=spec(1, device_class="h100"))
    assert isinstance(decisions(w, g)["g"], Admit)  # 2 H100 of 4 devices
    g3 = gang("g").min(3).members(*members("g", 3, template="t")).build()
    assert isinstance(decisions(w, g3)["g"], Wait)  # not 3
    # Both classes' requests together never take more than the node has.
    plain = gang("p").min(1).members(*members("p", 1, template="p")).build()
    w = world(("a", 4), classes=(GPU_CLASS, h100), t=spec(1, device_class="h100"), p=spec(3))
    out = decisions(w, g, plain)
    assert sorted(type(d).__name__ for d in out.values()) == ["Admit", "Wait"], out


def test_a_class_whose_selector_fails_makes_a_plain_request_unproven() -> None:
    broken = DeviceClass("broken", (f"device.attributes['{DRIVER}'].nosuch == 1",))
    g = gang("g").members(*members("g", 1, template="t")).build()
    w = world(("a", 4), classes=(GPU_CLASS, broken), t=spec(1, device_class="broken"))
    decision = decisions(w, g)["g"]
    assert isinstance(decision, Wait) and decision.reason is Reason.DEVICES_UNPROVEN, decision
