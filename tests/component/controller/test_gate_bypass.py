"""Members bound without Phalanx's admission (someone else lifted the gate) are reported, once."""

from __future__ import annotations

from controller import resources as r
from tests.component.controller.harness import KEY, NS, Harness, bind, gang

BYPASS_METRIC = "phalanx_gate_bypassed_pods_total"


def lift_by_hand(h: Harness, name: str, node_name: str) -> None:
    """What `kubectl patch` removing the gate, then the scheduler, do to a pod."""

    def ungate(obj: dict[str, object]) -> None:
        obj["spec"].pop("schedulingGates", None)  # type: ignore[attr-defined]

    h.kube.mutate(r.PODS, NS, name, ungate)
    bind(h.kube, name, node_name)


def bypass_events(h: Harness) -> list[dict[str, object]]:
    return [e for e in h.kube.events() if e["reason"] == "GateBypassed"]


async def test_members_bound_while_the_gang_waits_are_reported_on_pod_and_podgroup(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(12))  # 12 GPUs wanted, 8 in the cluster: never admitted
    await h.step()
    lift_by_hand(h, "g-0", "node-0")
    lift_by_hand(h, "g-1", "node-1")
    await h.step()

    events = bypass_events(h)
    involved = sorted((e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in events)  # type: ignore[index]
    assert involved == [("Pod", "g-0"), ("Pod", "g-1"), ("PodGroup", KEY.name)]
    assert all(e["type"] == "Warning" for e in events)
    assert "never admitted" in str(events[0]["message"])
    assert h.metrics.registry.get_sample_value(BYPASS_METRIC) == 2

    await h.step()  # reported once, not on every pass
    assert len(bypass_events(h)) == 3
    assert h.metrics.registry.get_sample_value(BYPASS_METRIC) == 2


async def test_members_phalanx_admitted_are_never_reported(h: Harness) -> None:
    h.kube.seed(r.PODS, *gang(5))
    await h.step()  # admitted: every gate lifted and pinned by Phalanx
    for i in range(5):
        pinned = h.pin(f"g-{i}")
        assert pinned is not None
        bind(h.kube, f"g-{i}", pinned)
    await h.step()
    await h.step()
    assert bypass_events(h) == []
    assert h.metrics.registry.get_sample_value(BYPASS_METRIC) == 0
