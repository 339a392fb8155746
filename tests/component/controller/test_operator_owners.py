"""A gang of pods an operator made is owned by the object the user applied, read once."""

from __future__ import annotations

from controller.api import resources as r
from controller.api.kube import ApiError
from controller.api.resources import JOBSETS
from tests.component.controller.harness import JOB, KEY, NS, Harness, gang

JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"


def _labelled(pods: list[dict[str, object]], name: str) -> list[dict[str, object]]:
    for p in pods:
        p["metadata"]["labels"][JOBSET_LABEL] = name  # type: ignore[index]
    return pods


async def test_the_podgroup_of_a_jobsets_pods_is_owned_by_the_jobset(h: Harness) -> None:
    (jobset,) = h.kube.seed(JOBSETS, {"metadata": {"name": "js", "namespace": NS}, "spec": {}})
    h.kube.seed(r.PODS, *_labelled(gang(5), "js"))
    h.sync()

    await h.reconcile(KEY)

    pg = h.pg()
    assert pg is not None
    # Not the child Job the pods belong to: the JobSet.
    assert pg["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "js",
            "uid": jobset["metadata"]["uid"],
            "controller": False,
            "blockOwnerDeletion": False,
        }
    ]


async def test_an_unreadable_operator_object_leaves_the_pods_own_owner(h: Harness) -> None:
    h.kube.seed(r.PODS, *_labelled(gang(5), "gone"))
    h.kube.fail("get", ApiError(404, "NotFound", "jobsets gone not found"), rt=JOBSETS)
    h.sync()

    await h.reconcile(KEY)

    pg = h.pg()
    assert pg is not None
    assert pg["metadata"]["ownerReferences"] == [{**JOB, "controller": False, "blockOwnerDeletion": False}]
