"""Fluent builders for the core's records: ``node("a").gpus(8).zone("z1").build()``,
``pod("p").gpus(1).gated().group("g").build()``, ``gang("g").min(2).members(...).build()``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from controller.core.model import (
    DisruptionMode,
    Gang,
    GangKey,
    GangTopology,
    Node,
    OwnerRef,
    Placement,
    Pod,
    Queue,
    QueueGrant,
    QueueResource,
    Requirement,
    Snapshot,
    Taint,
    Toleration,
)
from shared.quantities import to_int

GPU = "nvidia.com/gpu"
NOW = 1_000_000.0


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self._name = name
        self._alloc: dict[str, int] = {"cpu": 64_000, "memory": 512 * 2**30, "pods": 110}
        self._labels: dict[str, str] = {"kubernetes.io/hostname": name}
        self._taints: list[Taint] = []
        self._unschedulable = False
        self._ready = True

    def gpus(self, n: int) -> NodeBuilder:
        self._alloc[GPU] = n
        return self

    def cpu(self, amount: str | int) -> NodeBuilder:
        self._alloc["cpu"] = to_int("cpu", amount)
        return self

    def memory(self, amount: str | int) -> NodeBuilder:
        self._alloc["memory"] = to_int("memory", amount)
        return self

    def pods(self, n: int) -> NodeBuilder:
        self._alloc["pods"] = n
        return self

    def resource(self, name: str, amount: int) -> NodeBuilder:
        self._alloc[name] = amount
        return self

    def label(self, key: str, value: str) -> NodeBuilder:
        self._labels[key] = value
        return self

    def zone(self, zone: str) -> NodeBuilder:
        return self.label("topology.kubernetes.io/zone", zone)

    def rack(self, rack: str) -> NodeBuilder:
        return self.label("topology.kubernetes.io/rack", rack)

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> NodeBuilder:
        self._taints.append(Taint(key, value, effect))
        return self

    def cordoned(self) -> NodeBuilder:
        self._unschedulable = True
        return self

    def not_ready(self) -> NodeBuilder:
        self._ready = False
        return self

    def build(self) -> Node:
        return Node(
            self._name,
            dict(self._alloc),
            dict(self._labels),
            tuple(self._taints),
            self._unschedulable,
            self._ready,
        )


def node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


class PodBuilder:
    def __init__(self, name: str) -> None:
        self._f: dict[str, Any] = {
            "uid": "",
            "namespace": "ns",
            "name": name,
            "requests": {"cpu": 1000, "memory": 2**30, "pods": 1},
            "created": NOW - 100,
        }
        self._selector: dict[str, str] = {}
        self._terms: list[tuple[Requirement, ...]] = []
        self._tolerations: list[Toleration] = []

    def ns(self, namespace: str) -> PodBuilder:
        self._f["namespace"] = namespace
        return self

    def uid(self, uid: str) -> PodBuilder:
        self._f["uid"] = uid
        return self

    def gpus(self, n: int) -> PodBuilder:
        self._f["requests"] = {**self._f["requests"], GPU: n}
        return self

    def cpu(self, amount: str | int) -> PodBuilder:
        self._f["requests"] = {**self._f["requests"], "cpu": to_int("cpu", amount)}
        return self

    def memory(self, amount: str | int) -> PodBuilder:
        self._f["requests"] = {**self._f["requests"], "memory": to_int("memory", amount)}
        return self

    def requests(self, **amounts: int) -> PodBuilder:
        self._f["requests"] = {"pods": 1, **{k.replace("_", "/"): v for k, v in amounts.items()}}
        return self

    def request(self, name: str, amount: int) -> PodBuilder:
        self._f["requests"] = {**self._f["requests"], name: amount}
        return self

    def gated(self) -> PodBuilder:
        self._f["gated"] = True
        return self

    def foreign_gate(self, *gates: str) -> PodBuilder:
        self._f["foreign_gates"] = tuple(gates)
        return self

    def group(self, name: str) -> PodBuilder:
        self._f["group"] = name
        return self

    def on(self, node_name: str) -> PodBuilder:
        self._f["node_name"] = node_name
        self._f["phase"] = "Running"
        self._f.setdefault("started", NOW - 3600)
        return self

    def nominated(self, node_name: str) -> PodBuilder:
        self._f["nominated_node"] = node_name
        return self

    def phase(self, phase: str) -> PodBuilder:
        self._f["phase"] = phase
        return self

    def terminating(self) -> PodBuilder:
        self._f["terminating"] = True
        return self

    def priority(self, p: int) -> PodBuilder:
        self._f["priority"] = p
        return self

    def created(self, t: float) -> PodBuilder:
        self._f["created"] = t
        return self

    def started(self, t: float | None) -> PodBuilder:
        self._f["started"] = t
        return self

    def selector(self, **labels: str) -> PodBuilder:
        self._selector.update(labels)
        return self

    def select(self, key: str, value: str) -> PodBuilder:
        self._selector[key] = value
        return self

    def affinity(self, *terms: Iterable[Requirement]) -> PodBuilder:
        self._terms.extend(tuple(t) for t in terms)
        return self

    def tolerate(
        self, key: str = "", value: str = "", effect: str = "", operator: str = "Equal"
    ) -> PodBuilder:
        self._tolerations.append(Toleration(key, operator, value, effect))
        return self

    def unmodelled(self, why: str) -> PodBuilder:
        self._f["unmodelled"] = why
        return self

    def owner(self, kind: str, name: str = "owner") -> PodBuilder:
        self._f["owner"] = OwnerRef("v1", kind, name, f"uid-{name}")
        return self

    def pdb(self, name: str) -> PodBuilder:
        self._f["disruption_budget"] = name
        return self

    def not_preemptible(self) -> PodBuilder:
        self._f["preemptible"] = False
        return self

    def build(self) -> Pod:
        f = dict(self._f)
        if not f["uid"]:
            f["uid"] = f"{f['namespace']}/{f['name']}"
        return Pod(
            **f,
            node_selector=dict(self._selector),
            required_affinity=tuple(self._terms),
            tolerations=tuple(self._tolerations),
        )


def pod(name: str) -> PodBuilder:
    return PodBuilder(name)


def req(key: str, operator: str, *values: str) -> Requirement:
    return Requirement(key, operator, tuple(values))


class GangBuilder:
    def __init__(self, name: str) -> None:
        self._namespace = "ns"
        self._name = name
        self._f: dict[str, Any] = {"min_member": 1, "created": NOW - 100}
        self._members: list[Pod] = []

    def ns(self, namespace: str) -> GangBuilder:
        self._namespace = namespace
        return self

    def min(self, n: int) -> GangBuilder:
        self._f["min_member"] = n
        return self

    def max(self, n: int | None) -> GangBuilder:
        self._f["max_member"] = n
        return self

    def priority(self, p: int) -> GangBuilder:
        self._f["priority"] = p
        return self

    def local_priority(self, p: int | None) -> GangBuilder:
        """The PodGroup's own priority (orders gangs inside their namespace only)."""
        self._f["local_priority"] = p
        return self

    def created(self, t: float) -> GangBuilder:
        self._f["created"] = t
        return self

    def timeout(self, seconds: float | None) -> GangBuilder:
        self._f["schedule_timeout"] = seconds
        return self

    def waiting_since(self, t: float) -> GangBuilder:
        self._f["waiting_since"] = t
        return self

    def free(self) -> GangBuilder:
        self._f["placement"] = Placement.FREE
        return self

    def not_preemptible(self) -> GangBuilder:
        self._f["preemptible"] = False
        return self

    def never_preempts(self) -> GangBuilder:
        self._f["preemption_policy"] = "Never"
        return self

    def creatable(self, n: int | None) -> GangBuilder:
        self._f["creatable"] = n
        return self

    def admitted(self, placement: Mapping[str, str | None], at: float | None = NOW - 50) -> GangBuilder:
        self._f["admitted"] = dict(placement)
        self._f["admitted_at"] = at
        return self

    def booked(self, placement: Mapping[str, str]) -> GangBuilder:
        self._f["booked"] = dict(placement)
        return self

    def min_resources(self, **amounts: int) -> GangBuilder:
        """minResources by resource name; ``gpu`` stands for the GPU resource."""
        self._f["min_resources"] = {("nvidia.com/gpu" if k == "gpu" else k): v for k, v in amounts.items()}
        return self

    def parent(self, name: str) -> GangBuilder:
        self._f["parent"] = name
        return self

    def subgroups(self, **minimums: int) -> GangBuilder:
        """KAI subgroups: {name: minMember}; members name theirs with ``in_subgroup``."""
        self._f["subgroups"] = dict(minimums)
        return self

    def queue(self, name: str | None) -> GangBuilder:
        self._f["queue"] = name
        return self

    def requires(self, topology_key: str) -> GangBuilder:
        """Every member inside one domain of the node label ``topology_key``."""
        self._f["required_topology"] = topology_key
        return self

    def topology(self, **request: object) -> GangBuilder:
        """The rest of its topology request (GangTopology's fields: name, preferred, slices)."""
        self._f["topology"] = GangTopology(**request)  # type: ignore[arg-type]
        return self

    def single_disruption(self) -> GangBuilder:
        """Preemption may take single pods of it (disruption mode Single)."""
        self._f["disruption_mode"] = DisruptionMode.SINGLE
        return self

    def held(self, rooms: Mapping[str, str | None]) -> GangBuilder:
        self._f["held"] = dict(rooms)
        self._f["held_since"] = NOW - 10
        return self

    def members(self, *pods: Pod | PodBuilder) -> GangBuilder:
        for p in pods:
            built = p.build() if isinstance(p, PodBuilder) else p
            self._members.append(replace(built, group=self._name, namespace=self._namespace))
        return self

    def gated_members(self, n: int, gpus: int = 1, prefix: str | None = None, **extra: Any) -> GangBuilder:
        """n identical gated members, named <gang>-0 ..."""
        prefix = prefix or self._name
        for k in range(n):
            b = (
                pod(f"{prefix}-{k}")
                .ns(self._namespace)
                .gpus(gpus)
                .gated()
                .created(self._f["created"] + k * 0.001)
            )
            self._members.append(replace(b.build(), group=self._name, **extra))
        return self

    def running_members(
        self, placement: Iterable[str], gpus: int = 1, started: float = NOW - 3600
    ) -> GangBuilder:
        for k, node_name in enumerate(placement):
            b = pod(f"{self._name}-{k}").ns(self._namespace).gpus(gpus).on(node_name).started(started)
            if "priority" in self._f:
                b = b.priority(self._f["priority"])
            self._members.append(replace(b.build(), group=self._name))
        return self

    def build(self) -> Gang:
        return Gang(key=GangKey(self._namespace, self._name), members=tuple(self._members), **self._f)


def gang(name: str) -> GangBuilder:
    return GangBuilder(name)


def queue(
    name: str,
    parent: str | None = None,
    gpu: tuple[int, int | None, float] | None = None,
    **resources: tuple[int, int | None, float],
) -> Queue:
    """``queue("team-a", "dept", gpu=(quota, limit, weight))``; other resources by keyword."""
    specs = {k.replace("_", "/"): QueueResource(*v) for k, v in resources.items()}
    if gpu is not None:
        specs[GPU] = QueueResource(*gpu)
    return Queue(name, parent, specs)


NodeLike = Node | NodeBuilder
PodLike = Pod | PodBuilder
GangLike = Gang | GangBuilder


def snapshot(
    nodes: Iterable[NodeLike],
    gangs: Iterable[GangLike] = (),
    pods: Iterable[PodLike] = (),
    now: float = NOW,
    opted_in: Iterable[str] = ("ns",),
    budgets: Mapping[str, int] | None = None,
    queues: Iterable[Queue] = (),
    grants: Mapping[str, QueueGrant] | None = None,
) -> Snapshot:
    """A snapshot; gang members are added to ``pods`` as the shell does."""
    built_gangs = tuple(g.build() if isinstance(g, GangBuilder) else g for g in gangs)
    built_pods = [p.build() if isinstance(p, PodBuilder) else p for p in pods]
    seen = {p.uid for p in built_pods}
    for g in built_gangs:
        for m in g.members:
            if m.uid not in seen:
                built_pods.append(m)
                seen.add(m.uid)
    return Snapshot(
        nodes=tuple(n.build() if isinstance(n, NodeBuilder) else n for n in nodes),
        pods=tuple(built_pods),
        gangs=built_gangs,
        now=now,
        opted_in_namespaces=frozenset(opted_in),
        disruptions_allowed=dict(budgets or {}),
        queues={q.name: q for q in queues},
        grants=dict(grants or {}),
    )
