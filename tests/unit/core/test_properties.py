"""Properties of plans on arbitrary small clusters (hypothesis).

- no node is ever over-committed by a plan;
- all or nothing: an Admit of a not-yet-admitted gang places at least min_member gated members and
  at most what max_member allows;
- every placement (pinned or merely booked) satisfies the pod's constraints;
- determinism: the same snapshot, or the same snapshot with its tuples shuffled, gives equal plans,
  and so do different PYTHONHASHSEEDs.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.core import PlannerConfig, plan
from controller.core.fit import pod_allows_node
from controller.core.model import (
    Admit,
    Gang,
    GangKey,
    Node,
    Placement,
    Pod,
    Preempt,
    Snapshot,
    Taint,
    Toleration,
)

from .builders import NOW, req

GPU = "nvidia.com/gpu"
GI = 2**30
ROOT = Path(__file__).resolve().parents[3]


@st.composite
def nodes_st(draw: st.DrawFn) -> list[Node]:
    count = draw(st.integers(1, 6))
    out = []
    for i in range(count):
        labels = {
            "kubernetes.io/hostname": f"n{i}",
            "topology.kubernetes.io/zone": draw(st.sampled_from(["z1", "z2"])),
            "topology.kubernetes.io/rack": draw(st.sampled_from(["r1", "r2", "r3"])),
            "gpu": draw(st.sampled_from(["a100", "h100"])),
        }
        taints = (
            (Taint("dedicated", "infra", draw(st.sampled_from(["NoSchedule", "NoExecute"]))),)
            if draw(st.integers(0, 4)) == 0
            else ()
        )
        out.append(
            Node(
                name=f"n{i}",
                allocatable={
                    GPU: draw(st.sampled_from([0, 2, 4, 8])),
                    "cpu": draw(st.sampled_from([4000, 8000, 16000])),
                    "memory": draw(st.sampled_from([8 * GI, 32 * GI])),
                    "pods": draw(st.sampled_from([3, 110])),
                },
                labels=labels,
                taints=taints,
                unschedulable=draw(st.integers(0, 9)) == 0,
                ready=draw(st.integers(0, 9)) != 0,
            )
        )
    return out


def requests_st() -> st.SearchStrategy[dict[str, int]]:
    return st.builds(
        lambda g, c, m: (
            {GPU: g, "cpu": c, "memory": m * GI, "pods": 1} if g else {"cpu": c, "memory": m * GI, "pods": 1}
        ),
        st.sampled_from([0, 1, 1, 2, 4]),
        st.sampled_from([500, 1000, 3000]),
        st.sampled_from([1, 4]),
    )


@st.composite
def constraints_st(draw: st.DrawFn) -> dict[str, object]:
    out: dict[str, object] = {}
    kind = draw(st.integers(0, 5))
    if kind == 1:
        out["node_selector"] = {"gpu": draw(st.sampled_from(["a100", "h100"]))}
    elif kind == 2:
        out["required_affinity"] = (
            (req("topology.kubernetes.io/zone", "In", draw(st.sampled_from(["z1", "z2"]))),),
        )
    elif kind == 3:
        out["required_affinity"] = (
            (req("gpu", "NotIn", "h100"),),
            (req("topology.kubernetes.io/rack", "In", "r3"),),
        )
    if draw(st.booleans()):
        out["tolerations"] = (Toleration("dedicated", "Exists"),)
    return out


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    nodes = draw(nodes_st())
    free = {n.name: dict(n.allocatable) for n in nodes}

    def take(requests: dict[str, int]) -> str | None:
        name = draw(st.sampled_from([n.name for n in nodes]))
        room = free[name]
        if all(room.get(r, 0) >= a for r, a in requests.items()):
            for r, a in requests.items():
                room[r] -= a
            return name
        return None

    pods: list[Pod] = []
    for k in range(draw(st.integers(0, 6))):
        requests = draw(requests_st())
        where = take(requests)
        if where is not None:
            pods.append(
                Pod(
                    uid=f"bg-{k}",
                    namespace=draw(st.sampled_from(["ns", "other"])),
                    name=f"bg-{k}",
                    requests=requests,
                    node_name=where,
                    phase="Running",
                    priority=draw(st.integers(0, 2)),
                    started=NOW - draw(st.sampled_from([10, 5000])),
                )
            )
    gangs: list[Gang] = []
    for g in range(draw(st.integers(1, 5))):
        name = f"g{g}"
        min_member = draw(st.integers(1, 3))
        count = draw(st.integers(max(0, min_member - 1), min_member + 2))
        requests = draw(requests_st())
        cons = draw(constraints_st())
        running = draw(st.integers(0, 3)) == 0
        members: list[Pod] = []
        admitted: dict[str, str | None] = {}
        for m in range(count):
            uid = f"{name}-{m}"
            base = Pod(
                uid=uid,
                namespace="ns",
                name=uid,
                requests=draw(requests_st()) if draw(st.integers(0, 3)) == 0 else requests,
                created=NOW - 100 + m,
                group=name,
                unmodelled="topology spread" if draw(st.integers(0, 7)) == 0 else None,
                **cons,  # type: ignore[arg-type]
            )
            if running and m < min_member:
                where = take(dict(base.requests))
                if where is None:
                    running = False
                else:
                    base = replace(base, node_name=where, phase="Running", started=NOW - 4000)
                    admitted[uid] = where
                    members.append(base)
                    continue
            members.append(replace(base, gated=True))
        gangs.append(
            Gang(
                key=GangKey("ns", name),
                min_member=min_member,
                members=tuple(members),
                max_member=draw(st.sampled_from([None, min_member, min_member + 1])),
                priority=draw(st.integers(0, 2)),
                created=NOW - draw(st.sampled_from([10, 100, 4000])),
                placement=draw(st.sampled_from([Placement.PINNED, Placement.FREE])),
                admitted=admitted,
                admitted_at=NOW - 50 if admitted else None,
            )
        )
        pods.extend(members)
    return Snapshot(
        nodes=tuple(nodes),
        pods=tuple(pods),
        gangs=tuple(gangs),
        now=NOW,
        opted_in_namespaces=frozenset({"ns"}),
    )


CONFIGS = [
    PlannerConfig(),
    PlannerConfig(preemption_min_runtime_seconds=0, starvation_age_seconds=60),
    PlannerConfig(preemption=False, starvation_age_seconds=None),
]

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _used(snapshot: Snapshot) -> dict[str, dict[str, int]]:
    used: dict[str, dict[str, int]] = {n.name: {} for n in snapshot.nodes}
    for p in snapshot.pods:
        if p.holds_capacity and p.node_name in used:
            for r, a in p.requests.items():
                used[p.node_name][r] = used[p.node_name].get(r, 0) + a
    return used


@SETTINGS
@given(snapshots(), st.sampled_from(CONFIGS))
def test_no_node_is_over_committed(snapshot: Snapshot, config: PlannerConfig) -> None:
    used = _used(snapshot)
    pods = {p.uid: p for p in snapshot.pods}
    for d in plan(snapshot, config).decisions:
        if isinstance(d, Admit):
            for uid, node_name in d.booked.items():
                for r, a in pods[uid].requests.items():
                    used[node_name][r] = used[node_name].get(r, 0) + a
    for n in snapshot.nodes:
        for r, a in used[n.name].items():
            assert a <= n.allocatable.get(r, 0), (n.name, r)


@SETTINGS
@given(snapshots(), st.sampled_from(CONFIGS))
def test_all_or_nothing(snapshot: Snapshot, config: PlannerConfig) -> None:
    gangs = {g.key: g for g in snapshot.gangs}
    for d in plan(snapshot, config).decisions:
        if not isinstance(d, Admit):
            continue
        g = gangs[d.gang]
        gated = {m.uid for m in g.members if m.gated and not m.finished and not m.terminating}
        assert set(d.placement) <= gated
        assert set(d.placement) == set(d.booked)
        if g.admitted:
            continue  # already running: members are admitted one by one
        assert len(d.placement) >= g.min_member
        if g.max_member is not None:
            assert len(d.placement) <= g.max_member


@SETTINGS
@given(snapshots(), st.sampled_from(CONFIGS))
def test_placements_satisfy_constraints(snapshot: Snapshot, config: PlannerConfig) -> None:
    nodes = {n.name: n for n in snapshot.nodes}
    pods = {p.uid: p for p in snapshot.pods}
    gangs = {g.key: g for g in snapshot.gangs}
    for d in plan(snapshot, config).decisions:
        if isinstance(d, Admit):
            for uid, node_name in d.booked.items():
                assert pod_allows_node(pods[uid], nodes[node_name])
                pin = d.placement[uid]
                free = gangs[d.gang].placement == Placement.FREE or pods[uid].unmodelled
                assert pin is None if free else pin == node_name
        elif isinstance(d, Preempt):
            for uid, held_on in d.placement.items():
                assert held_on is not None and pod_allows_node(pods[uid], nodes[held_on])


@SETTINGS
@given(snapshots(), st.sampled_from(CONFIGS), st.randoms(use_true_random=False))
def test_deterministic(snapshot: Snapshot, config: PlannerConfig, rnd: random.Random) -> None:
    first = plan(snapshot, config)
    assert plan(snapshot, config) == first

    def shuffled(items: tuple[object, ...]) -> tuple[object, ...]:
        out = list(items)
        rnd.shuffle(out)
        return tuple(out)

    gangs = tuple(replace(g, members=shuffled(g.members)) for g in snapshot.gangs)  # type: ignore[arg-type]
    other = replace(
        snapshot,
        nodes=shuffled(snapshot.nodes),  # type: ignore[arg-type]
        pods=shuffled(snapshot.pods),  # type: ignore[arg-type]
        gangs=shuffled(gangs),  # type: ignore[arg-type]
    )
    again = plan(other, config)
    assert again == first
    assert repr(again) == repr(first)  # the same order inside every mapping, too


_SCRIPT = """
import random
from controller.core import PlannerConfig, plan
from tests.bench.bench_core import build_cluster, pending_gangs, snapshot_of
rng = random.Random(3)
nodes, pods, running = build_cluster(rng, n_nodes=200, running_gpu_pods=1000)
gangs = running + pending_gangs(rng, 400)
print(repr(plan(snapshot_of(nodes, pods, gangs), PlannerConfig(starvation_age_seconds=600))))
"""


def test_independent_of_string_hashing() -> None:
    outputs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run(
            [sys.executable, "-c", _SCRIPT],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1]
    assert "Admit(" in outputs[0]
