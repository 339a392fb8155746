"""Cost of the pure decision core (controller/core) on a big, realistic cluster.

Run: ``python -m tests.bench.bench_core`` (or ``pytest -m bench tests/bench/bench_core.py``).

The cluster (seeded, synthetic): 5,000 nodes × 8 GPUs (96 cores, 1 TiB, 250 racks of 20 in 4 zones,
half A100 half H100, all tainted ``nvidia.com/gpu:NoSchedule``, 1 % cordoned or NotReady) running
50,000 pods: 4 DaemonSet pods per node and 30,000 GPU pods of running gangs whose sizes are drawn
from the Philly trace (``num_gpus``; a job of g GPUs is one pod of g GPUs up to 8, else g/8 pods of
8), packed to ~85 % of the GPUs. Scenarios:

1. ``pass_10k``: one full planning pass with 10,000 pending gangs (Philly sizes, 10 % asking for
   H100 by nodeSelector, created over the last two hours so a few are starving) next to the ~28,000
   running gangs. Pending and running work share one priority, so no preemption is possible here
   (victim searches are measured on their own below).
2. ``gang_256``: one decision for a 256-pod gang (1 GPU per pod) on the same cluster; also the same
   gang of 8-GPU pods, which does not fit (the failure path, with its message).
1b. ``pass_10k_queues``: the same pass with every gang (running and pending) in one of 40 teams
   of a 3-level tree of 50 queues (2 divisions × 4 departments × 5 teams), GPU quotas summing to
   the cluster, every fourth team limited to twice its quota.
1c. ``pass_10k_dra``: the same pass with the GPUs only DRA devices: no node lists ``nvidia.com/gpu``;
   each node's 8 GPUs are devices of a node-local ResourceSlice (a DeviceClass with a CEL
   selector), every running GPU pod holds an allocated ResourceClaim of its devices, every pending
   member claims its GPUs from a ResourceClaimTemplate; the pass includes turning those into room
   and demand (controller/core/devices.py), which reuses the previous pass's translation where
   nothing changed: the best run is a pass with nothing changed, the first one rebuilds everything
   (both are reported as ratios to ``pass_10k``; target: at most 1.5 ×).
1d. ``pass_10k_topology``: the same pass on the same nodes labelled in four levels (zone, block of
   100 nodes, rack of 20, NVLink domain ``nvidia.com/gpu.clique`` of 4), a third of the pending
   gangs requiring one rack (``required_topology``), a tenth of those and every one of them with
   several pods cut into slices each inside one NVLink domain; target: at most 1.5 × ``pass_10k``.
3. ``victim_search``: one higher-priority gang of 16 pods × 8 GPUs that fits only by preemption
   (every running pod lower priority, minimum runtime 0): plan() total and the victim search alone.
4. ``pass_10k_at_100k_pods``: the pass of 1. on a cluster twice the size (10,000 nodes, 100,000
   pods: 40,000 DaemonSet pods and 60,000 GPU pods of running gangs).

Timing is ``time.perf_counter`` around ``plan()`` (best and median of a few runs), with the cyclic
garbage collector paused as the controller pauses it for a pass (controller/pipeline/gcpause.py). Writes
``out/bench/core.json`` and prints a table. About a minute.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from controller.core import (
    Claim,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    DraWorld,
    PlannerConfig,
    PodClaim,
    plan,
)
from controller.core.model import (
    Admit,
    Gang,
    GangKey,
    GangTopology,
    Node,
    OwnerRef,
    Pod,
    Queue,
    QueueResource,
    Snapshot,
    Taint,
    Toleration,
)
from controller.core.placement import signature
from controller.core.planner import PlanningPass
from controller.core.preemption import Preemption
from controller.core.state import PassState
from controller.pipeline.gcpause import cyclic_gc_paused
from tests.simulation.trace import default_trace, open_trace

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "out" / "bench" / "core.json"
TRACE = default_trace()
GPU = "nvidia.com/gpu"
NOW = 1_700_000_000.0
GIB = 2**30
TARGETS = {
    "pass_10k": 1.0,
    "pass_10k_queues": 1.0,
    "gang_256": 0.010,
    "victim_search": 2.0,
    "pass_10k_at_100k_pods": 1.0,
}
RACK = "topology.kubernetes.io/rack"
NVLINK = "nvidia.com/gpu.clique"

# Targets of passes measured against pass_10k in the same run: a ratio, not seconds.
TOPOLOGY_RATIO_TARGET = 1.5  # pass_10k_topology over pass_10k
DRA_RATIO_TARGET = 1.5  # pass_10k_dra over pass_10k

TOLERATE_GPU = (Toleration("nvidia.com/gpu", "Exists", "", "NoSchedule"),)
TOLERATE_ALL = (Toleration("", "Exists", "", ""),)


def philly_sizes() -> list[int]:
    sizes = []
    try:
        with open_trace(TRACE) as f:
            for row in csv.DictReader(f):
                value = (row.get("num_gpus") or "").strip()
                if value.isdigit() and int(value) > 0:
                    sizes.append(int(value))
    except OSError:
        pass
    # Fallback (trace missing): the trace's own distribution, roughly.
    return sizes or [1] * 930 + [2] * 22 + [4] * 23 + [8] * 20 + [16] * 3 + [32, 64]


def job_pods(gpus: int) -> tuple[int, int]:
    """(pods, GPUs per pod) for a job of `gpus` GPUs."""
    if gpus <= 8:
        return 1, gpus
    return (gpus + 7) // 8, 8


def gpu_pod(uid: str, ns: str, name: str, gpus: int, **fields: Any) -> Pod:
    requests = {"cpu": 8000 * gpus, "memory": 64 * GIB * gpus, GPU: gpus, "pods": 1}
    return Pod(uid=uid, namespace=ns, name=name, requests=requests, tolerations=TOLERATE_GPU, **fields)


def build_cluster(
    rng: random.Random, n_nodes: int = 5000, running_gpu_pods: int = 30_000
) -> tuple[list[Node], list[Pod], list[Gang]]:
    nodes = []
    for i in range(n_nodes):
        rack = i // 20
        labels = {
            "kubernetes.io/hostname": f"gpu-{i:05d}",
            "topology.kubernetes.io/zone": f"zone-{rack * 4 // (n_nodes // 20 or 1)}",
            "topology.kubernetes.io/rack": f"rack-{rack:03d}",
            "nvidia.com/gpu.product": "H100" if rack % 2 else "A100",
        }
        roll = rng.random()
        nodes.append(
            Node(
                name=f"gpu-{i:05d}",
                allocatable={
                    "cpu": 96_000,
                    "memory": 1024 * GIB,
                    "pods": 110,
                    GPU: 8,
                    "ephemeral-storage": 2**40,
                },
                labels=labels,
                taints=(Taint("nvidia.com/gpu", "present", "NoSchedule"),),
                unschedulable=roll < 0.005,
                ready=not (0.005 <= roll < 0.01),
            )
        )
    pods: list[Pod] = []
    for i, node in enumerate(nodes):
        for d, (cpu, mem) in enumerate(((100, 128), (250, 256), (500, 512), (200, 300))):
            pods.append(
                Pod(
                    uid=f"ds-{i}-{d}",
                    namespace="kube-system",
                    name=f"ds{d}-{i}",
                    requests={"cpu": cpu, "memory": mem * 2**20, "pods": 1},
                    priority=2_000_001_000,
                    phase="Running",
                    node_name=node.name,
                    started=NOW - 86400 * 10,
                    tolerations=TOLERATE_ALL,
                    owner=OwnerRef("apps/v1", "DaemonSet", f"ds{d}", f"ds{d}"),
                    preemptible=False,
                )
            )
    free = [8] * n_nodes
    sizes = philly_sizes()
    gangs: list[Gang] = []
    placed = 0
    job = 0
    while placed < running_gpu_pods:
        n_pods, per_pod = job_pods(rng.choice(sizes))
        n_pods = min(n_pods, running_gpu_pods - placed)
        start = rng.randrange(n_nodes)
        where: list[int] = []
        for k in range(n_nodes):
            i = (start + k) % n_nodes
            if free[i] >= per_pod and nodes[i].ready and not nodes[i].unschedulable:
                where.append(i)
                free[i] -= per_pod
                if len(where) == n_pods:
                    break
        if len(where) < n_pods:
            for i in where:
                free[i] += per_pod
            continue
        ns = f"team-{job % 15}"
        name = f"run-{job}"
        started = NOW - rng.uniform(600, 86400)
        members = tuple(
            gpu_pod(
                f"{name}-{k}",
                ns,
                f"{name}-{k}",
                per_pod,
                phase="Running",
                node_name=nodes[i].name,
                started=started,
                created=started - 30,
                group=name,
            )
            for k, i in enumerate(where)
        )
        gangs.append(
            Gang(
                key=GangKey(ns, name),
                min_member=n_pods,
                members=members,
                created=started - 60,
                admitted={m.uid: m.node_name for m in members},
                admitted_at=started - 40,
            )
        )
        pods.extend(members)
        placed += n_pods
        job += 1
    return nodes, pods, gangs


def pending_gangs(rng: random.Random, n: int) -> list[Gang]:
    sizes = philly_sizes()
    out = []
    for j in range(n):
        n_pods, per_pod = job_pods(rng.choice(sizes))
        ns = f"team-{j % 15}"
        name = f"job-{j}"
        created = NOW - rng.uniform(0, 7200)
        selector = {"nvidia.com/gpu.product": "H100"} if rng.random() < 0.1 else {}
        members = tuple(
            gpu_pod(
                f"{name}-{k}",
                ns,
                f"{name}-{k}",
                per_pod,
                created=created + k * 0.01,
                gated=True,
                group=name,
                node_selector=selector,
            )
            for k in range(n_pods)
        )
        out.append(Gang(key=GangKey(ns, name), min_member=n_pods, members=members, created=created))
    return out


def with_four_levels(nodes: list[Node]) -> list[Node]:
    """The nodes with a block (5 racks) and an NVLink domain (4 nodes) label too."""
    out = []
    for i, node in enumerate(nodes):
        labels = {**node.labels, "topology.kubernetes.io/block": f"block-{i // 100:02d}"}
        labels["nvidia.com/gpu.clique"] = f"nvl-{i // 4:04d}"
        out.append(replace(node, labels=labels))
    return out


def with_required_racks(gangs: list[Gang]) -> list[Gang]:
    """Every third gang requires one rack; of those, every tenth and every one of several pods is
    sliced too: slices on the NVLink level (``with_slices``)."""
    out = []
    for k, g in enumerate(gangs):
        if k % 3:
            out.append(g)
        elif k % 30 == 0 or g.min_member > 1:
            out.append(with_slices(replace(g, required_topology=RACK)))
        else:
            out.append(replace(g, required_topology=RACK))
    return out


def with_slices(g: Gang) -> Gang:
    """Slices of the most members one NVLink domain (4 nodes × 8 GPUs) holds: 4, 2 or 1 pods,
    whichever divides the gang."""
    size = next(s for s in (4, 2, 1) if g.min_member % s == 0)
    return replace(g, topology=GangTopology(slice_key=NVLINK, slice_size=size))


def snapshot_of(nodes: list[Node], pods: list[Pod], gangs: list[Gang]) -> Snapshot:
    pending = [m for g in gangs for m in g.members if m.gated]
    return Snapshot(
        nodes=tuple(nodes),
        pods=tuple(pods + pending),
        gangs=tuple(gangs),
        now=NOW,
        opted_in_namespaces=frozenset(f"team-{k}" for k in range(15)),
    )


DRIVER = "gpu.example.com"


def as_dra(snap: Snapshot) -> Snapshot:
    """The same cluster and gangs with every GPU a DRA device instead of ``nvidia.com/gpu``."""
    devices = [
        Device(
            DRIVER, n.name, f"gpu-{i}", n.name, {f"{DRIVER}/index": i}, {f"{DRIVER}/memory": 80 * GIB * 1000}
        )
        for n in snap.nodes
        for i in range(n.allocatable.get(GPU, 0))
    ]
    nodes = tuple(
        replace(n, allocatable={k: v for k, v in n.allocatable.items() if k != GPU}) for n in snap.nodes
    )
    next_free: dict[str, int] = {}
    claims: dict[tuple[str, str], Claim] = {}
    templates: dict[tuple[str, str], ClaimSpec] = {}
    changed: dict[str, Pod] = {}
    for pod in snap.pods:
        gpus = pod.requests.get(GPU, 0)
        if not gpus:
            continue
        requests = {k: v for k, v in pod.requests.items() if k != GPU}
        if pod.gated:
            template = f"gpus-{gpus}"
            templates[(pod.namespace, template)] = ClaimSpec((DeviceRequest("gpus", DRIVER, (), gpus),))
            claim = PodClaim("gpus", template=template)
            changed[pod.uid] = replace(pod, requests=requests, claims=(claim,))
        elif pod.node_name:
            first = next_free.get(pod.node_name, 0)
            next_free[pod.node_name] = first + gpus
            held = tuple((DRIVER, pod.node_name, f"gpu-{first + k}") for k in range(gpus))
            spec = ClaimSpec((DeviceRequest("gpus", DRIVER, (), gpus),))
            claims[(pod.namespace, f"{pod.name}-gpus")] = Claim(
                pod.namespace, f"{pod.name}-gpus", spec, held, pod.node_name, (pod.uid,)
            )
            changed[pod.uid] = replace(pod, requests=requests)
    pods = tuple(changed.get(p.uid, p) for p in snap.pods)
    gangs = tuple(replace(g, members=tuple(changed.get(m.uid, m) for m in g.members)) for g in snap.gangs)
    world = DraWorld(
        tuple(devices), {DRIVER: DeviceClass(DRIVER, (f"device.driver == '{DRIVER}'",))}, claims, templates
    )
    return replace(snap, nodes=nodes, pods=pods, gangs=gangs, devices=world)


def queue_tree(total_gpus: int) -> dict[str, Queue]:
    """2 divisions × 4 departments × 5 teams (50 queues); quotas split evenly down the tree."""
    queues: dict[str, Queue] = {}
    team_quota = total_gpus // 40
    for d in range(2):
        div = f"div-{d}"
        queues[div] = Queue(div, None, {GPU: QueueResource(team_quota * 20)})
        for p in range(4):
            dept = f"{div}-dept-{p}"
            queues[dept] = Queue(dept, div, {GPU: QueueResource(team_quota * 5, None, 1 + p)})
            for t in range(5):
                team = f"{dept}-team-{t}"
                limit = 2 * team_quota if t % 4 == 0 else None
                queues[team] = Queue(team, dept, {GPU: QueueResource(team_quota, limit)})
    return queues


def with_queues(gangs: list[Gang], queues: dict[str, Queue]) -> list[Gang]:
    teams = sorted(name for name in queues if "-team-" in name)
    return [replace(g, queue=teams[i % len(teams)]) for i, g in enumerate(gangs)]


def decision_counts(result: object) -> dict[str, int]:
    """How many gangs a plan admitted, and how many waited for each reason."""
    return decision_counts_of(result.decisions)  # type: ignore[attr-defined]


def decision_counts_of(decisions: Sequence[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for d in decisions:
        key = type(d).__name__ + ("" if type(d).__name__ == "Admit" else f"/{d.reason}")
        counts[key] = counts.get(key, 0) + 1
    return counts


def timed(fn: Callable[[], object], runs: int) -> tuple[list[float], object]:
    times = []
    result: object = None
    for _ in range(runs):
        with cyclic_gc_paused():
            t0 = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - t0)
    return times, result


def run(runs: int = 3, seed: int = 7, only: set[str] | None = None) -> dict[str, Any]:
    """Every scenario, or those in ``only`` (with ``pass_10k``, which the ratios divide by)."""

    def wanted(name: str) -> bool:
        return only is None or name in only

    rng = random.Random(seed)
    t0 = time.perf_counter()
    nodes, pods, running = build_cluster(rng)
    pending = pending_gangs(rng, 10_000)
    build_seconds = time.perf_counter() - t0
    config = PlannerConfig()
    results: dict[str, Any] = {
        "cluster": {
            "nodes": len(nodes),
            "gpus": 8 * len(nodes),
            "running_pods": len(pods),
            "running_gangs": len(running),
            "gpus_used": sum(p.requests.get(GPU, 0) for p in pods),
            "pending_gangs": len(pending),
            "pending_pods": sum(len(g.members) for g in pending),
            "build_seconds": round(build_seconds, 2),
        },
        "scenarios": {},
    }

    # 0. the fixed cost of a pass: building the state with nothing to decide
    if wanted("state_only"):
        base = snapshot_of(nodes, pods, running)
        times, _ = timed(lambda: plan(base, config), runs)
        results["scenarios"]["state_only"] = {"seconds": times, "note": "running gangs only, nothing pending"}

    # 1. full pass
    snap = snapshot_of(nodes, pods, running + pending)
    times, result = timed(lambda: plan(snap, config), runs)
    decisions = result.decisions  # type: ignore[attr-defined]
    by_reason = decision_counts_of(decisions)
    results["scenarios"]["pass_10k"] = {"seconds": times, "decisions": dict(sorted(by_reason.items()))}

    if only is not None:
        return _only(results, only, snap, (nodes, pods, running, pending), runs, seed, config)

    # 1b. the same pass with queues
    queues = queue_tree(8 * len(nodes))
    queued = snapshot_of(nodes, pods, with_queues(running + pending, queues))
    queued = replace(queued, queues=queues)
    times, result = timed(lambda: plan(queued, config), runs)
    by_reason = decision_counts(result)
    results["scenarios"]["pass_10k_queues"] = {"seconds": times, "decisions": dict(sorted(by_reason.items()))}

    # 1c. the same pass on DRA devices
    results["scenarios"]["pass_10k_dra"] = dra_pass(snap, runs, config, results)

    # 1d. the same pass on four topology levels, a third of the pending gangs requiring one rack
    results["scenarios"]["pass_10k_topology"] = topology_pass(
        nodes, pods, running, pending, runs, config, results
    )

    # 2. one 256-pod gang
    def big(name: str, per_pod: int) -> Gang:
        members = tuple(
            gpu_pod(f"{name}-{k}", "team-0", f"{name}-{k}", per_pod, created=NOW - 10, gated=True, group=name)
            for k in range(256)
        )
        return Gang(key=GangKey("team-0", name), min_member=256, members=members, created=NOW - 10)

    for label, per_pod in (("gang_256", 1), ("gang_256_x8_no_fit", 8)):
        g = big(label, per_pod)
        one = snapshot_of(nodes, pods, [*running, g])
        times, result = timed(lambda one=one: plan(one, config), runs)  # type: ignore[misc]
        decision = result.for_gang(g.key)  # type: ignore[attr-defined]
        decide_times = []
        for _ in range(max(runs, 5)):
            planning = PlanningPass(one, config)  # state built outside the clock
            t0 = time.perf_counter()
            planning.decide(g)
            decide_times.append(time.perf_counter() - t0)
        results["scenarios"][label] = {
            "seconds": times,
            "decision_seconds": decide_times,
            "decision": type(decision).__name__,
            "message": getattr(decision, "message", ""),
        }

    # 3. victim search: every running gang at priority 0, a priority-1000 gang that needs 128 GPUs
    preempt_config = replace(config, preemption_min_runtime_seconds=0.0, starvation_age_seconds=None)
    members = tuple(
        gpu_pod(f"vip-{k}", "team-1", f"vip-{k}", 8, created=NOW - 5, gated=True, group="vip")
        for k in range(16)
    )
    vip = Gang(key=GangKey("team-1", "vip"), min_member=16, members=members, created=NOW - 5, priority=1000)
    # Fill the cluster so that the gang cannot fit without preemption.
    filler = pending_gangs(random.Random(seed + 1), 6000)
    fill_snap = snapshot_of(nodes, pods, running + filler)
    fill_plan = plan(fill_snap, replace(config, starvation_age_seconds=None))
    admitted = {d.gang: d for d in fill_plan.decisions if isinstance(d, Admit)}
    full_running = list(running)
    full_pods = list(pods)
    for g in filler:
        d = admitted.get(g.key)
        if d is None:
            continue
        ms = tuple(
            replace(m, gated=False, node_name=d.booked[m.uid], phase="Running", started=NOW - 3600)
            for m in g.members
        )
        full_running.append(replace(g, members=ms, admitted=d.placement, admitted_at=NOW - 3600))
        full_pods.extend(ms)
    vsnap = snapshot_of(nodes, full_pods, [*full_running, vip])
    times, result = timed(lambda: plan(vsnap, preempt_config), runs)
    decision = result.for_gang(vip.key)  # type: ignore[attr-defined]
    search_times = []
    for _ in range(runs):
        state = PassState(vsnap, preempt_config)
        items = [(state.shapes.of(members[0]), len(members))]
        searcher = Preemption(state)
        t0 = time.perf_counter()
        found = searcher.search(vip, items, signature(items))
        search_times.append(time.perf_counter() - t0)
    results["scenarios"]["victim_search"] = {
        "seconds": times,
        "search_seconds": search_times,
        "gpus_used_before": sum(p.requests.get(GPU, 0) for p in full_pods if p.node_name),
        "decision": type(decision).__name__,
        "victims": len(getattr(decision, "victims", ())),
        "victim_pods": sum(len(v.pods) for v in getattr(decision, "victims", ())),
        "found": found is not None,
        "message": getattr(decision, "message", ""),
    }
    results["scenarios"]["pass_10k_at_100k_pods"] = scaled_up_pass(runs, seed, config)
    return results


def dra_pass(snap: Snapshot, runs: int, config: PlannerConfig, results: dict[str, Any]) -> dict[str, Any]:
    dra = as_dra(snap)
    times, result = timed(lambda: plan(dra, config), runs)
    by_reason = decision_counts(result)
    # The first pass translates every claim-holding pod and gang; later ones reuse what did not change.
    base_best = min(results["scenarios"]["pass_10k"]["seconds"])
    return {
        "seconds": times,
        "ratio_to_pass_10k": round(min(times) / base_best, 2),
        "first_pass_ratio_to_pass_10k": round(times[0] / base_best, 2),
        "decisions": dict(sorted(by_reason.items())),
    }


def _only(
    results: dict[str, Any],
    only: set[str],
    snap: Snapshot,
    cluster: tuple[list[Node], list[Pod], list[Gang], list[Gang]],
    runs: int,
    seed: int,
    config: PlannerConfig,
) -> dict[str, Any]:
    """The scenarios asked for by ``--only`` (those that run on bench_core's cluster after pass_10k,
    and the pass at twice the size)."""
    known = {"state_only", "pass_10k", "pass_10k_dra", "pass_10k_topology", "pass_10k_at_100k_pods"}
    unknown = only - known
    if unknown:
        raise SystemExit(f"--only takes {', '.join(sorted(known))}; not {', '.join(sorted(unknown))}")
    if "pass_10k_dra" in only:
        results["scenarios"]["pass_10k_dra"] = dra_pass(snap, runs, config, results)
    if "pass_10k_topology" in only:
        results["scenarios"]["pass_10k_topology"] = topology_pass(*cluster, runs, config, results)
    if "pass_10k_at_100k_pods" in only:
        results["scenarios"]["pass_10k_at_100k_pods"] = scaled_up_pass(runs, seed, config)
    return results


def topology_pass(
    nodes: list[Node],
    pods: list[Pod],
    running: list[Gang],
    pending: list[Gang],
    runs: int,
    config: PlannerConfig,
    results: dict[str, Any],
) -> dict[str, Any]:
    """1d. The pass of 1. on nodes labelled in four levels, a third of the pending gangs requiring
    one rack (some of them sliced); its figure is the ratio to the plain pass of the same run."""
    levelled = snapshot_of(with_four_levels(nodes), pods, running + with_required_racks(pending))
    times, result = timed(lambda: plan(levelled, config), runs)
    base_best = min(results["scenarios"]["pass_10k"]["seconds"])
    return {
        "seconds": times,
        "decisions": dict(sorted(decision_counts(result).items())),
        "ratio_to_pass_10k": round(min(times) / base_best, 2),
    }


def scaled_up_pass(runs: int, seed: int, config: PlannerConfig) -> dict[str, Any]:
    """4. The full pass of 1. on a cluster twice the size: 10,000 nodes, 100,000 pods (40,000
    DaemonSet pods and 60,000 GPU pods of running gangs), the same 10,000 pending gangs."""
    rng = random.Random(seed)
    nodes, pods, running = build_cluster(rng, n_nodes=10_000, running_gpu_pods=60_000)
    snap = snapshot_of(nodes, pods, running + pending_gangs(rng, 10_000))
    times, result = timed(lambda: plan(snap, config), runs)
    by_reason = decision_counts(result)
    return {
        "seconds": times,
        "decisions": dict(sorted(by_reason.items())),
        "nodes": len(nodes),
        "pods": len(pods),
    }


def report(results: dict[str, Any]) -> str:
    lines = [
        "controller/core planning cost ("
        + ", ".join(f"{k}={v}" for k, v in results["cluster"].items())
        + ")",
        f"{'scenario':<22} {'best':>9} {'median':>9} {'target':>8}  notes",
    ]
    for name, data in results["scenarios"].items():
        secs = data.get("decision_seconds") if name.startswith("gang_256") else data.get("search_seconds")
        secs = secs or data["seconds"]
        target = TARGETS.get(name)
        notes = data.get("decisions") or data.get("decision") or data.get("note", "")
        if name == "pass_10k_topology":
            notes = f"{data['ratio_to_pass_10k']} × pass_10k (target ≤ {TOPOLOGY_RATIO_TARGET}); {notes}"
        if name == "pass_10k_dra":
            notes = (
                f"{data['ratio_to_pass_10k']} × pass_10k (target ≤ {DRA_RATIO_TARGET}; first pass "
                f"{data['first_pass_ratio_to_pass_10k']} ×, nothing to reuse); {notes}"
            )
        if name == "victim_search":
            notes = (
                f"plan() best {min(data['seconds']):.3f}s; "
                f"{data['victim_pods']} pods in {data['victims']} victims"
            )
        lines.append(
            f"{name:<22} {min(secs):>8.4f}s {statistics.median(secs):>8.4f}s "
            f"{(f'{target:g}s' if target else '-'):>8}  {notes}"
        )
    for name in ("gang_256_x8_no_fit", "victim_search"):
        message = results["scenarios"].get(name, {}).get("message")
        if message:
            lines.append(f"  {name}: {message[:160]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--only",
        help="comma-separated scenarios (state_only, pass_10k, pass_10k_dra, pass_10k_topology, "
        "pass_10k_at_100k_pods); "
        "pass_10k always runs",
    )
    args = parser.parse_args(argv)
    results = run(args.runs, args.seed, set(args.only.split(",")) if args.only else None)
    results["python"] = platform.python_version()
    results["machine"] = platform.machine()
    out = OUT.with_name("core-only.json") if args.only else OUT  # a part never replaces the whole
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str))
    print(report(results))
    print(f"written to {out.relative_to(ROOT)}")
    return 0


@pytest.mark.bench
def test_bench_core() -> None:
    assert main(["--runs", "2"]) == 0


if __name__ == "__main__":
    sys.exit(main())
