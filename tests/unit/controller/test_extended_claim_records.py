"""What decides whether a claim is the scheduler's extended-resource claim for a pod: the claim's
controlling owner and the pod's status, read beside the claim's annotation (which its creator
writes)."""

from __future__ import annotations

from controller.api.dra_records import claim_record
from controller.api.records import pod_record

ANNOTATED = {"resource.kubernetes.io/extended-resource-claim": "true"}


def test_a_claims_controlling_owner_is_read() -> None:
    refs = [
        {"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "not-controller"},
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": True},
    ]
    raw = {"metadata": {"name": "c", "namespace": "ns", "annotations": ANNOTATED, "ownerReferences": refs}}
    claim = claim_record(raw)
    assert claim.extended and claim.owner == "u"
    tenants = claim_record({"metadata": {"name": "c", "namespace": "ns", "annotations": ANNOTATED}})
    assert tenants.extended and tenants.owner is None


def test_the_pods_extended_resource_claim_is_read_from_its_status() -> None:
    raw = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": {"containers": [{"name": "c"}]},
        "status": {"extendedResourceClaimStatus": {"resourceClaimName": "p-extended-abc"}},
    }
    assert pod_record(raw).extended_claim == "p-extended-abc"
    del raw["status"]
    assert pod_record(raw).extended_claim is None
