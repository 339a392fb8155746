"""A native PodGroup's own ResourceClaims (spec.resourceClaims, DRAWorkloadResourceClaims) through
the whole controller: read with the PodGroup, planned as one claim for the gang, members pinned
where its devices are."""

from __future__ import annotations

from typing import Any

from controller.api import resources as r
from shared import constants as c
from tests.component.cli.scenario import DRA_API, DRA_CLASS, claim_template, dra_node, resource_slice
from tests.component.controller.harness import NS, Harness, gates_of, pod
from tests.component.controller.test_native_podgroups import native_podgroup, settle

ENTRY = {"name": "gpus", "resourceClaimTemplateName": "five-gpus"}


def dra_cluster(h: Harness) -> None:
    """dra-0 with 4 devices, dra-1 with 5; a template of one claim of 5 devices."""
    h.kube.seed(r.NODES, dra_node("dra-0"), dra_node("dra-1"))
    selector = {"cel": {"expression": f"device.driver == '{DRA_CLASS}'"}}
    device_class = {"apiVersion": DRA_API, "kind": "DeviceClass", "metadata": {"name": DRA_CLASS}}
    h.kube.seed(r.DEVICE_CLASSES, {**device_class, "spec": {"selectors": [selector]}})
    h.kube.seed(r.RESOURCE_SLICES, resource_slice("dra-0", 4), resource_slice("dra-1", 5))
    h.kube.seed(r.RESOURCE_CLAIM_TEMPLATES, claim_template("five-gpus", 5))


def members(n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        body = pod(f"train-{i}", group="train", owner=None, min_member=None, gpus=0)
        body["spec"]["schedulingGroup"] = {"podGroupName": "train"}
        body["spec"]["resourceClaims"] = [ENTRY]
        out.append(body)
    return out


def made_claim() -> dict[str, Any]:
    """The claim the control plane makes from the template for the PodGroup."""
    spec = claim_template("five-gpus", 5)["spec"]["spec"]  # type: ignore[index]
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceClaim",
        "metadata": {"name": "train-gpus-x1", "namespace": NS},
        "spec": spec,
    }


def pinned_node(body: dict[str, Any]) -> str | None:
    terms = (
        ((body["spec"].get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    for term in terms:
        for field in term.get("matchFields") or []:
            if field["key"] == "metadata.name":
                return str(field["values"][0])
    return None


async def test_a_podgroup_claim_waits_until_made_then_its_gang_starts_on_its_devices(h: Harness) -> None:
    dra_cluster(h)
    h.kube.seed(r.NATIVE_PODGROUPS, native_podgroup(min_count=3, resourceClaims=[ENTRY]))
    h.kube.seed(r.PODS, *members(3))
    await settle(h)
    # The control plane has not made the group's claim yet: nothing is admitted on a guess.
    group = h.pg("train")
    assert group is not None and group["status"]["reason"] == "DevicesUnproven", group.get("status")
    assert "PodGroup train's claim gpus is not made yet" in group["status"]["message"]
    assert all(gates_of(h.pod(f"train-{i}")) == [c.GATE] for i in range(3))

    h.kube.seed(r.RESOURCE_CLAIMS, made_claim())
    status = {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "train-gpus-x1"}]}
    h.kube.mutate(r.NATIVE_PODGROUPS, NS, "train", lambda pg: pg.update(status=status))
    await settle(h)
    # One claim of 5 for the gang (not 3 × 5): only dra-1 holds it, and every member goes there.
    assert all(not gates_of(h.pod(f"train-{i}")) for i in range(3))
    assert {pinned_node(h.pod(f"train-{i}")) for i in range(3)} == {"dra-1"}
