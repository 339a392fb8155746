"""Run one scenario for one system on a fresh local cluster; return its figures and its cost."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.api.kube import ApiError, KubeClient, gather_limited
from controller.api.resources import NODES, PODS, ResourceType
from tests.bench.peers.scenarios import Arrival, Scenario
from tests.bench.peers.timeline import GangRecord, PodRecord, inside_one_domain, summarize
from tests.localcluster import ClusterConfig, LocalCluster
from tests.localcluster.cluster import REPO
from tests.localcluster.peers import (
    GANG_LABEL,
    SCHEDULER_BURST,
    SCHEDULER_QPS,
    SYSTEMS,
    System,
    make_system,
)

NAMESPACE = "bench"
CONCURRENCY = 64
# The Job controller creates every system's pods; at its default 20 requests/s a 512-pod Job
# alone would take 25 s to appear, hiding the schedulers' differences.
CONTROLLER_MANAGER_QPS = 200
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _log(message: str) -> None:
    print(f"[bench-peers {time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---- cost ----------------------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def api_requests(cluster: LocalCluster) -> dict[str, int]:
    """apiserver_request_total summed over every client: all, and those that write."""
    text = cluster.kubectl("get", "--raw", "/metrics").stdout
    total = writes = 0
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        count = int(float(line.rsplit(" ", 1)[1]))
        total += count
        if any(f'verb="{v}"' in line for v in ("POST", "PUT", "PATCH", "DELETE", "APPLY")):
            writes += count
    return {"all": total, "writes": writes}


@dataclass
class CostSample:
    cpu: dict[str, float]
    kube_scheduler_cpu: float
    requests: dict[str, int]


def sample_cost(cluster: LocalCluster, system: System) -> CostSample:
    scheduler = cluster.pids().get("kube-scheduler")
    return CostSample(
        cpu={name: cpu_seconds(pid) for name, pid in system.pids().items()},
        kube_scheduler_cpu=cpu_seconds(scheduler) if scheduler else 0.0,
        requests=api_requests(cluster),
    )


def cost_between(before: CostSample, after: CostSample, system: System) -> dict[str, Any]:
    per_process = {name: round(after.cpu[name] - before.cpu.get(name, 0.0), 2) for name in after.cpu}
    peak = {name: peak_rss_mb(pid) for name, pid in system.pids().items()}
    return {
        "cpu_s": round(sum(per_process.values()), 2),
        "cpu_s_per_process": per_process,
        "peak_rss_mb": round(sum(peak.values()), 1),
        "peak_rss_mb_per_process": {name: round(mb, 1) for name, mb in peak.items()},
        "stock_kube_scheduler_cpu_s": round(after.kube_scheduler_cpu - before.kube_scheduler_cpu, 2),
        "api_requests": after.requests["all"] - before.requests["all"],
        "api_writes": after.requests["writes"] - before.requests["writes"],
    }


# ---- the workload --------------------------------------------------------------------------------
def resource_type(obj: dict[str, Any]) -> ResourceType:
    group, _, version = obj["apiVersion"].rpartition("/")
    kind = obj["kind"]
    return ResourceType(group, version, kind.lower() + "s", kind)


@dataclass
class Watched:
    pods: dict[str, PodRecord] = field(default_factory=dict)

    def see(self, event_type: str, obj: dict[str, Any], now: float) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("namespace") != NAMESPACE:
            return
        gang = (meta.get("labels") or {}).get(GANG_LABEL)
        uid = meta.get("uid")
        if not gang or not uid:
            return
        record = self.pods.get(uid)
        if record is None:
            spec = obj.get("spec") or {}
            gpus = sum(
                int(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0))
                for c in spec.get("containers") or []
            )
            record = self.pods[uid] = PodRecord(gang=gang, gpus=gpus, created=now)
        if record.schedulable is None and not (obj.get("spec") or {}).get("schedulingGates"):
            record.schedulable = now  # no gate of any system left: the scheduler may place it
        node = (obj.get("spec") or {}).get("nodeName")
        if node and record.bound is None:
            record.bound = now
            record.node = str(node)
        phase = (obj.get("status") or {}).get("phase")
        if record.finished is None and phase in ("Succeeded", "Failed"):
            record.finished = now
            record.succeeded = phase == "Succeeded"
        if event_type == "DELETED" and record.finished is None and record.bound is not None:
            record.finished = now


async def watch_pods(kube: KubeClient, seen: Watched, stop: asyncio.Event) -> None:
    items, rv = await kube.list(PODS, NAMESPACE)
    for item in items:
        seen.see("ADDED", item, time.perf_counter())
    while not stop.is_set():
        try:
            async for event in kube.watch(PODS, rv, 60):
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    raise ApiError(410, "Gone", "watch expired")
                rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                if event.get("type") != "BOOKMARK":
                    seen.see(str(event.get("type")), obj, time.perf_counter())
                if stop.is_set():
                    return
        except ApiError:
            items, rv = await kube.list(PODS, NAMESPACE)
            for item in items:
                seen.see("MODIFIED", item, time.perf_counter())


async def submit(
    kube: KubeClient, system: System, arrival: Arrival, gangs: dict[str, GangRecord], topology: str | None
) -> None:
    run_for = f"{arrival.run_for_s:g}s"
    if topology is None:
        objects = system.gang(NAMESPACE, arrival.name, arrival.size, arrival.gpus, run_for)
    else:
        objects = system.topology_gang(NAMESPACE, arrival.name, arrival.size, arrival.gpus, run_for, topology)
    gangs[arrival.name] = GangRecord(arrival.name, arrival.size, arrival.gpus, time.perf_counter())
    for obj in objects:  # in order: a PodGroup before the Job that uses it
        await kube.create(resource_type(obj), NAMESPACE, obj)


def _done(scenario: Scenario, gangs: dict[str, GangRecord], seen: Watched, now: float) -> bool:
    # Every gang gets its pods before any is judged: the figures are summarized from these lists
    # after the last call, and a gang that never completes must not hide the ones after it.
    by_gang: dict[str, list[PodRecord]] = {}
    for pod in seen.pods.values():
        by_gang.setdefault(pod.gang, []).append(pod)
    for gang in gangs.values():
        gang.pods = by_gang.get(gang.name, [])
    if len(gangs) < len(scenario.arrivals):
        return False
    if scenario.until == "placed":
        return all(gang.all_bound_at(now) is not None for gang in gangs.values())
    return all(gang.completed() for gang in gangs.values())


async def drive(cluster: LocalCluster, system: System, scenario: Scenario) -> dict[str, Any]:
    kube = await KubeClient.connect(str(cluster.kubeconfig), CONCURRENCY)
    seen, stop = Watched(), asyncio.Event()
    watcher = asyncio.create_task(watch_pods(kube, seen, stop))
    gangs: dict[str, GangRecord] = {}
    try:
        await asyncio.sleep(0.5)
        start = time.perf_counter()
        by_time: dict[float, list[Arrival]] = {}
        for arrival in scenario.arrivals:
            by_time.setdefault(arrival.at, []).append(arrival)
        submissions: list[asyncio.Task[Any]] = []
        for at in sorted(by_time):
            await asyncio.sleep(max(0.0, start + at - time.perf_counter()))
            batch = by_time[at]
            submissions.append(
                asyncio.create_task(
                    gather_limited(
                        CONCURRENCY, *(submit(kube, system, a, gangs, scenario.topology) for a in batch)
                    )
                )
            )
        for result in await asyncio.gather(*submissions):
            if errors := [r for r in result if isinstance(r, BaseException)]:
                raise RuntimeError(f"{system.name}: submitting failed: {errors[0]}")
        deadline = time.perf_counter() + scenario.timeout_s
        while time.perf_counter() < deadline:
            if _done(scenario, gangs, seen, time.perf_counter()):
                break
            await asyncio.sleep(0.2)  # polling: the figures come from timestamps, not from this loop
        end = time.perf_counter()
        timed_out = not _done(scenario, gangs, seen, end)
        domain_of: dict[str, str] = {}
        if scenario.topology is not None:
            nodes, _ = await kube.list(NODES)
            for node in nodes:
                meta = node.get("metadata") or {}
                value = (meta.get("labels") or {}).get(scenario.topology)
                if value is not None:
                    domain_of[str(meta.get("name"))] = str(value)
    finally:
        stop.set()
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
        await kube.close()
    records = list(gangs.values())
    figures: dict[str, Any] = dict(summarize(records, start, end, scenario.fleet.total_gpus))
    figures["timed_out"] = timed_out
    if scenario.topology is not None:
        figures.update(inside_one_domain(records, domain_of, end))
    # Members that held a node and ended without succeeding: evicted (and made again by their Job).
    figures["pods_ended_unsucceeded"] = sum(
        1 for p in seen.pods.values() if p.bound is not None and p.finished is not None and not p.succeeded
    )
    figures["watched_s"] = round(end - start, 2)
    if scenario.focus and scenario.focus in gangs:
        focus = gangs[scenario.focus]
        placed = focus.all_bound_at(end)
        figures["focus_wait_s"] = None if placed is None else round(placed - focus.submitted, 3)
        others = [g for g in records if g.name != scenario.focus]
        figures["others"] = summarize(others, start, end, scenario.fleet.total_gpus)
    return figures


def run_one(scenario: Scenario, system_name: str, bin_dir: Path | None) -> dict[str, Any]:
    """A fresh cluster with ``scenario``'s fleet, ``system_name`` alone on it, the workload, teardown."""
    config = ClusterConfig(
        # A name of its own per run: kwokctl keeps per-name state (ports among it) between runs.
        name=f"peers-{scenario.name}-{system_name}",
        workdir=REPO / ".local" / "peers",
        fleet=scenario.fleet,
        scheduler_qps=SCHEDULER_QPS,
        scheduler_burst=SCHEDULER_BURST,
        controller_manager_qps=CONTROLLER_MANAGER_QPS,
        ready_timeout=120 + scenario.fleet.gpu_nodes,
        **SYSTEMS[system_name].cluster_settings,
    )
    cluster = LocalCluster(config)
    system = make_system(system_name, cluster, bin_dir)
    started = time.monotonic()
    cluster.up()
    try:
        system.topology = scenario.topology
        system.up()
        cluster.kubectl("create", "namespace", NAMESPACE)
        system.prepare_namespace(NAMESPACE)
        while cluster.kubectl("get", "sa", "default", "-n", NAMESPACE, check=False).returncode:
            time.sleep(0.2)
        before = sample_cost(cluster, system)
        _log(f"{scenario.name} × {system_name}: {len(scenario.arrivals)} gangs")
        figures = asyncio.run(drive(cluster, system, scenario))
        figures["cost"] = cost_between(before, sample_cost(cluster, system), system)
        figures["own"] = system.own_figures()
    finally:
        system.down()
        cluster.down(quiet=True)
    figures["setup_and_run_s"] = round(time.monotonic() - started, 1)
    return figures
