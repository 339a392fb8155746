"""The operators' kinds (JobSet, LeaderWorkerSet, RayCluster, TrainJob): one gang per object (per
group for LeaderWorkerSet), sized from the object's spec, with their deadlocks fixed or warned."""

from __future__ import annotations

from typing import Any

import pytest

from shared import constants as c
from shared.kinds import JOBSET, LEADERWORKERSET, RAYCLUSTER, STATEFULSET, TRAINJOB
from shared.workloads import GVK
from webhook.mutate import MutationConfig, Outcome, mutate

from .builders import apply_patch, request

CONFIG = MutationConfig()


def _template(gpus: int = 1) -> dict[str, Any]:
    return {
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
            ]
        }
    }


def jobset(*replicated: tuple[int, int], **spec: Any) -> dict[str, Any]:
    """A JobSet with one replicatedJob per (replicas, parallelism)."""
    jobs = [
        {
            "name": f"rj{i}",
            "replicas": replicas,
            "template": {
                "spec": {"parallelism": parallelism, "completions": parallelism, "template": _template()}
            },
        }
        for i, (replicas, parallelism) in enumerate(replicated)
    ]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js"},
        "spec": {"replicatedJobs": jobs, **spec},
    }


def lws(size: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "serve"},
        "spec": {
            "replicas": 2,
            "leaderWorkerTemplate": {
                "size": size,
                "leaderTemplate": _template(),
                "workerTemplate": _template(),
            },
            **spec,
        },
    }


def raycluster(*groups: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": "ray"},
        "spec": {
            "headGroupSpec": {"template": _template()},
            "workerGroupSpecs": [
                {"groupName": f"g{i}", "template": _template(), **g} for i, g in enumerate(groups)
            ],
        },
    }


def run(obj: dict[str, Any], gvk: GVK) -> tuple[Any, dict[str, Any]]:
    req = request(obj, gvk=gvk)
    mutation = mutate(req, CONFIG)
    return mutation, apply_patch(req["object"], mutation.ops)


def pod_templates(doc: dict[str, Any], *paths: tuple[str | int, ...]) -> list[dict[str, Any]]:
    found = []
    for path in paths:
        node: Any = doc
        for step in path:
            node = node[step]
        found.append(node)
    return found


def test_a_jobset_is_one_gang_of_every_pod_of_its_jobs() -> None:
    mutation, out = run(jobset((2, 4), (1, 1)), JOBSET)
    assert mutation.outcome is Outcome.PATCHED
    templates = [rj["template"]["spec"]["template"] for rj in out["spec"]["replicatedJobs"]]
    for template in templates:
        assert template["metadata"]["labels"][c.POD_GROUP_LABEL] == "js"
        assert template["metadata"]["annotations"][c.INFERRED_MIN_MEMBER_ANNOTATION] == "9"
        assert {"name": c.GATE} in template["spec"]["schedulingGates"]


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ({"startupPolicy": {"startupPolicyOrder": "InOrder"}}, "InOrder"),
        ({"suspend": True}, "Kueue"),
    ],
)
def test_jobset_settings_that_keep_the_gang_from_forming_are_warned_about(
    spec: dict[str, Any], words: str
) -> None:
    mutation, _ = run(jobset((1, 2), **spec), JOBSET)
    assert any(words in w for w in mutation.warnings), mutation.warnings
    plain, _ = run(jobset((1, 2)), JOBSET)
    assert not any(words in w for w in plain.warnings)


def test_jobset_depends_on_and_exclusive_placement_are_warned_about() -> None:
    body = jobset((1, 1), (1, 2))
    body["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "rj0", "status": "Ready"}]
    body["metadata"]["annotations"] = {"alpha.jobset.sigs.k8s.io/exclusive-topology": "rack"}
    mutation, _ = run(body, JOBSET)
    text = " ".join(mutation.warnings)
    assert "dependsOn" in text and "rj1" in text and "exclusive-topology" in text


def test_a_job_made_by_a_jobset_keeps_the_jobsets_gang_and_size() -> None:
    _, out = run(jobset((2, 4), (1, 1)), JOBSET)
    child_template = out["spec"]["replicatedJobs"][0]["template"]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "js-rj0-0",
            "labels": {"jobset.sigs.k8s.io/jobset-name": "js"},
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": "js",
                    "uid": "u",
                    "controller": True,
                }
            ],
        },
        "spec": child_template["spec"],
    }
    mutation, child = run(job, ("batch", "v1", "Job"))
    annotations = child["spec"]["template"]["metadata"]["annotations"]
    assert child["spec"]["template"]["metadata"]["labels"][c.POD_GROUP_LABEL] == "js"
    assert annotations[c.INFERRED_MIN_MEMBER_ANNOTATION] == "9", mutation.warnings


def test_a_leaderworkerset_is_gated_and_sized_per_group_without_one_shared_group() -> None:
    mutation, out = run(lws(4, startupPolicy="LeaderReady"), LEADERWORKERSET)
    assert mutation.outcome is Outcome.PATCHED
    template = out["spec"]["leaderWorkerTemplate"]
    for part in ("leaderTemplate", "workerTemplate"):
        assert {"name": c.GATE} in template[part]["spec"]["schedulingGates"]
        assert template[part]["metadata"]["annotations"][c.INFERRED_MIN_MEMBER_ANNOTATION] == "4"
        assert c.POD_GROUP_LABEL not in template[part].get("metadata", {}).get("labels", {})
    # LeaderReady would create the workers only once the gated leader runs: never.
    assert out["spec"]["startupPolicy"] == "LeaderCreated"
    assert any("LeaderReady" in w for w in mutation.warnings)


def test_each_leaderworkerset_pod_joins_the_gang_of_its_group() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "serve-1-2",
            "labels": {
                "leaderworkerset.sigs.k8s.io/name": "serve",
                "leaderworkerset.sigs.k8s.io/group-index": "1",
            },
            "annotations": {c.INFERRED_MIN_MEMBER_ANNOTATION: "4"},
        },
        "spec": {"schedulingGates": [{"name": c.GATE}], "containers": [{"name": "c", "image": "x"}]},
    }
    mutation, out = run(pod, ("", "v1", "Pod"))
    assert out["metadata"]["labels"][c.POD_GROUP_LABEL] == "serve-1", mutation
    # Without the size Phalanx wrote on the template, the pod is not one Phalanx gated.
    del pod["metadata"]["annotations"]
    mutation, out = run(pod, ("", "v1", "Pod"))
    assert c.POD_GROUP_LABEL not in out["metadata"]["labels"]


def test_the_statefulsets_a_leaderworkerset_makes_are_left_to_it() -> None:
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "serve", "labels": {"leaderworkerset.sigs.k8s.io/name": "serve"}},
        "spec": {
            "replicas": 2,
            "template": {"metadata": {"annotations": {c.INFERRED_MIN_MEMBER_ANNOTATION: "4"}}, **_template()},
        },
    }
    mutation, _ = run(sts, STATEFULSET)
    assert mutation.outcome is Outcome.SKIPPED and not mutation.ops


@pytest.mark.parametrize(
    ("groups", "size"),
    [
        ((), 1),
        (({"replicas": 4, "minReplicas": 4, "maxReplicas": 4},), 5),
        (({"replicas": 3, "minReplicas": 1, "maxReplicas": 5, "numOfHosts": 2}, {"minReplicas": 2}), 5),
    ],
)
def test_a_raycluster_is_its_head_and_every_worker_group_at_min_replicas(
    groups: tuple[dict[str, Any], ...], size: int
) -> None:
    mutation, out = run(raycluster(*groups), RAYCLUSTER)
    templates = [out["spec"]["headGroupSpec"]["template"]] + [
        g["template"] for g in out["spec"]["workerGroupSpecs"]
    ]
    for template in templates:
        assert template["metadata"]["labels"][c.POD_GROUP_LABEL] == "ray"
        assert template["metadata"]["annotations"][c.INFERRED_MIN_MEMBER_ANNOTATION] == str(size), (
            mutation.warnings
        )


def test_a_trainjob_is_only_warned_about_kueue() -> None:
    trainjob = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "t", "labels": {"kueue.x-k8s.io/queue-name": "team"}},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
    }
    mutation, _ = run(trainjob, TRAINJOB)
    assert not mutation.ops
    assert any("Kueue" in w and "team" in w for w in mutation.warnings)


@pytest.mark.parametrize(
    ("gvk", "spec"),
    [
        (JOBSET, {"replicatedJobs": "x"}),
        (
            JOBSET,
            {
                "replicatedJobs": [
                    5,
                    {"template": []},
                    {"replicas": "2", "template": {"spec": {"template": 3}}},
                ]
            },
        ),
        (JOBSET, {"replicatedJobs": [{"dependsOn": "x"}], "startupPolicy": []}),
        (LEADERWORKERSET, {"leaderWorkerTemplate": "x", "startupPolicy": 1}),
        (LEADERWORKERSET, {"leaderWorkerTemplate": {"size": "3", "workerTemplate": {"spec": []}}}),
        (RAYCLUSTER, {"headGroupSpec": [], "workerGroupSpecs": [None, {"minReplicas": "x", "template": 1}]}),
        (TRAINJOB, {"suspend": "yes"}),
    ],
)
def test_malformed_operator_objects_are_admitted_without_error(gvk: GVK, spec: Any) -> None:
    """Custom resources reach the webhook before schema validation: wrong types are tolerated."""
    body = {"apiVersion": "/".join(gvk[:2]), "kind": gvk[2], "metadata": {"name": "m"}, "spec": spec}
    mutation, _ = run(body, gvk)
    assert mutation.allowed


def test_a_leaderworkerset_opted_in_by_its_label_passes_it_to_both_templates() -> None:
    """Its pods are named into their group's gang by the pod webhook, which must see them."""
    body = lws(4)
    body["metadata"]["labels"] = {c.OPT_IN_LABEL: c.OPT_IN_VALUE}
    mutation, out = run(body, LEADERWORKERSET)
    assert mutation.outcome is Outcome.PATCHED
    for name in ("leaderTemplate", "workerTemplate"):
        template = out["spec"]["leaderWorkerTemplate"][name]
        assert template["metadata"]["labels"][c.OPT_IN_LABEL] == c.OPT_IN_VALUE
        assert {"name": c.GATE} in template["spec"]["schedulingGates"]
