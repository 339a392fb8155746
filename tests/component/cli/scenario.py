"""The cluster the plugin's tests read: one 8-GPU node, a running 3-pod gang, an 8-pod gang waiting."""

from __future__ import annotations

from controller.api import resources as r
from controller.api.resources import JOBS
from controller.cli.cluster import ClusterState, load
from controller.core.config import PlannerConfig
from shared import constants as c
from tests import builders
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


def with_a_queue() -> FakeKube:
    """``eight_on_five_free`` with the gang "small" in a queue of 4 GPUs (limit 8)."""
    kube = eight_on_five_free()
    kube.seed(
        r.QUEUES,
        {
            "apiVersion": r.QUEUES.api_version,
            "kind": "Queue",
            "metadata": {"name": "research"},
            "spec": {"resources": {c.GPU_RESOURCE: {"quota": 4, "limit": 8}}},
        },
    )
    kube.mutate(r.PODGROUPS, NS, "small", lambda pg: pg["spec"].update(queue="research"))
    return kube


async def state_of(kube: FakeKube) -> ClusterState:
    return await load(kube, T0, config=CONFIG)


def plain_job(name: str) -> builders.JobBuilder:
    """A one-GPU-per-pod Job in the namespace "plain", which is not opted in (the audit's subject)."""
    return builders.job(name).namespace("plain").uid(f"{name}-uid").gpus(1)


# ---- a cluster whose GPUs are only DRA devices ----------------------------------------------------

DRA_CLASS = "gpu.example.com"  # the DeviceClass, named like its driver
DRA_API = "resource.k8s.io/v1"
CLAIMS = [{"name": "gpus", "resourceClaimTemplateName": "three-gpus"}]


def dra_node(name: str) -> dict[str, object]:
    """A node whose allocatable lists no GPU at all: its GPUs are the devices of its slice."""
    raw = node(name)
    del raw["status"]["allocatable"][c.GPU_RESOURCE]  # type: ignore[index, union-attr]
    return raw


def resource_slice(node_name: str, devices: int) -> dict[str, object]:
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{DRA_CLASS}"},
        "spec": {
            "driver": DRA_CLASS,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(devices)],
        },
    }


def claim_template(name: str, count: int, namespace: str = NS) -> dict[str, object]:
    request = {"name": "gpus", "exactly": {"deviceClassName": DRA_CLASS, "count": count}}
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


def with_claims(raw: dict[str, object], claims: list[dict[str, str]]) -> dict[str, object]:
    raw["spec"]["resourceClaims"] = claims  # type: ignore[index]
    return raw


def dra_gang_short() -> FakeKube:
    """Two nodes of 4 DRA devices; a running pod holds one device of dra-0; a gang of 3 pods, each
    claiming 3 devices from a template, waits: 9 devices, and only 2 claims of 3 fit (one a node)."""
    clock = FakeClock(T0 - 600)
    kube = FakeKube(clock)
    kube.seed(r.NODES, dra_node("dra-0"), dra_node("dra-1"))
    kube.seed(r.NAMESPACES, namespace(NS))
    selector = {"cel": {"expression": f"device.driver == '{DRA_CLASS}'"}}
    kube.seed(
        r.DEVICE_CLASSES,
        {
            "apiVersion": DRA_API,
            "kind": "DeviceClass",
            "metadata": {"name": DRA_CLASS},
            "spec": {"selectors": [selector]},
        },
    )
    kube.seed(r.RESOURCE_SLICES, resource_slice("dra-0", 4), resource_slice("dra-1", 4))
    kube.seed(r.RESOURCE_CLAIM_TEMPLATES, claim_template("three-gpus", 3), claim_template("one-gpu", 1))
    running = pod(
        "small-0",
        "small",
        gpus=0,
        gates=(),
        owner=RUNNING_JOB,
        min_member=1,
        node_name="dra-0",
        phase="Running",
    )
    running["metadata"]["uid"] = "small-0-uid"  # type: ignore[index]
    running["status"]["resourceClaimStatuses"] = [{"name": "gpus", "resourceClaimName": "small-0-gpus"}]  # type: ignore[index]
    kube.seed(r.PODS, with_claims(running, [{"name": "gpus", "resourceClaimTemplateName": "one-gpu"}]))
    kube.seed(r.PODGROUPS, podgroup("small", min_member=1))
    on_dra_0 = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["dra-0"]}]}
        ]
    }
    kube.seed(
        r.RESOURCE_CLAIMS,
        {
            "apiVersion": DRA_API,
            "kind": "ResourceClaim",
            "metadata": {"name": "small-0-gpus", "namespace": NS},
            "spec": claim_template("one-gpu", 1)["spec"]["spec"],  # type: ignore[index]
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {"request": "gpus", "driver": DRA_CLASS, "pool": "dra-0", "device": "gpu-0"}
                        ]
                    },
                    "nodeSelector": on_dra_0,
                },
                "reservedFor": [{"resource": "pods", "name": "small-0", "uid": "small-0-uid"}],
            },
        },
    )
    clock.advance(300)
    kube.seed(r.PODS, *(with_claims(p, CLAIMS) for p in gang(3, "big", gpus=0, owner=BIG_JOB)))
    return kube


def dra_workloads_to_audit() -> FakeKube:
    """``dra_gang_short`` with two Jobs in the namespace "plain" (not opted in) whose pods claim
    devices: one a claim of 5 (no node has 5 devices), one 2 pods × a claim of 2."""
    kube = dra_gang_short()
    kube.seed(r.NAMESPACES, namespace("plain", opted_in=False))
    kube.seed(
        r.RESOURCE_CLAIM_TEMPLATES,
        claim_template("five-gpus", 5, "plain"),
        claim_template("two-gpus", 2, "plain"),
    )
    for name, size, claim in (("dra-huge", 1, "five-gpus"), ("dra-fits", 2, "two-gpus")):
        job = plain_job(name).gpus(0).parallelism(size)
        job.pod_spec(resourceClaims=[{"name": "gpus", "resourceClaimTemplateName": claim}])
        kube.seed(JOBS, job.build())
    return kube
