"""A native PodGroup's resourceClaims and claims reserved for a PodGroup, read into the DRA world."""

from __future__ import annotations

from typing import Any

from controller.api import resources
from controller.api.dra_records import claim_record, group_claims
from controller.api.store import Store
from controller.core import GroupClaim


def native_group(
    claims: list[dict[str, Any]], statuses: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": "ns", "uid": "pg-uid"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "resourceClaims": claims},
    }
    if statuses is not None:
        raw["status"] = {"resourceClaimStatuses": statuses}
    return raw


def test_a_podgroups_claims_are_read_with_the_names_its_status_gives() -> None:
    raw = native_group(
        [
            {"name": "gpus", "resourceClaimTemplateName": "four"},
            {"name": "nic", "resourceClaimName": "fabric"},
        ],
        [{"name": "gpus", "resourceClaimName": "train-gpus-abc12"}],
    )
    assert group_claims(raw) == (
        GroupClaim("gpus", template="four", generated="train-gpus-abc12"),
        GroupClaim("nic", claim="fabric"),
    )
    assert group_claims(native_group([])) == ()


def test_a_claim_reserved_for_a_podgroup_names_the_group() -> None:
    raw = {
        "metadata": {"name": "train-gpus-abc12", "namespace": "ns"},
        "spec": {
            "devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "c", "count": 4}}]}
        },
        "status": {
            "reservedFor": [
                {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "train", "uid": "pg-uid"},
                {"resource": "pods", "name": "p", "uid": "pod-uid"},
            ]
        },
    }
    claim = claim_record(raw)
    assert claim.reserved_for_groups == ("train",)
    assert claim.reserved_for == ("pg-uid", "pod-uid")


def test_the_dra_world_follows_the_podgroups_claims() -> None:
    store = Store()
    store.upsert_dra(str(resources.DEVICE_CLASSES), {"metadata": {"name": "c"}, "spec": {}})
    changes: list[object] = []
    store.subscribe(changes.append)
    store.upsert_native_podgroup(native_group([{"name": "gpus", "resourceClaimTemplateName": "four"}]))
    world = store.dra_world()
    assert world is not None and world.group_claims == {("ns", "train"): (GroupClaim("gpus", "four"),)}
    assert None in changes  # every gang may move: the claim is counted in the world
    status = [{"name": "gpus", "resourceClaimName": "train-gpus-abc12"}]
    store.upsert_native_podgroup(
        native_group([{"name": "gpus", "resourceClaimTemplateName": "four"}], status)
    )
    world = store.dra_world()
    assert world is not None and world.group_claims[("ns", "train")][0].generated == "train-gpus-abc12"
    store.delete_native_podgroup(native_group([]))
    world = store.dra_world()
    assert world is not None and world.group_claims == {}
