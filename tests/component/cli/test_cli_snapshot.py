"""kubectl phalanx on a fake API server: the controller's snapshot is rebuilt, nothing is written."""

from __future__ import annotations

import pytest

from controller import resources as r
from controller.cli import audit, report, targets
from controller.cli.cluster import STATEFULSETS, ClusterState, controller_settings, load
from controller.core.config import PlannerConfig
from controller.core.model import GangKey
from controller.resources import JOBS
from shared import constants as c
from tests.component.controller.fake_kube import FakeKube
from tests.component.controller.harness import NS, T0, FakeClock, gang, namespace, node, pod, podgroup

CONFIG = PlannerConfig(preemption_min_runtime_seconds=0.0)
RUNNING_JOB = {"apiVersion": "batch/v1", "kind": "Job", "name": "small", "uid": "small-uid"}
BIG_JOB = {"apiVersion": "batch/v1", "kind": "Job", "name": "big", "uid": "big-uid"}


def eight_on_five_free() -> FakeKube:
    """One 8-GPU node; a running 3-pod gang; an 8-pod gang waiting, whose PodGroup is not made yet."""
    clock = FakeClock(T0 - 600)
    kube = FakeKube(clock)
    kube.seed(r.NODES, node("gpu-0", gpus=8))
    kube.seed(r.NAMESPACES, namespace(NS))
    for i in range(3):
        kube.seed(
            r.PODS,
            pod(
                f"small-{i}",
                "small",
                gates=(),
                owner=RUNNING_JOB,
                min_member=3,
                node_name="gpu-0",
                phase="Running",
            ),
        )
    kube.seed(r.PODGROUPS, podgroup("small", min_member=3))  # made by the controller when it was gated
    clock.advance(300)  # the big gang came later: it is behind the running one in the order
    kube.seed(r.PODS, *gang(8, "big", owner=BIG_JOB))
    return kube


async def state_of(kube: FakeKube) -> ClusterState:
    return await load(kube, T0, config=CONFIG)


async def test_explain_rebuilds_the_controllers_gang_and_names_what_would_start_it() -> None:
    kube = eight_on_five_free()
    state = await state_of(kube)
    key = GangKey(NS, "big")
    assert key in state.synthesized  # the controller would create its PodGroup: shown as such
    assert targets.resolve(state, NS, "job/big") == [key]
    assert targets.resolve(state, NS, "pod/big-3") == [key]
    assert targets.resolve(state, NS, "podgroup/big") == [key]
    data = report.explain_data(state, key)
    assert data["decision"]["reason"] == "InsufficientCapacity"
    assert data["partial"] == {"needed": 8, "placed": 5, "nodes": {"gpu-0": 5}}
    assert [f["change"] for f in data["fixes"]] == ["FreeOnNode", "AddNodes", "Remove"]
    assert data["fixes"][0]["amount"] == 3 and data["fixes"][0]["node"] == "gpu-0"
    assert data["fixes"][1]["count"] == 1 and data["fixes"][1]["like"] == "gpu-0"
    assert [v["name"] for v in data["fixes"][2]["victims"]] == [f"{NS}/small"]
    text = report.explain_text(data)
    assert "free 3 nvidia.com/gpu on node gpu-0" in text
    assert "add 1 node like gpu-0" in text
    assert kube.writes == []  # read-only


async def test_top_lists_gangs_in_planning_order_with_gpus_held() -> None:
    state = await state_of(eight_on_five_free())
    rows = report.top_rows(state, NS)
    assert [(r["name"], r["state"], r["gpusHeld"]) for r in rows] == [
        ("small", "Running", 3),
        ("big", "Pending", 0),
    ]
    assert rows[1]["reason"] == "InsufficientCapacity"
    assert rows[1]["waitingSeconds"] == 300
    assert "big" in report.top_text(rows)
    assert report.top_rows(state, "elsewhere") == []


async def test_unknown_targets_are_refused() -> None:
    state = await state_of(eight_on_five_free())
    with pytest.raises(targets.TargetError):
        targets.resolve(state, NS, "job/nothing")
    with pytest.raises(targets.TargetError):
        targets.resolve(state, NS, "big")


def job(name: str, parallelism: int, gpus: int = 1, **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "plain", "uid": f"{name}-uid"},
        "spec": {
            "parallelism": parallelism,
            "completions": parallelism,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "m", "image": "x", "resources": {"limits": {c.GPU_RESOURCE: str(gpus)}}}
                    ],
                }
            },
            **spec,
        },
    }


async def test_audit_dry_runs_the_webhook_and_the_planner_on_existing_workloads() -> None:
    kube = eight_on_five_free()
    kube.seed(r.NAMESPACES, namespace("plain", opted_in=False))
    kube.seed(JOBS, job("fits", 2), job("huge", 12), job("slow", 8, activeDeadlineSeconds=600))
    oversized = job("oversized", 2)
    oversized["metadata"]["annotations"] = {c.MIN_MEMBER_ANNOTATION: "4"}  # type: ignore[index]
    foreign = job("foreign", 1)
    foreign["spec"]["template"]["spec"]["schedulerName"] = "my-scheduler"  # type: ignore[index]
    kube.seed(JOBS, oversized, foreign)
    kube.seed(
        STATEFULSETS,
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "plain", "uid": "db-uid"},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "m", "image": "x"}]}}},
        },
    )
    state = await state_of(kube)
    findings = audit.audit(state, "plain")
    by = {(f.workload, f.check): f for f in findings}
    assert by[("Job/huge", "NeverFits")].severity == audit.ERROR
    assert by[("Job/oversized", "GroupSize")].severity == audit.ERROR
    assert by[("Job/foreign", "SchedulerMissing")].severity == audit.ERROR
    assert by[("Job/slow", "Deadline")].severity == audit.WARNING
    assert ("Job/slow", "WouldWait") in by
    assert by[("StatefulSet/db", "OrderedReady")].severity == audit.WARNING
    assert ("Job/fits", "WouldStart") in by
    assert not any(f.workload == "Job/fits" and f.severity != audit.INFO for f in findings)
    assert findings[0].severity == audit.ERROR  # errors first
    assert "would never start" in audit.text(findings)
    assert kube.writes == []


def test_planner_settings_come_from_the_controller_deployment() -> None:
    deployment = {
        "metadata": {"namespace": "phalanx-system", "name": "phalanx-controller"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "controller",
                            "env": [
                                {"name": "PHALANX_CONTROLLER_PREEMPTION", "value": "false"},
                                {"name": "PHALANX_CONTROLLER_STARVATION_AGE_SECONDS", "value": "60"},
                                {"name": "PHALANX_CONTROLLER_UNKNOWN", "value": "x"},
                                {"name": "OTHER", "value": "y"},
                            ],
                        }
                    ]
                }
            }
        },
    }
    settings, source = controller_settings(deployment)
    assert settings.preemption is False and settings.starvation_age_seconds == 60
    assert source == "Deployment phalanx-system/phalanx-controller"
    assert controller_settings(None)[1] == "defaults"


async def test_top_sums_up_queues_when_gangs_have_them() -> None:
    kube = eight_on_five_free()
    kube.mutate(r.PODGROUPS, NS, "small", lambda pg: pg["spec"].update(queue="research"))
    state = await state_of(kube)
    rows = report.top_rows(state, None)
    assert {r["name"]: r["queue"] for r in rows} == {"small": "research", "big": None}
    assert report.queue_rows(rows) == [
        {"queue": "-", "gangs": 1, "pending": 1, "gpusHeld": 0},
        {"queue": "research", "gangs": 1, "pending": 0, "gpusHeld": 3},
    ]
    assert "QUEUE" in report.top_text(rows)


async def test_statefulset_and_mpijob_targets_find_their_gangs() -> None:
    kube = eight_on_five_free()
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "web-uid"}
    kube.seed(r.PODS, *gang(2, "web", owner=sts))
    # mpi-operator: workers owned by the MPIJob, the launcher pod by a Job the MPIJob owns.
    mpi = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "pi", "uid": "pi-uid"}
    launcher = {"apiVersion": "batch/v1", "kind": "Job", "name": "pi-launcher", "uid": "launcher-uid"}
    kube.seed(r.PODS, *gang(2, "pi", prefix="pi-worker", owner=mpi, min_member=3))
    kube.seed(r.PODS, pod("pi-launcher-x", "pi", owner=launcher, min_member=3))
    kube.seed(
        JOBS,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "pi-launcher",
                "namespace": NS,
                "ownerReferences": [{**mpi, "controller": True}],
            },
            "spec": {},
        },
    )
    state = await state_of(kube)
    assert targets.resolve(state, NS, "sts/web") == [GangKey(NS, "web")]
    assert targets.resolve(state, NS, "statefulset.apps/web") == [GangKey(NS, "web")]
    assert targets.resolve(state, NS, "mpijob/pi") == [GangKey(NS, "pi")]
    assert targets.resolve(state, NS, "job/pi-launcher") == [GangKey(NS, "pi")]
    data = report.explain_data(state, GangKey(NS, "pi"))
    assert {m["name"] for m in data["members"]} == {"pi-worker-0", "pi-worker-1", "pi-launcher-x"}
    assert data["podGroup"]["minMember"] == 3
