"""The cluster the plugin's tests read: one 8-GPU node, a running 3-pod gang, an 8-pod gang waiting."""

from __future__ import annotations

from controller.api import resources as r
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
