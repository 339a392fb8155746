"""Manifest builders, a fake clock, and a harness that wires the real shell to a FakeKube.

The harness builds the controller's parts with ``controller.runtime.wiring.wire``, as
``controller.runtime.app.Controller`` does, but with a fake clock and with the informers replaced by
``sync()``: it delivers the fake's watch events through the same sinks on demand, so a test decides
when the controller's view catches up with what it wrote.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Literal

import orjson

from controller.api import resources as r
from controller.api.resources import ResourceType
from controller.core.config import PlannerConfig
from controller.core.model import GangKey
from controller.pipeline.reconciler import REPLAN
from controller.pipeline.workqueue import WorkQueue
from controller.runtime.config import ControllerSettings
from controller.runtime.wiring import WATCHED, Wired, wire
from shared import constants as c
from shared.jsonread import JsonObject
from tests import builders
from tests.component.controller.fake_kube import FakeKube, Write

NS = "team"
KEY = GangKey(NS, "g")
T0 = 1_700_000_000.0
ALL_TYPES = tuple(WATCHED)
JOB = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "job-uid"}


async def until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    """Poll a condition on the fake from outside the system under test."""
    async with asyncio.timeout(timeout):
        while not condition():  # noqa: ASYNC110
            await asyncio.sleep(0.005)


class FakeClock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# ---- manifests ------------------------------------------------------------------------------------


def node(name: str, gpus: int = 4) -> JsonObject:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        # As on most clouds, the hostname label is not the node's name: pins must use the name.
        "metadata": {"name": name, "labels": {c.HOSTNAME_LABEL: f"ip-10-0-0-{sum(map(ord, name)) % 250}"}},
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110", c.GPU_RESOURCE: str(gpus)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def namespace(name: str = NS, opted_in: bool = True) -> JsonObject:
    labels = {c.OPT_IN_LABEL: c.OPT_IN_VALUE} if opted_in else {}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def pod(
    name: str,
    group: str | None = "g",
    ns: str = NS,
    gpus: int = 1,
    gates: tuple[str, ...] = (c.GATE,),
    owner: Mapping[str, str] | None = JOB,
    min_member: int | None = 5,
    annotations: Mapping[str, str] | None = None,
    node_name: str | None = None,
    phase: str = "Pending",
) -> JsonObject:
    """A member of gang ``group`` as the webhook leaves it: labelled, its size inferred, gated."""
    built = builders.pod(name).namespace(ns).labels({}).annotations(annotations or {}).gpus(gpus).phase(phase)
    if group:
        built.label(c.POD_GROUP_LABEL, group)
    if min_member is not None:
        built.annotation(c.INFERRED_MIN_MEMBER_ANNOTATION, str(min_member))
    if owner is not None:
        built.owner(owner)
    for gate in gates:
        built.gate(gate)
    if node_name:
        built.node_name(node_name)
    return built.build()


def gang(n: int, group: str = "g", prefix: str | None = None, **kwargs: Any) -> list[JsonObject]:
    kwargs.setdefault("min_member", n)
    return [pod(f"{prefix or group}-{i}", group, **kwargs) for i in range(n)]


def podgroup(name: str = "g", ns: str = NS, min_member: int = 5, **meta: Any) -> JsonObject:
    return {
        "apiVersion": r.PODGROUPS.api_version,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns, **meta},
        "spec": {"minMember": min_member},
    }


def admission_annotation(at: float, placement: Mapping[str, str | None]) -> dict[str, str]:
    return {c.ADMISSION_ANNOTATION: orjson.dumps({"at": at, "placement": dict(placement)}).decode()}


def gates_of(obj: JsonObject | None) -> list[str]:
    return [g["name"] for g in ((obj or {}).get("spec") or {}).get("schedulingGates") or []]


def bind(kube: FakeKube, name: str, node_name: str, ns: str = NS, phase: str = "Pending") -> None:
    """What the scheduler (and kubelet) do to a pod."""

    def change(obj: JsonObject) -> None:
        obj["spec"]["nodeName"] = node_name
        obj["status"]["phase"] = phase

    kube.mutate(r.PODS, ns, name, change)


# ---- the harness ----------------------------------------------------------------------------------


class Harness(Wired):
    def __init__(
        self,
        bind_timeout: float = 60.0,
        planner: PlannerConfig | None = None,
        timeout_action: Literal["report", "release"] = "report",
        degraded_timeout: float = 300.0,
        provisioning_requests: Literal["off", "best-effort-atomic", "check-capacity"] = "off",
        restart_of: Harness | None = None,
    ) -> None:
        """``restart_of``: a controller started afresh on that harness's API server and clock (its
        store, queue, metrics and memory start empty, as after a restart or a failover)."""
        self.clock = restart_of.clock if restart_of is not None else FakeClock()
        self.kube = restart_of.kube if restart_of is not None else FakeKube(self.clock)
        settings = ControllerSettings(
            identity="test",
            bind_timeout_seconds=bind_timeout,
            schedule_timeout_action=timeout_action,
            degraded_gang_timeout_seconds=degraded_timeout,
            provisioning_requests=provisioning_requests,
        )
        parts = wire(
            settings,
            self.kube,
            self.clock,
            WorkQueue(self.clock, settle=0),
            planner=planner or PlannerConfig(starvation_age_seconds=None),
            background_events=False,
        )
        self.parts = parts
        self._cursor: dict[ResourceType, int] = dict.fromkeys(ALL_TYPES, 0)

    def cluster(self, nodes: int = 2, gpus: int = 4, opted_in: bool = True) -> None:
        self.kube.seed(r.NODES, *(node(f"node-{i}", gpus) for i in range(nodes)))
        self.kube.seed(r.NAMESPACES, namespace(NS, opted_in))

    def sync(self, *types: ResourceType) -> None:
        """Deliver the watch events the store has not seen yet (all types, or only ``types``)."""
        for rt in types or ALL_TYPES:
            sink = self.sinks[str(rt)]
            for rv, event in self.kube.events_since(rt, self._cursor[rt]):
                (sink.delete if event["type"] == "DELETED" else sink.upsert)(event["object"])
                self._cursor[rt] = rv

    async def reconcile(self, *keys: Hashable) -> set[Hashable]:
        """One pass over ``keys`` (default: what the queue would hold: REPLAN and every gang key)."""
        batch = set(keys) if keys else {REPLAN, *self.store.gang_keys()}
        return await self.reconciler.reconcile(batch)

    async def step(self) -> set[Hashable]:
        self.sync()
        return await self.reconcile()

    def mark(self) -> int:
        return len(self.kube.writes)

    def writes_since(self, mark: int) -> list[Write]:
        return self.kube.writes[mark:]

    def pod(self, name: str) -> JsonObject | None:
        return self.kube.obj(r.PODS, NS, name)

    def pin(self, name: str) -> str | None:
        """The node a pod is pinned to by name: ``metadata.name In [node]`` in every required term."""
        affinity = ((self.pod(name) or {}).get("spec", {}).get("affinity") or {}).get("nodeAffinity") or {}
        terms = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get(
            "nodeSelectorTerms"
        )
        pins = set()
        for term in terms or ():
            named = [f["values"] for f in term.get("matchFields", ()) if f["key"] == "metadata.name"]
            if not named or len(named[-1]) != 1:
                return None  # a term without the pin would let the pod go elsewhere
            pins.add(named[-1][0])
        return pins.pop() if len(pins) == 1 else None

    def pg(self, name: str = "g") -> JsonObject | None:
        return self.kube.obj(r.PODGROUPS, NS, name)

    def event_reasons(self) -> list[str]:
        return [e["reason"] for e in self.kube.events()]
