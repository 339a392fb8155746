"""ResourceSlice node selection as the planner reads it (controller/api/dra_records.py)."""

from __future__ import annotations

from typing import Any

from controller.api.dra_records import slice_record
from controller.core import NodeReach, Requirement


def raw_slice(**selection: Any) -> dict[str, Any]:
    spec = {"driver": "gpu.example.com", "pool": {"name": "p", "generation": 2, "resourceSliceCount": 1}}
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
