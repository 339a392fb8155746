"""Gang release on a real local control plane with 500 fake GPU nodes.

For gangs of 8, 64, 512 and 1,000 one-GPU pods (bare pods linked by the canonical label, created
concurrently by this client), measured from the client's side through a pod watch:

- *release latency*: from the moment the last member's create returned to the moment every gate
  is gone (p50/p99 over the repetitions) -- what Phalanx adds between "the gang exists" and "the
  scheduler may place it";
- *spread*: between the first and the last gate removal of one gang;
- *bind rate*: members bound per second until the whole gang is bound (kube-scheduler's own client
  is limited to ``--scheduler-qps``);
- *raw patch rate*: this benchmark's client removing the gate (and adding a node-name pin) from 512
  gated pods with the same concurrency Phalanx uses, as the controller's own ServiceAccount and with
  Phalanx's gate, so that the API server does the same work (RBAC, the admission policies that let
  only the controller lift that gate) -- the ceiling for Phalanx's own gate-lift rate, measured
  before and after each 512-pod gang; and once as the cluster admin removing another gate, which no
  policy checks (what the controller's identity and those policies cost);
- *lift rate at the controller*: members over the controller's own ``admission_latency`` for the
  gang (from its first gate-lift request to the last answer), timed the way the raw rate is, at the
  client that sends the patches. The *lift rate* beside it is seen through this client's watch
  (members over the spread), so it also carries the watch's delivery lag.

Run: ``python -m tests.bench.bench_cluster`` (about 2-3 minutes; builds its own cluster in
``.local/bench``). Writes ``out/bench/cluster.json``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from controller.api.kube import KubeClient, gather_limited
from controller.api.resources import PODS
from shared import constants
from tests import builders
from tests.localcluster import ClusterConfig, FleetSpec, LocalCluster
from tests.localcluster.cluster import REPO
from tests.localcluster.phalanx import Phalanx

OUT = Path("out/bench/cluster.json")
NAMESPACE = "bench"
RAW_NAMESPACE = "bench-raw"
OTHER_GATE = "bench.phalanx.io/hold"
CONCURRENCY = 64
SIZES = {8: 10, 64: 4, 512: 3, 1000: 2}  # gang size -> repetitions
# The gang size whose release is compared with the raw patch rate measured around it.
RAW_RATE_SIZE = 512


def bench_pod(name: str, group: str | None, gate: str | None = None) -> dict[str, Any]:
    """A one-GPU pod, a member of ``group`` (named "g-<size>-<n>") when given, held by ``gate``."""
    built = builders.pod(name).gpus(1)
    if group:
        built.label(constants.POD_GROUP_LABEL, group).annotation(
            constants.MIN_MEMBER_ANNOTATION, group.split("-")[1]
        )
    if gate:
        built.gate(gate)
    return built.build()


@dataclass
class Observed:
    lifted: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)


async def watch_pods(kube: KubeClient, namespace: str, seen: Observed, stop: asyncio.Event) -> None:
    _, rv = await kube.list(PODS, namespace)
    while not stop.is_set():
        async for event in kube.watch(PODS, rv, 60):
            obj = event.get("object") or {}
            meta = obj.get("metadata") or {}
            if meta.get("resourceVersion"):
                rv = meta["resourceVersion"]
            if meta.get("namespace") != namespace or event.get("type") == "DELETED":
                continue
            now = time.perf_counter()
            name = meta.get("name", "")
            spec = obj.get("spec") or {}
            if not spec.get("schedulingGates") and name not in seen.lifted:
                seen.lifted[name] = now
            if spec.get("nodeName") and name not in seen.bound:
                seen.bound[name] = now
            if stop.is_set():
                return


async def wait_for(predicate: Any, timeout: float) -> None:
    deadline = time.perf_counter() + timeout
    while not predicate():
        if time.perf_counter() > deadline:
            raise TimeoutError("bench gang did not settle")
        await asyncio.sleep(0.01)


async def delete_all(kube: KubeClient, namespace: str, names: list[str]) -> None:
    await gather_limited(CONCURRENCY, *(kube.delete(PODS, namespace, n) for n in names))
    for _ in range(600):
        items, _ = await kube.list(PODS, namespace)
        if not items:
            return
        await asyncio.sleep(0.1)


async def raw_patch_rate(
    kube: KubeClient, patcher: KubeClient | None = None, gate: str = OTHER_GATE, count: int = 512
) -> float:
    """Pods created gated by ``kube``, then their gates removed (and a pin added) by ``patcher``.

    With the controller's own credentials and Phalanx's gate, the API server does for each patch
    exactly what it does for a gate lift -- the admission policies that allow only the controller
    to lift that gate, and only so, included -- so only the client differs from a lift.
    """
    patcher = patcher or kube
    names = [f"raw-{i}" for i in range(count)]
    await gather_limited(
        CONCURRENCY, *(kube.create(PODS, RAW_NAMESPACE, bench_pod(n, None, gate)) for n in names)
    )

    def body(i: int) -> dict[str, Any]:
        # Pinned to a node with room, as Phalanx pins, so the scheduler and kwok then do the same
        # work for these pods as for a released gang: both runs share the machine's two cores.
        return {
            "spec": {
                "schedulingGates": [{"$patch": "delete", "name": gate}],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchFields": [
                                        {
                                            "key": "metadata.name",
                                            "operator": "In",
                                            "values": [f"gpu-node-{i % 500:03d}"],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                },
            }
        }

    started = time.perf_counter()
    results = await gather_limited(
        CONCURRENCY,
        *(
            patcher.patch(PODS, RAW_NAMESPACE, n, body(i), patch_type="strategic")
            for i, n in enumerate(names)
        ),
    )
    elapsed = time.perf_counter() - started
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        raise RuntimeError(f"raw patches failed: {errors[0]}")
    await delete_all(kube, RAW_NAMESPACE, names)
    return count / elapsed


def admission_latency(phalanx: Phalanx) -> tuple[float, float]:
    """(count, sum) of the controller's phalanx_gang_admission_latency_seconds histogram."""
    count = total = 0.0
    for line in phalanx.metrics().splitlines():
        if line.startswith("phalanx_gang_admission_latency_seconds_count"):
            count = float(line.rsplit(" ", 1)[1])
        elif line.startswith("phalanx_gang_admission_latency_seconds_sum"):
            total = float(line.rsplit(" ", 1)[1])
    return count, total


async def one_gang(kube: KubeClient, phalanx: Phalanx, size: int, rep: int) -> dict[str, float]:
    group = f"g-{size}-{rep}"
    names = [f"{group}-{i}" for i in range(size)]
    seen = Observed()
    stop = asyncio.Event()
    watcher = asyncio.create_task(watch_pods(kube, NAMESPACE, seen, stop))
    await asyncio.sleep(0.2)
    before = admission_latency(phalanx)
    results = await gather_limited(
        CONCURRENCY, *(kube.create(PODS, NAMESPACE, bench_pod(n, group)) for n in names)
    )
    created = time.perf_counter()
    if errors := [r for r in results if isinstance(r, BaseException)]:
        raise RuntimeError(f"create failed: {errors[0]}")
    await wait_for(lambda: all(n in seen.lifted for n in names), 120)
    await wait_for(lambda: all(n in seen.bound for n in names), 300)
    stop.set()
    watcher.cancel()
    after = admission_latency(phalanx)
    lifted = [seen.lifted[n] for n in names]
    bound = [seen.bound[n] for n in names]
    await delete_all(kube, NAMESPACE, names)
    admissions, lifting = after[0] - before[0], after[1] - before[1]
    # One admission lifted every gate: size over its duration; split over several, not comparable.
    at_controller = size / lifting if admissions == 1 and lifting > 0 else 0.0
    return {
        "controller_lift_rate_pods_per_s": at_controller,
        "release_latency_s": max(lifted) - created,
        "spread_s": max(lifted) - min(lifted),
        "all_bound_s": max(bound) - created,
        "bind_rate_pods_per_s": size / max(max(bound) - min(lifted), 1e-6),
    }


async def preemption_latency(kube: KubeClient, rep: int) -> float:
    """A high-priority 4-pod gang arrives on a node a low-priority 8-pod gang fills (zero grace):
    seconds from the preemptor's last create to all of it bound."""
    node = {"kubernetes.io/hostname": f"gpu-node-{rep:03d}"}

    def member(name: str, group: str, priority: str) -> dict[str, Any]:
        body = bench_pod(name, group)
        body["spec"]["nodeSelector"] = node
        body["spec"]["priorityClassName"] = priority
        return body

    low = [f"low{rep}-{i}" for i in range(8)]
    high = [f"high{rep}-{i}" for i in range(4)]
    seen = Observed()
    stop = asyncio.Event()
    watcher = asyncio.create_task(watch_pods(kube, NAMESPACE, seen, stop))
    await asyncio.sleep(0.2)
    await gather_limited(
        CONCURRENCY, *(kube.create(PODS, NAMESPACE, member(n, f"l-8-{rep}", "bench-low")) for n in low)
    )
    await wait_for(lambda: all(n in seen.bound for n in low), 60)
    await gather_limited(
        CONCURRENCY, *(kube.create(PODS, NAMESPACE, member(n, f"h-4-{rep}", "bench-high")) for n in high)
    )
    created = time.perf_counter()
    await wait_for(lambda: all(n in seen.bound for n in high), 120)
    elapsed = max(seen.bound[n] for n in high) - created
    stop.set()
    watcher.cancel()
    await delete_all(kube, NAMESPACE, low + high)
    return elapsed


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def gang_figures(size: int, runs: list[dict[str, float]]) -> dict[str, Any]:
    latencies = [r["release_latency_s"] for r in runs]
    # 0 when no repetition was lifted by a single admission
    at_controller = [
        r["controller_lift_rate_pods_per_s"] for r in runs if r["controller_lift_rate_pods_per_s"]
    ]
    figures: dict[str, Any] = {
        "repetitions": len(runs),
        "release_latency_p50_ms": round(1000 * statistics.median(latencies), 1),
        "release_latency_p99_ms": round(1000 * pct(latencies, 0.99), 1),
        "spread_p50_ms": round(1000 * statistics.median(r["spread_s"] for r in runs), 1),
        "all_bound_p50_s": round(statistics.median(r["all_bound_s"] for r in runs), 2),
        "bind_rate_pods_per_s": round(statistics.median(r["bind_rate_pods_per_s"] for r in runs), 1),
        "gate_lift_rate_pods_per_s": round(
            statistics.median(size / max(r["spread_s"], 1e-3) for r in runs), 1
        ),
        "controller_lift_rate_pods_per_s": round(statistics.median(at_controller or [0.0]), 1),
    }
    ratios = [
        r["controller_lift_rate_pods_per_s"] / r["raw_rate_around"]
        for r in runs
        if r.get("raw_rate_around") and r["controller_lift_rate_pods_per_s"]
    ]
    if ratios:
        # Each repetition against the raw rate measured around it.
        figures["lift_vs_raw_each"] = [round(x, 3) for x in ratios]
        figures["lift_vs_raw_median"] = round(statistics.median(ratios), 3)
    return figures


async def measure(cluster: LocalCluster, phalanx: Phalanx) -> dict[str, Any]:
    kube = await KubeClient.connect(str(cluster.kubeconfig), CONCURRENCY)
    as_controller = await KubeClient.connect(str(phalanx.controller_kubeconfig()), CONCURRENCY)
    try:
        # Another gate, removed by the cluster admin: no admission policy applies. Its ratio to the
        # controller-identity rate is what that identity (ServiceAccount, RBAC) and the policies cost.
        admin_rate = await raw_patch_rate(kube)
        raw_rates: list[float] = []
        gangs: dict[str, Any] = {}
        for size, reps in SIZES.items():
            runs = []
            for rep in range(reps):
                if size == RAW_RATE_SIZE and not raw_rates:
                    raw_rates.append(await raw_patch_rate(kube, as_controller, constants.GATE))
                run = await one_gang(kube, phalanx, size, rep)
                if size == RAW_RATE_SIZE:
                    # The raw rate right before and right after this gang: the machine's load
                    # drifts, and one raw figure for the whole run made the ratio swing.
                    raw_rates.append(await raw_patch_rate(kube, as_controller, constants.GATE))
                    run["raw_rate_around"] = (raw_rates[-2] + raw_rates[-1]) / 2
                runs.append(run)
            gangs[str(size)] = gang_figures(size, runs)
        preemptions = [await preemption_latency(kube, rep) for rep in range(3)]
        return {
            "raw_patch_rate_pods_per_s": round(statistics.median(raw_rates), 1),
            "raw_patch_rates_pods_per_s": [round(r, 1) for r in raw_rates],
            "raw_patch_rate_admin_other_gate_pods_per_s": round(admin_rate, 1),
            "gangs": gangs,
            "preemption_to_bound_s": {
                "p50": round(statistics.median(preemptions), 2),
                "max": round(max(preemptions), 2),
                "repetitions": len(preemptions),
            },
        }
    finally:
        await kube.close()
        await as_controller.close()


def main() -> int:
    fleet = FleetSpec(gpu_nodes=500, gpus_per_node=8, cpu_nodes=0, nodes_per_rack=20, racks_per_zone=5)
    config = ClusterConfig(
        name="phalanx-bench", workdir=REPO / ".local" / "bench", fleet=fleet, ready_timeout=300
    )
    cluster = LocalCluster(config)
    cluster.up()
    phalanx = Phalanx(cluster)
    try:
        phalanx.up()
        cluster.kubectl("create", "namespace", NAMESPACE)
        cluster.kubectl("label", "namespace", NAMESPACE, "phalanx.io/gang-scheduling=enabled")
        cluster.kubectl("create", "namespace", RAW_NAMESPACE)
        for name, value in (("bench-low", 100), ("bench-high", 100000)):
            cluster.kubectl("create", "priorityclass", name, f"--value={value}")
        for ns in (NAMESPACE, RAW_NAMESPACE):
            while cluster.kubectl("get", "sa", "default", "-n", ns, check=False).returncode:
                time.sleep(0.1)
        figures = asyncio.run(measure(cluster, phalanx))
    finally:
        phalanx.down()
        cluster.down()
    result = {
        "nodes": fleet.gpu_nodes,
        "gpus_per_node": fleet.gpus_per_node,
        "scheduler_qps": config.scheduler_qps,
        "patch_concurrency": CONCURRENCY,
        **figures,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2))
    print(
        f"\nlocal cluster, {fleet.gpu_nodes} nodes × {fleet.gpus_per_node} GPUs; raw patch rate "
        f"{result['raw_patch_rate_pods_per_s']} pods/s (as the controller, concurrency {CONCURRENCY}; "
        f"as the admin, no policy: {result['raw_patch_rate_admin_other_gate_pods_per_s']})"
    )
    print(
        f"{'gang':>5} {'reps':>4} {'release p50 ms':>15} {'p99 ms':>8} {'spread ms':>10} "
        f"{'lift pods/s':>12} {'at ctrl':>8} {'÷ raw':>6} {'all bound s':>12} {'bind pods/s':>12}"
    )
    pre = result["preemption_to_bound_s"]
    print(
        f"preemption (8-pod low gang evicted whole, zero grace): preemptor's last create -> all bound "
        f"p50 {pre['p50']} s, max {pre['max']} s over {pre['repetitions']}"
    )
    for size, g in result["gangs"].items():
        # Against the raw rate measured around each repetition where it was (the largest gang).
        ratio = g.get("lift_vs_raw_median") or (
            g["controller_lift_rate_pods_per_s"] / result["raw_patch_rate_pods_per_s"]
        )
        print(
            f"{size:>5} {g['repetitions']:>4} {g['release_latency_p50_ms']:>15} "
            f"{g['release_latency_p99_ms']:>8} "
            f"{g['spread_p50_ms']:>10} {g['gate_lift_rate_pods_per_s']:>12} "
            f"{g['controller_lift_rate_pods_per_s']:>8} "
            f"{ratio:>6.2f} "
            f"{g['all_bound_p50_s']:>12} "
            f"{g['bind_rate_pods_per_s']:>12}"
        )
    return 0


@pytest.mark.bench
def test_bench_cluster() -> None:
    assert main() == 0


if __name__ == "__main__":
    sys.exit(main())
