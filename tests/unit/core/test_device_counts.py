"""What a preemption of DRA gangs costs, in devices: the Preempt decision counts them as GPUs."""

from __future__ import annotations

from dataclasses import replace

from controller.core.model import Preempt
from controller.core.planner import plan
from tests.unit.core.builders import NOW, node, snapshot
from tests.unit.core.test_devices import DRIVER, gang_of, holders, spec, world


def test_a_preemption_counts_the_victims_devices_and_their_device_seconds() -> None:
    _, claims, running = holders(2, "a", 4, priority=0)  # 8 devices held for an hour
    members, g = gang_of(2, "t")
    members = [replace(m, priority=1000) for m in members]
    g = replace(g, priority=1000, members=tuple(members))
    snap = snapshot(nodes=[node("a").build()], pods=[*running.members, *members], gangs=[running, g])
    decision = plan(replace(snap, devices=world(("a", 8), claims=claims, t=spec(4)))).for_gang(g.key)
    assert isinstance(decision, Preempt), decision
    assert decision.gpu_resource == DRIVER  # the DeviceClass: this cluster's GPUs are its devices
    assert (decision.gpus_evicted, decision.gpus_gained) == (8, 8)
    assert decision.gpu_seconds == 8 * 3600.0
    assert f"8 {DRIVER}" in decision.message


def test_without_devices_a_preemption_counts_nvidia_gpus() -> None:
    from tests.unit.core.builders import gang, pod

    running = [pod(f"r{i}").gpus(4).group("r").on("a").started(NOW - 60).build() for i in range(2)]
    low = gang("r").min(2).members(*running).admitted({p.uid: "a" for p in running}).build()
    members = [pod(f"m{i}").gpus(4).gated().group("g").priority(1000).build() for i in range(2)]
    high = gang("g").min(2).members(*members).priority(1000).build()
    snap = snapshot(nodes=[node("a").gpus(8).build()], pods=[*running, *members], gangs=[low, high])
    decision = plan(snap).for_gang(high.key)
    assert isinstance(decision, Preempt), decision
    assert decision.gpu_resource == "nvidia.com/gpu" and decision.gpu_seconds == 8 * 60.0
