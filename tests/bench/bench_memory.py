"""Memory of the controller's cache with 5,000 nodes and 50,000 pods (target: <= 500 MB RSS), and
again with 10,000 nodes and 100,000 pods (target: <= 300 MB RSS), each in a process of its own.

The controller's own Store is filled the way its informers fill it -- from raw API JSON, one object
at a time -- then one snapshot is taken and one planning pass run, so the figure includes what a
pass allocates. Run in a fresh process: ``python -m tests.bench.bench_memory``. Writes
``out/bench/memory.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from controller.api.store import Store
from controller.core.planner import plan
from controller.pipeline import gangs

OUT = Path("out/bench/memory.json")


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def raw_node(i: int) -> dict[str, Any]:
    name = f"node-{i:05d}"
    capacity = {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}
    return {
        "metadata": {
            "name": name,
            "uid": f"n{i}",
            "labels": {
                "kubernetes.io/hostname": name,
                "topology.kubernetes.io/zone": f"zone-{i % 4}",
                "topology.kubernetes.io/rack": f"rack-{i // 20:03d}",
                "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            },
            "creationTimestamp": "2026-11-01T00:00:00Z",
        },
        "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
        "status": {
            "allocatable": capacity,
            "capacity": capacity,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def raw_pod(i: int, node: str, group: str | None, gpus: int) -> dict[str, Any]:
    labels = {"app": "trainer", "batch.kubernetes.io/job-name": group or f"solo-{i}"}
    if group:
        labels["phalanx.io/pod-group"] = group
    return {
        "metadata": {
            "name": f"pod-{i:06d}",
            "namespace": f"team-{i % 50}",
            "uid": f"p{i}",
            "labels": labels,
            "annotations": {
                "phalanx.io/inferred-min-member": "8",
                "kubectl.kubernetes.io/restartedAt": "x" * 40,
            },
            "creationTimestamp": "2026-11-21T00:00:00Z",
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": group or f"solo-{i}",
                    "uid": f"j{i // 8}",
                    "controller": True,
                }
            ],
        },
        "spec": {
            "nodeName": node,
            "priority": 0,
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "resources": {
                        "limits": {"nvidia.com/gpu": str(gpus)},
                        "requests": {"cpu": "4", "memory": "32Gi"},
                    },
                    "env": [{"name": f"VAR_{k}", "value": "value"} for k in range(10)],
                }
            ],
        },
        "status": {"phase": "Running", "startTime": "2026-11-21T00:00:10Z"},
    }


def run(nodes: int = 5000, pods: int = 50_000, target_mb: int = 500) -> dict[str, Any]:
    rng = random.Random(1)
    gc.collect()
    before = rss_mb()
    store = Store()
    started = time.perf_counter()
    store.replace_nodes([raw_node(i) for i in range(nodes)])
    for i in range(pods):  # one at a time, as watch events arrive; raw dicts are dropped after parsing
        node = f"node-{rng.randrange(nodes):05d}"
        store.upsert_pod(raw_pod(i, node, f"gang-{i // 8}" if i % 5 else None, 1))
    fill_seconds = time.perf_counter() - started
    gc.collect()
    cached = rss_mb()
    snapshot, _ = gangs.snapshot(store, now=time.time())
    plan(snapshot)
    result = {
        "nodes": nodes,
        "pods": pods,
        "rss_before_mb": round(before, 1),
        "rss_cached_mb": round(cached, 1),
        "rss_after_pass_mb": round(rss_mb(), 1),
        "peak_rss_mb": round(peak_mb(), 1),
        "cache_mb": round(cached - before, 1),
        "fill_seconds": round(fill_seconds, 2),
        "target_mb": target_mb,
    }
    return result


# (nodes, pods, RSS target in MB): the reference size and the scaled-up one.
SIZES = ((5000, 50_000, 500), (10_000, 100_000, 300))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the controller cache's memory")
    parser.add_argument("--nodes", type=int, help="one size only, printed as JSON (used per size)")
    parser.add_argument("--pods", type=int)
    parser.add_argument("--target-mb", type=int, default=500)
    args = parser.parse_args(argv)
    if args.nodes:
        print(json.dumps(run(args.nodes, args.pods or 10 * args.nodes, args.target_mb)))
        return 0
    results = []
    for nodes, pods, target in SIZES:  # a fresh process per size: the peak is the process's own
        argv = ["--nodes", str(nodes), "--pods", str(pods), "--target-mb", str(target)]
        answer = subprocess.run(
            [sys.executable, "-m", "tests.bench.bench_memory", *argv],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        result = json.loads(answer.stdout.strip().splitlines()[-1])
        results.append(result)
        print(
            f"memory: {result['nodes']} nodes + {result['pods']} pods cached "
            f"-> RSS {result['rss_cached_mb']} MB "
            f"(cache {result['cache_mb']} MB), after a planning pass {result['rss_after_pass_mb']} MB, "
            f"peak {result['peak_rss_mb']} MB (target <= {result['target_mb']} MB); "
            f"filled in {result['fill_seconds']} s"
        )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"sizes": results}, indent=2))
    return 0


@pytest.mark.bench
def test_bench_memory() -> None:
    assert main([]) == 0


if __name__ == "__main__":
    sys.exit(main())
