"""The workloads every system runs, each on its own fresh cluster (arrivals are pure data).

Sizes: ``full`` is what issue 13 asks for and what the published tables use; ``small`` runs every
scenario end to end in a few minutes per system (used to check the harness on a busy machine).
"""

from __future__ import annotations

import csv
import os
import random
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tests.localcluster.fleet import FleetSpec

TRACE_SLICE = Path(__file__).with_name("philly-2017-10-27T1200-30min.csv")
RACK = "topology.kubernetes.io/rack"


@dataclass(frozen=True)
class Arrival:
    at: float  # seconds after the scenario starts
    name: str
    size: int  # pods
    gpus: int  # per pod
    run_for_s: float


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    fleet: FleetSpec
    arrivals: tuple[Arrival, ...]
    timeout_s: float  # after the last arrival
    # The gang whose wait is the scenario's headline (starvation), if any.
    focus: str | None = None
    notes: str = ""
    # The run ends when every gang has "completed" (or only been "placed"), or at the timeout.
    until: str = "completed"
    # A node label every gang must run inside one domain of (each system says it its own way:
    # tests/localcluster/peers.py ``System.topology_gang``), or None.
    topology: str | None = None


def _fleet(nodes: int) -> FleetSpec:
    # Racks of 8 so that the fleet spreads over zones the same way at every size.
    return FleetSpec(gpu_nodes=nodes, gpus_per_node=8, cpu_nodes=0, nodes_per_rack=8, racks_per_zone=4)


def deadlock(full: bool) -> Scenario:
    """Pairs of gangs that each need 3/4 of the fleet, all created at the same instant."""
    nodes, pairs, run_for = (8, 4, 10.0) if full else (4, 2, 5.0)
    size = nodes * 8 * 3 // 4
    arrivals = tuple(Arrival(0.0, f"race-{i}", size, 1, run_for) for i in range(2 * pairs))
    return Scenario(
        "deadlock",
        f"Deadlock race: {2 * pairs} gangs of {size} one-GPU pods, each 3/4 of {nodes}×8 GPUs, at once",
        _fleet(nodes),
        arrivals,
        timeout_s=60 + 4 * pairs * 2 * run_for,
        notes=f"pods run {run_for:g}s",
    )


def burst(full: bool) -> Scenario:
    """The fleet filled exactly by gangs of 8 and 16 one-GPU pods, plus more that must wait whole."""
    nodes, run_for = (64, 20.0) if full else (8, 10.0)
    gpus = nodes * 8
    fill_16, fill_8 = gpus // 4 // 16 * 2, gpus // 2 // 8  # half the GPUs in 16s, half in 8s
    extra_16, extra_8 = max(1, fill_16 // 4), max(2, fill_8 // 4)
    sizes = [16] * fill_16 + [8] * fill_8
    rng = random.Random(13)
    rng.shuffle(sizes)
    extra = [16] * extra_16 + [8] * extra_8
    rng.shuffle(extra)
    arrivals = tuple(Arrival(0.0, f"burst-{i}", s, 1, run_for) for i, s in enumerate(sizes + extra))
    return Scenario(
        "burst",
        f"Burst: {len(sizes)} gangs filling {nodes}×8 GPUs exactly + {len(extra)} that must wait",
        _fleet(nodes),
        arrivals,
        timeout_s=120 + 4 * run_for,
        notes=f"pods run {run_for:g}s",
    )


def starvation(full: bool) -> Scenario:
    """A gang of whole nodes (half the fleet) behind a steady stream of 1-4-GPU gangs."""
    nodes, every, stream_s, run_for, big_at = (
        (16, 0.5, 180.0, 20.0, 20.0) if full else (4, 1.0, 60.0, 12.0, 10.0)
    )
    rng = random.Random(7)
    arrivals = [
        Arrival(round(i * every, 3), f"small-{i}", rng.randint(1, 4), 1, run_for)
        for i in range(int(stream_s / every))
    ]
    big = Arrival(big_at, "big", nodes // 2, 8, run_for)
    arrivals.append(big)
    arrivals.sort(key=lambda a: a.at)
    return Scenario(
        "starvation",
        f"Starvation: a {big.size * 8}-GPU gang ({big.size}×8) behind a stream of 1-4-GPU gangs "
        f"every {every:g}s for {stream_s:g}s on {nodes}×8 GPUs",
        _fleet(nodes),
        tuple(arrivals),
        timeout_s=120 + 2 * run_for,
        focus="big",
        notes=f"pods run {run_for:g}s; the big gang arrives at t={big_at:g}s",
    )


def _one_gang(name: str, nodes: int, size: int, timeout_s: float) -> Scenario:
    return Scenario(
        name,
        f"Large gang: one {size}-pod gang (1 GPU each) on {nodes} nodes",
        _fleet(nodes),
        (Arrival(0.0, name, size, 1, 3600.0),),
        timeout_s=timeout_s,
        until="placed",
    )


def large_gang(full: bool) -> Scenario:
    return _one_gang("large", *((500, 512, 600) if full else (32, 64, 180)))


def huge_gang_1k(full: bool) -> Scenario:
    """1,000 pods on 1,000 nodes: every pod could have a node to itself."""
    return _one_gang("large-1k", *((1000, 1000, 900) if full else (64, 128, 180)))


def huge_gang_5k(full: bool) -> Scenario:
    """5,000 pods on 5,000 nodes: the largest gang configuration of upstream's scheduler_perf."""
    return _one_gang("large-5k", *((5000, 5000, 1800) if full else (128, 256, 240)))


def trace_path() -> Path | None:
    override = os.environ.get("PHALANX_PEERS_TRACE")
    path = Path(override) if override else TRACE_SLICE
    return path if path.is_file() else None


def trace(full: bool) -> Scenario:
    """30 minutes of the Philly trace: arrivals and sizes from the trace, time compressed.

    Arrivals and durations are divided by ``speedup``; durations are then capped (Philly jobs run
    for hours) and floored so that each job is seen running. A job of g GPUs is one pod of g GPUs
    up to 8, else g/8 pods of 8 GPUs.
    """
    nodes, speedup, cap, floor = (16, 15.0, 60.0, 3.0) if full else (8, 30.0, 30.0, 2.0)
    path = trace_path()
    rows = list(csv.DictReader(path.open())) if path else []
    rows.sort(key=lambda r: r["timestamp"])
    arrivals = []
    if rows:
        t0 = datetime.strptime(rows[0]["timestamp"][:13] + ":00:00", "%Y-%m-%d %H:%M:%S")
        for i, row in enumerate(rows):
            at = (datetime.strptime(row["timestamp"], "%Y-%m-%d %H:%M:%S") - t0).total_seconds() / speedup
            gpus = int(row["num_gpus"])
            size, per_pod = (1, gpus) if gpus <= 8 else (gpus // 8, 8)
            run_for = min(cap, max(floor, float(row["duration"]) / speedup))
            arrivals.append(Arrival(round(at, 3), f"trace-{i}", size, per_pod, round(run_for, 1)))
    return Scenario(
        "trace",
        f"Trace: {len(arrivals)} Philly jobs (2017-10-27 12:00-12:30), {speedup:g}× faster, {nodes}×8 GPUs",
        _fleet(nodes),
        tuple(arrivals),
        timeout_s=120 + cap,
        notes=f"durations ÷{speedup:g}, capped at {cap:g}s, at least {floor:g}s"
        + ("" if path else "; TRACE MISSING"),
    )


def topology(full: bool) -> Scenario:
    """Gangs that each fit one rack and must start inside one, arriving faster than they end, so
    that racks fragment: a gang spread over racks is what a topology-blind scheduler would do."""
    nodes, per_rack, count, every, run_for = (32, 4, 96, 0.5, 20.0) if full else (8, 2, 24, 1.0, 10.0)
    rack_gpus = per_rack * 8
    # pods × GPUs per pod, each at most one rack's GPUs and most more than half of one.
    shapes = [(2, 8), (3, 4), (4, 4), (2, 4)] if rack_gpus == 16 else [(4, 8), (3, 8), (6, 4), (5, 4)]
    rng = random.Random(30)
    arrivals = []
    for i in range(count):
        size, gpus = rng.choice(shapes)
        arrivals.append(Arrival(round(i * every, 3), f"topo-{i}", size, gpus, run_for))
    return Scenario(
        "topology",
        f"Topology: {count} gangs of {min(s * g for s, g in shapes)}-{max(s * g for s, g in shapes)} GPUs, "
        f"each required inside one rack ({per_rack}×8 GPUs), every {every:g}s on {nodes}×8 GPUs",
        FleetSpec(gpu_nodes=nodes, gpus_per_node=8, cpu_nodes=0, nodes_per_rack=per_rack, racks_per_zone=4),
        tuple(arrivals),
        timeout_s=180 + 2 * run_for,
        notes=f"pods run {run_for:g}s",
        topology=RACK,
    )


BUILDERS = {
    "deadlock": deadlock,
    "burst": burst,
    "starvation": starvation,
    "large": large_gang,
    "large-1k": huge_gang_1k,
    "large-5k": huge_gang_5k,
    "trace": trace,
    "topology": topology,
}


def scenario(name: str, full: bool) -> Scenario:
    return BUILDERS[name](full)
