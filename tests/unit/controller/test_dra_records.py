"""ResourceSlice node selection as the planner reads it (controller/api/dra_records.py)."""

from __future__ import annotations

from typing import Any

from controller.api.dra_records import claim_record, slice_record
from controller.core import NodeReach, Requirement


def raw_slice(**selection: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": "gpu.example.com",
        "pool": {"name": "p", "generation": 2, "resourceSliceCount": 1},
    }
    spec |= selection
    spec.setdefault("devices", [{"name": "d0"}, {"name": "d1"}])
    return {"metadata": {"name": "s"}, "spec": spec}


def test_node_local_slice() -> None:
    record = slice_record(raw_slice(nodeName="n1"))
    assert [(d.node, d.reach) for d in record.devices] == [("n1", None), ("n1", None)]
    assert record.generation == 2


def test_all_nodes_and_node_selector_slices_reach_through_a_node_reach() -> None:
    assert slice_record(raw_slice(allNodes=True)).devices[0].reach == NodeReach(all_nodes=True)
    selector = {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}],
                "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}],
            }
        ]
    }
    device = slice_record(raw_slice(nodeSelector=selector)).devices[0]
    assert device.node is None
    assert device.reach == NodeReach(
        terms=(
            (Requirement("rack", "In", ("r1",)), Requirement("metadata.name", "NotIn", ("n9",), field=True)),
        )
    )


def test_per_device_node_selection() -> None:
    devices = [{"name": "d0", "nodeName": "n1"}, {"name": "d1", "allNodes": True}, {"name": "d2"}]
    record = slice_record(raw_slice(perDeviceNodeSelection=True, devices=devices))
    assert [(d.node, d.reach) for d in record.devices] == [
        ("n1", None),
        (None, NodeReach(all_nodes=True)),
        (None, None),  # no selection known: reachable from no node, never counted
    ]


def raw_claim(allocation: dict[str, Any]) -> dict[str, Any]:
    results = [{"driver": "gpu.example.com", "pool": "p", "device": "d0", "request": "gpus"}]
    return {
        "metadata": {"namespace": "ns", "name": "c"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu"}}]}},
        "status": {"allocation": {"devices": {"results": results}, **allocation}},
    }


def test_where_an_allocated_claim_may_be_used() -> None:
    def terms(*reqs: dict[str, Any]) -> dict[str, Any]:
        return {"nodeSelector": {"nodeSelectorTerms": [{"matchFields": list(reqs)}]}}

    one = claim_record(raw_claim(terms({"key": "metadata.name", "operator": "In", "values": ["n1"]})))
    assert (one.allocated_node, one.allocated_reach) == ("n1", None)
    not_one = claim_record(raw_claim(terms({"key": "metadata.name", "operator": "NotIn", "values": ["n1"]})))
    assert not_one.allocated_node is None
    assert not_one.allocated_reach == NodeReach(
        terms=((Requirement("metadata.name", "NotIn", ("n1",), True),),)
    )
    anywhere = claim_record(raw_claim({}))
    assert (anywhere.allocated_node, anywhere.allocated_reach) == (None, NodeReach(all_nodes=True))
    unallocated = claim_record({"metadata": {"namespace": "ns", "name": "c"}, "spec": {}})
    assert (unallocated.allocated_node, unallocated.allocated_reach) == (None, None)


def test_only_a_pools_newest_complete_generation_counts() -> None:
    from controller.api import resources
    from controller.api.store import Store

    def part(name: str, generation: int, count: int, *devices: str, **selection: Any) -> dict[str, Any]:
        body = raw_slice(**selection, devices=[{"name": d} for d in devices])
        body["metadata"]["name"] = name
        body["spec"]["pool"] = {"name": "p", "generation": generation, "resourceSliceCount": count}
        return body

    store = Store()
    kind = str(resources.RESOURCE_SLICES)
    store.upsert_dra(kind, part("old", 1, 1, "d0", allNodes=True))
    world = store.dra_world()
    assert world is not None and [d.name for d in world.devices] == ["d0"]
    # Generation 2 of two slices, one seen so far: incomplete, and it replaces generation 1.
    store.upsert_dra(kind, part("new-a", 2, 2, "d1", allNodes=True))
    world = store.dra_world()
    assert world is not None and world.devices == ()
    store.upsert_dra(kind, part("new-b", 2, 2, "d2", nodeSelector={"nodeSelectorTerms": []}))
    world = store.dra_world()
    assert world is not None and sorted(d.name for d in world.devices) == ["d1", "d2"]
