"""The webhook alone, on the real API server: what `kubectl apply` of ordinary workloads turns into.

The controller is paused for this module so that what the webhook did stays visible (otherwise
the controller would admit these small gangs within milliseconds).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests import builders
from tests.conftest import NodePool
from tests.e2e.kube import GROUP_LABEL, apply, bound, gated, pods
from tests.e2e.test_controller import pooled_pod
from tests.e2e.waiting import eventually, stays
from tests.localcluster import LocalCluster
from tests.localcluster.phalanx import Phalanx

MANIFESTS = Path(__file__).parent / "manifests"


@pytest.fixture(scope="module", autouse=True)
def controller_paused(phalanx: Phalanx) -> Iterator[None]:
    phalanx.stop_controller()
    yield
    phalanx.start_controller()


def test_job_members_are_gated_and_labelled(
    cluster: LocalCluster, gang_namespace: str, namespace: str
) -> None:
    job = builders.job("train").parallelism(4).gpus(1).build()
    apply(cluster, gang_namespace, job)
    members = eventually(
        lambda: (found := pods(cluster, gang_namespace, "job-name=train")) and len(found) == 4 and found,
        30,
        what="4 pods from the Job controller",
    )
    assert all(gated(p) for p in members)
    assert {p["metadata"]["labels"][GROUP_LABEL] for p in members} == {"train"}
    stays(
        lambda: not any(bound(p) for p in pods(cluster, gang_namespace, "job-name=train")),
        2.0,
        what="none bound",
    )

    # The very same Job where the namespace is not opted in runs normally.
    apply(cluster, namespace, job)
    eventually(
        lambda: (
            (found := pods(cluster, namespace, "job-name=train"))
            and len(found) == 4
            and all(p["status"].get("phase") == "Running" for p in found)
        ),
        30,
        what="4 ungated pods Running in a plain namespace",
    )
    assert not any(gated(p) for p in pods(cluster, namespace, "job-name=train"))


def test_statefulset_becomes_parallel_and_every_replica_is_gated(
    cluster: LocalCluster, gang_namespace: str
) -> None:
    warnings = apply(cluster, gang_namespace, builders.statefulset("ranks").replicas(3).gpus(1).build())
    assert "phalanx" in warnings and "Parallel" in warnings, warnings
    stored = cluster.kubectl_json("get", "statefulset", "ranks", "-n", gang_namespace)
    assert stored["spec"]["podManagementPolicy"] == "Parallel"
    # With OrderedReady, replica 1 would never be created while replica 0 waits at the gate.
    members = eventually(
        lambda: (found := pods(cluster, gang_namespace, "app=ranks")) and len(found) == 3 and found,
        30,
        what="all 3 replicas created",
    )
    assert all(gated(p) and p["metadata"]["labels"][GROUP_LABEL] == "ranks" for p in members)


def test_a_statefulset_manifest_saying_ordered_ready_can_be_applied_again(
    cluster: LocalCluster, gang_namespace: str
) -> None:
    """The field cannot change after creation: without the UPDATE hook the API server refused the
    second apply of the very same manifest (server-side and client-side alike)."""
    manifest = builders.statefulset("ordered").replicas(2).gpus(1).policy("OrderedReady").build()
    apply(cluster, gang_namespace, manifest)
    manifest["spec"]["replicas"] = 3  # and a real change with it
    warnings = apply(cluster, gang_namespace, manifest)
    assert "kept Parallel" in warnings, warnings
    stored = cluster.kubectl_json("get", "statefulset", "ordered", "-n", gang_namespace)
    assert (stored["spec"]["podManagementPolicy"], stored["spec"]["replicas"]) == ("Parallel", 3)


def _admission_lines(phalanx: Phalanx, namespace: str, kind: str) -> list[dict[str, Any]]:
    """The webhook's admission log lines (JSON, one per patched object) for ``kind`` in ``namespace``."""
    lines = []
    for raw in (phalanx.dir / "webhook.log").read_bytes().splitlines():
        line = orjson.loads(raw) if raw.startswith(b"{") else {}
        if line.get("msg") == "admission" and (line.get("kind"), line.get("namespace")) == (kind, namespace):
            lines.append(line)
    return lines


def test_mpijob_templates_are_mutated(cluster: LocalCluster, phalanx: Phalanx, gang_namespace: str) -> None:
    # mpi-operator's own CRD, when an operator test installed it first, serves as well.
    if cluster.kubectl("get", "crd", "mpijobs.kubeflow.org", check=False).returncode != 0:
        cluster.kubectl("apply", "--server-side", "-f", str(MANIFESTS / "mpijob-crd.yaml"))
    cluster.kubectl("wait", "--for=condition=Established", "crd/mpijobs.kubeflow.org", "--timeout=30s")
    eventually(
        lambda: cluster.kubectl("get", "mpijobs", "-n", gang_namespace, check=False).returncode == 0,
        20,
        what="MPIJob API served",
    )
    apply(cluster, gang_namespace, builders.mpijob("horovod").workers(8).build())
    stored = cluster.kubectl_json("get", "mpijob", "horovod", "-n", gang_namespace)
    for role in ("Launcher", "Worker"):
        template = stored["spec"]["mpiReplicaSpecs"][role]["template"]
        assert template["metadata"]["labels"][GROUP_LABEL] == "horovod"
        assert any(g["name"] == "phalanx.io/gang" for g in template["spec"]["schedulingGates"])
    # Launcher + 8 workers with the default launcher creation policy.
    assert (
        stored["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["metadata"]["annotations"][
            "phalanx.io/inferred-min-member"
        ]
        == "9"
    )
    # Read through the webhook's view of an MPIJob review and logged as one JSON line.
    [line] = _admission_lines(phalanx, gang_namespace, "MPIJob")
    assert (line["level"], line["object_name"], line["outcome"], line["group"]) == (
        "INFO", "horovod", "patched", "horovod",
    )  # fmt: skip
    assert line["ops"] > 0
    assert any("pods join gang 'horovod'" in warning for warning in line["warnings"])


@pytest.mark.parametrize(
    ("labels", "annotations", "spec", "group"),
    [
        pytest.param(
            {
                "pod-group.scheduling.sigs.k8s.io/name": "pg-a",
                "pod-group.scheduling.sigs.k8s.io/min-available": "2",
            },
            {},
            {},
            "pg-a",
            id="coscheduling-name",
        ),
        pytest.param({"scheduling.x-k8s.io/pod-group": "pg-b"}, {}, {}, "pg-b", id="scheduler-plugins"),
        pytest.param({"pod-group.scheduling.sigs.k8s.io": "pg-c"}, {}, {}, "pg-c", id="acs"),
        pytest.param({}, {"scheduling.run.ai/pod-group": "pg-d"}, {}, "pg-d", id="kai"),
        pytest.param({}, {"scheduling.k8s.io/group-name": "pg-e"}, {}, "pg-e", id="volcano"),
        pytest.param(
            {},
            {},
            {"workloadRef": {"name": "train", "podGroup": "workers"}},
            "train-workers",
            id="workloadRef",
            marks=pytest.mark.k8s_versions("1.35"),  # the pod field is gone from 1.36
        ),
        pytest.param(
            {},
            {},
            {"workloadRef": {"name": "train", "podGroup": "workers", "podGroupReplicaKey": "r1"}},
            "train-workers-r1",
            id="replica-key",
            marks=pytest.mark.k8s_versions("1.35"),
        ),
    ],
)
def test_every_group_link_form_is_gated_and_normalised(
    cluster: LocalCluster,
    gang_namespace: str,
    labels: dict[str, str],
    annotations: dict[str, str],
    spec: dict[str, object],
    group: str,
) -> None:
    apply(
        cluster,
        gang_namespace,
        builders.pod("member").gpus(1).labels(labels).annotations(annotations).pod_spec(**spec).build(),
    )
    stored = cluster.kubectl_json("get", "pod", "member", "-n", gang_namespace)
    assert gated(stored)
    assert stored["metadata"]["labels"][GROUP_LABEL] == group


def test_pods_without_a_link_and_skipped_objects_are_left_alone(
    cluster: LocalCluster, gang_namespace: str
) -> None:
    apply(cluster, gang_namespace, builders.pod("loner").gpus(1).build())
    apply(
        cluster,
        gang_namespace,
        builders.job("opted-out").parallelism(2).gpus(1).template_labels({"phalanx.io/skip": "true"}).build(),
    )
    assert not gated(cluster.kubectl_json("get", "pod", "loner", "-n", gang_namespace))
    members = eventually(
        lambda: (found := pods(cluster, gang_namespace, "job-name=opted-out")) and len(found) == 2 and found,
        30,
        what="2 pods of the skipped Job",
    )
    assert not any(gated(p) for p in members)


def test_a_skipped_job_whose_template_names_a_group_runs_ungated(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    pool.add(1, gpus=8)
    manifest = (
        builders.job("skipped")
        .parallelism(2)
        .gpus(1)
        .annotations({"phalanx.io/skip": "true"})
        .template_labels({"scheduling.x-k8s.io/pod-group": "pg"})
        .node_selector(pool.selector)
        .build()
    )
    warnings = apply(cluster, gang_namespace, manifest)
    assert "so that its pods are left alone too" in warnings, warnings
    eventually(
        lambda: (
            (found := pods(cluster, gang_namespace, "job-name=skipped"))
            and len(found) == 2
            and all(bound(p) and not gated(p) for p in found)
        ),
        30,
        what="both pods of the skipped Job bound, never gated",
    )


def test_a_pod_without_a_group_naming_a_missing_gang_scheduler_runs_on_the_default_one(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    pool.add(1, gpus=8)
    manifest = (
        pooled_pod("kai-quickstart", pool)
        .labels({"kai.scheduler/queue": "research"})
        .scheduler("kai-scheduler")
        .build()
    )
    warnings = apply(cluster, gang_namespace, manifest)
    assert "kai-scheduler replaced by default-scheduler" in warnings, warnings
    stored = eventually(
        lambda: bound(p := cluster.kubectl_json("get", "pod", "kai-quickstart", "-n", gang_namespace)) and p,
        30,
        what="the pod bound by the default scheduler",
    )
    assert stored["spec"]["schedulerName"] == "default-scheduler" and not gated(stored)


def test_foreign_gang_scheduler_is_rewritten_with_a_warning(
    cluster: LocalCluster, gang_namespace: str
) -> None:
    manifest = builders.job("kai").parallelism(2).gpus(1).scheduler("kai-scheduler").build()
    warnings = apply(cluster, gang_namespace, manifest)
    assert "kai-scheduler" in warnings, warnings
    stored = cluster.kubectl_json("get", "job", "kai", "-n", gang_namespace)
    assert stored["spec"]["template"]["spec"]["schedulerName"] == "default-scheduler"
