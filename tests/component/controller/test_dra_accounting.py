"""DRA devices through the whole controller (store, translation, planner, executor): devices of a
gang whose gates are lifted stay taken until the scheduler allocates them, and a claim a tenant
annotates as the scheduler's extended-resource claim is charged like any other."""

from __future__ import annotations

from typing import Any

from controller.api import resources as r
from shared import constants as c
from tests.component.controller.harness import NS, Harness, gates_of, node, pod

API = "resource.k8s.io/v1"
DRIVER = "gpu.example.com"
TEMPLATE = {"name": "gpus", "resourceClaimTemplateName": "four-gpus"}


def devices_on(node_name: str, n: int) -> dict[str, Any]:
    """A node-local ResourceSlice of ``n`` devices."""
    return {
        "apiVersion": API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(n)],
        },
    }


def four_gpus() -> dict[str, Any]:
    exactly = {"deviceClassName": DRIVER, "count": 4}
    return {
        "apiVersion": API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "four-gpus", "namespace": NS},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}},
    }


def dra_cluster(h: Harness) -> None:
    """dra-0 with 8 devices of class gpu.example.com; a template of 4 of them."""
    h.kube.seed(r.NODES, node("dra-0", gpus=0))
    selector = {"cel": {"expression": f"device.driver == '{DRIVER}'"}}
    device_class = {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": DRIVER}}
    h.kube.seed(r.DEVICE_CLASSES, {**device_class, "spec": {"selectors": [selector]}})
    h.kube.seed(r.RESOURCE_SLICES, devices_on("dra-0", 8))
    h.kube.seed(r.RESOURCE_CLAIM_TEMPLATES, four_gpus())


def claiming(name: str, group: str, n: int) -> dict[str, Any]:
    body = pod(name, group, gpus=0, min_member=n)
    body["spec"]["resourceClaims"] = [TEMPLATE]
    return body


async def settle(h: Harness) -> None:
    for _ in range(3):
        await h.step()


async def test_devices_of_a_gang_let_go_stay_taken_until_the_scheduler_allocates_them(h: Harness) -> None:
    dra_cluster(h)
    h.kube.seed(r.PODS, claiming("a-0", "a", 2), claiming("a-1", "a", 2))
    await settle(h)
    assert all(not gates_of(h.pod(f"a-{i}")) for i in range(2))
    assert {h.pin("a-0"), h.pin("a-1")} == {"dra-0"}
    # Gang a's claims are not allocated yet (the scheduler has not run): its 8 devices are taken.
    h.kube.seed(r.PODS, claiming("b-0", "b", 1))
    await settle(h)
    assert gates_of(h.pod("b-0")) == [c.GATE]
    group = h.pg("b")
    assert group is not None and group["status"]["reason"] == "InsufficientCapacity", group.get("status")


async def test_a_claim_annotated_as_an_extended_resource_claim_by_its_creator_is_charged(h: Harness) -> None:
    dra_cluster(h)
    holder = pod("holder", group=None, gates=(), gpus=0, node_name="dra-0", phase="Running")
    h.kube.seed(r.PODS, holder)
    uid = h.kube.obj(r.PODS, NS, "holder")["metadata"]["uid"]  # type: ignore[index]
    results = [{"request": "gpus", "driver": DRIVER, "pool": "dra-0", "device": f"gpu-{i}"} for i in range(8)]
    on_dra_0 = {"key": "metadata.name", "operator": "In", "values": ["dra-0"]}
    forged = {
        "apiVersion": API,
        "kind": "ResourceClaim",
        # Written by the tenant: not made by the scheduler, whatever the annotation says.
        "metadata": {
            "name": "mine",
            "namespace": NS,
            "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
        },
        "spec": four_gpus()["spec"]["spec"],
        "status": {
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [on_dra_0]}]},
            },
            "reservedFor": [{"resource": "pods", "name": "holder", "uid": uid}],
        },
    }
    h.kube.seed(r.RESOURCE_CLAIMS, forged)
    h.kube.seed(r.PODS, claiming("b-0", "b", 1))
    await settle(h)
    assert gates_of(h.pod("b-0")) == [c.GATE]
