"""kubectl phalanx on a fake API server: the controller's snapshot is rebuilt, nothing is written."""

from __future__ import annotations

import pytest

from controller.api import admission_record
from controller.api import resources as r
from controller.api.resources import JOBS
from controller.cli import audit, planner_settings, report, targets
from controller.cli.cluster import STATEFULSETS, WORKLOAD_TYPES
from controller.core import DEFAULT_LEVELS
from controller.core.model import GangKey
from shared import constants as c
from tests import builders
from tests.component.cli.scenario import (
    DRA_CLASS,
    dra_gang_short,
    eight_on_five_free,
    plain_job,
    state_of,
    with_a_queue,
)
from tests.component.controller.harness import NS, gang, namespace, node, pod


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
    data = report.top_data(state, NS)
    rows = data["gangs"]
    assert [(r["name"], r["state"], r["gpusHeld"]) for r in rows] == [
        ("small", "Running", 3),
        ("big", "Pending", 0),
    ]
    assert rows[1]["reason"] == "InsufficientCapacity"
    assert rows[1]["waitingSeconds"] == 300
    assert data["queues"] == []
    text = report.top_text(data)
    assert "big" in text and "QUEUE" not in text
    assert report.top_data(state, "elsewhere")["gangs"] == []


async def test_unknown_targets_are_refused() -> None:
    state = await state_of(eight_on_five_free())
    with pytest.raises(targets.TargetError):
        targets.resolve(state, NS, "job/nothing")
    with pytest.raises(targets.TargetError):
        targets.resolve(state, NS, "big")


async def test_audit_dry_runs_the_webhook_and_the_planner_on_existing_workloads() -> None:
    kube = eight_on_five_free()
    kube.seed(r.NAMESPACES, namespace("plain", opted_in=False))
    kube.seed(
        JOBS,
        plain_job("fits").parallelism(2).build(),
        plain_job("huge").parallelism(12).build(),
        plain_job("slow").parallelism(8).active_deadline(600).build(),
    )
    oversized = plain_job("oversized").parallelism(2).annotation(c.MIN_MEMBER_ANNOTATION, "4").build()
    foreign = plain_job("foreign").parallelism(1).scheduler("my-scheduler").build()
    kube.seed(JOBS, oversized, foreign)
    kube.seed(
        STATEFULSETS,
        builders.statefulset("db").namespace("plain").uid("db-uid").replicas(2).build(),
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
                            "command": ["phalanx-controller", "--starvation-age-seconds=120"],
                            "args": [
                                "--no-preemption",
                                "--preemption-min-runtime-seconds",
                                "30",
                                "--log-json",
                                "--topologies=gb200=nvidia.com/gpu.clique",
                            ],
                            "env": [
                                {"name": "PHALANX_CONTROLLER_PREEMPTION", "value": "true"},
                                {"name": "PHALANX_CONTROLLER_STARVATION_AGE_SECONDS", "value": "60"},
                                {
                                    "name": "PHALANX_CONTROLLER_DEFAULT_SCHEDULE_TIMEOUT_SECONDS",
                                    "value": "600",
                                },
                                {"name": "PHALANX_CONTROLLER_UNKNOWN", "value": "x"},
                                {"name": "OTHER", "value": "y"},
                            ],
                        }
                    ]
                }
            }
        },
    }
    used = planner_settings.from_deployment(deployment)
    # defaults < env < args, as the controller itself reads them
    assert used.settings.preemption is False and used.settings.starvation_age_seconds == 120
    assert used.settings.preemption_min_runtime_seconds == 30
    assert used.settings.default_schedule_timeout_seconds == 600
    assert used.source == "Deployment phalanx-system/phalanx-controller"
    assert used.data()["values"] == {
        "preemption": {"value": False, "from": "args"},
        "preemption-min-runtime-seconds": {"value": 30.0, "from": "args"},
        "starvation-age-seconds": {"value": 120.0, "from": "args"},
        "default-schedule-timeout-seconds": {"value": 600.0, "from": "env"},
        "topology-levels": {
            "value": ",".join(DEFAULT_LEVELS),
            "from": "default",
        },
        "topologies": {"value": "gb200=nvidia.com/gpu.clique", "from": "args"},
    }


def test_planner_settings_from_a_configmap_reference_are_named_not_guessed() -> None:
    container = {
        "name": "controller",
        "env": [{"name": "PHALANX_CONTROLLER_PREEMPTION", "valueFrom": {"configMapKeyRef": {"name": "c"}}}],
    }
    used = planner_settings.from_deployment(
        {
            "metadata": {"namespace": "n", "name": "d"},
            "spec": {"template": {"spec": {"containers": [container]}}},
        }
    )
    assert used.settings.preemption is True and used.data()["values"]["preemption"]["from"] == "default"
    assert used.warnings == ("PHALANX_CONTROLLER_PREEMPTION is set from configMapKeyRef: not read",)


def test_planner_settings_never_come_from_the_plugin_s_own_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PHALANX_CONTROLLER_PREEMPTION", "false")
    assert planner_settings.defaults("none").settings.preemption is True


@pytest.mark.parametrize(
    ("tokens", "found"),
    [
        (["--preemption-dry-run"], [("preemption_dry_run", True)]),
        (["--preemption=false"], [("preemption", "false")]),
        (["--resync-seconds", "5", "extra"], [("resync_seconds", "5")]),
        (["--unknown", "--no-unknown", "-v"], []),
    ],
)
def test_controller_args_are_read_as_its_command_line_reads_them(
    tokens: list[str], found: list[tuple[str, object]]
) -> None:
    assert planner_settings.parse_args(tokens) == found


async def test_top_reports_queues_as_the_planning_pass_sees_them() -> None:
    state = await state_of(with_a_queue())
    data = report.top_data(state, None)
    assert {r["name"]: r["queue"] for r in data["gangs"]} == {"small": "research", "big": None}
    [queue] = data["queues"]
    assert (queue["name"], queue["gpuQuota"], queue["gpuLimit"]) == ("research", 4, 8)
    assert (queue["gpuAllocated"], queue["admittedGangs"], queue["waitingGangs"]) == (3, 1, 0)
    text = report.top_text(data)
    assert "FAIR SHARE" in text and "research" in text


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
        builders.job("pi-launcher").namespace(NS).owner(mpi).build(),
    )
    state = await state_of(kube)
    assert targets.resolve(state, NS, "sts/web") == [GangKey(NS, "web")]
    assert targets.resolve(state, NS, "statefulset.apps/web") == [GangKey(NS, "web")]
    assert targets.resolve(state, NS, "mpijob/pi") == [GangKey(NS, "pi")]
    assert targets.resolve(state, NS, "job/pi-launcher") == [GangKey(NS, "pi")]
    data = report.explain_data(state, GangKey(NS, "pi"))
    assert {m["name"] for m in data["members"]} == {"pi-worker-0", "pi-worker-1", "pi-launcher-x"}
    assert data["podGroup"]["minMember"] == 3


async def test_a_gang_whose_size_is_unknown_is_reported_not_planned() -> None:
    kube = eight_on_five_free()
    # Named by the user's own Coscheduling link, no size: the controller waits for that PodGroup.
    linked = pod("own-0", "own", min_member=None)
    linked["metadata"]["labels"][c.COSCHEDULING_LABEL] = "own"
    kube.seed(r.PODS, linked)
    state = await state_of(kube)
    key = GangKey(NS, "own")
    assert key not in state.views and key not in state.synthesized
    assert "PodGroup team/own" in state.unsized[key]
    assert targets.resolve(state, NS, "pod/own-0") == [key]


def _gpu_template(parallelism: int) -> dict[str, object]:
    """A JobSet's Job template: one GPU per pod."""
    return {"spec": builders.job().gpus(1).parallelism(parallelism).build()["spec"]}


async def test_audit_counts_every_pod_a_jobset_makes_and_explain_finds_it_through_its_jobs() -> None:
    kube = eight_on_five_free()
    kube.seed(r.NAMESPACES, namespace("plain", opted_in=False))
    [jobsets] = [t for t in WORKLOAD_TYPES if t.kind == "JobSet"]
    jobset = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "plain", "uid": "js-uid"},
        "spec": {
            "replicatedJobs": [
                {"name": "driver", "replicas": 1, "template": _gpu_template(1)},
                {"name": "workers", "replicas": 2, "template": _gpu_template(4)},
            ]
        },
    }
    kube.seed(jobsets, jobset)
    state = await state_of(kube)
    by = {(f.workload, f.check): f for f in audit.audit(state, "plain")}
    never = by[("JobSet/js", "NeverFits")]
    assert "needs 9 pods" in never.message  # 1 driver + 2 × 4 workers, on one 8-GPU node

    # In an opted-in namespace its pods are owned by the JobSet's Jobs: jobset/js finds the gang.
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "js-workers-0", "uid": "w0-uid"}
    jobset_ref = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "js", "uid": "x"}
    kube.seed(r.PODS, *gang(2, "js", owner=owner, min_member=2))
    kube.seed(
        JOBS,
        builders.job("js-workers-0").namespace(NS).owner(jobset_ref).build(),
    )
    state = await state_of(kube)
    assert targets.resolve(state, NS, "jobset/js") == [GangKey(NS, "js")]


async def test_devices_of_a_class_beside_the_gpu_resource_are_shown_apart() -> None:
    """A cluster whose nodes list nvidia.com/gpu and which also has a DeviceClass: the GPU column
    stays nvidia.com/gpu, and a member's claimed devices are listed beside it."""
    kube = dra_gang_short()
    kube.seed(r.NODES, node("gpu-0", gpus=8))
    state = await state_of(kube)
    assert state.gpus.resource == c.GPU_RESOURCE and state.gpus.device_resources == (DRA_CLASS,)
    data = report.explain_data(state, GangKey(NS, "big"))
    assert [(m["name"], m[c.GPU_RESOURCE], m["devices"]) for m in data["members"]] == [
        (f"big-{i}", 0, {DRA_CLASS: 3}) for i in range(3)
    ]
    lines = report.explain_text(data).splitlines()
    header = next(line for line in lines if "NAME" in line and "STATE" in line)
    assert header.split() == ["NAME", "STATE", "NODE", "GPUS", "DEVICES"]
    assert any(line.split()[-2:] == [DRA_CLASS, "3"] for line in lines if "big-0" in line)
    top = report.top_data(state, NS)["gangs"]
    assert [(g["name"], g["gpusHeld"]) for g in top] == [("small", 0), ("big", 0)]


async def test_audit_says_when_a_gang_is_too_large_for_its_admission_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(admission_record, "RECORD_LIMIT", 100)  # two members' record takes more
    kube = eight_on_five_free()
    kube.seed(r.NAMESPACES, namespace("plain", opted_in=False))
    kube.seed(JOBS, plain_job("fits").parallelism(2).build())
    state = await state_of(kube)
    by = {(f.workload, f.check): f for f in audit.audit(state, "plain")}
    finding = by[("Job/fits", "GroupSize")]
    assert finding.severity == audit.ERROR
    assert "2 members are more than Phalanx can admit as one gang" in finding.message
    assert ("Job/fits", "WouldStart") not in by
