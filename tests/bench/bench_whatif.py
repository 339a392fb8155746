"""Cost of ``kubectl phalanx explain``'s counterfactuals (controller/core/whatif.py).

Run: ``python -m tests.bench.bench_whatif``. The cluster is bench_core's (synthetic, Philly-sized
running gangs packed to ~85 % of the GPUs, tainted GPU nodes, DaemonSet pods) at two sizes, with
pending gangs beside it; the explained gang is 32 pods × 8 GPUs (does not fit: every
counterfactual search runs). Each answer is found by whole planning passes, so the figure is
"passes needed × cost of a pass"; the GPU-count bounds in whatif.py keep the passes few.
Writes ``out/bench/whatif.json``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from dataclasses import replace
from typing import Any

import pytest

from controller.core import PlannerConfig
from controller.core import planner as planner_module
from controller.core.model import GangKey
from controller.core.whatif import explain
from tests.bench.bench_core import ROOT, build_cluster, gpu_pod, pending_gangs, snapshot_of, timed

OUT = ROOT / "out" / "bench" / "whatif.json"
SIZES = ((1000, 6000, 1000), (5000, 30_000, 2000))  # nodes, running GPU pods, pending gangs


def scenario(n_nodes: int, running_pods: int, n_pending: int, runs: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    nodes, pods, running = build_cluster(rng, n_nodes, running_pods)
    pending = pending_gangs(rng, n_pending)
    target = pending[0]
    members = tuple(
        gpu_pod(f"big-{k}", target.key.namespace, f"big-{k}", 8, gated=True, group="big") for k in range(32)
    )
    big = replace(target, key=GangKey(target.key.namespace, "big"), min_member=32, members=members)
    snap = snapshot_of(nodes, pods, [*running, big, *pending[1:]])
    config = PlannerConfig(preemption_min_runtime_seconds=0.0)
    passes = 0
    original = planner_module.PlanningPass.run

    def counted(self: planner_module.PlanningPass) -> Any:
        nonlocal passes
        passes += 1
        return original(self)

    planner_module.PlanningPass.run = counted  # type: ignore[method-assign]
    try:
        times, out = timed(lambda: explain(snap, big.key, config), runs)
    finally:
        planner_module.PlanningPass.run = original  # type: ignore[method-assign]
    found = out.fixes  # type: ignore[attr-defined]
    return {
        "nodes": n_nodes,
        "pods": len(snap.pods),
        "gangs": len(snap.gangs),
        "explain_best_s": min(times),
        "explain_median_s": statistics.median(times),
        "planning_passes": passes // runs,
        "fixes": [type(f).__name__ for f in found],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    results = [scenario(*size, args.runs, args.seed) for size in SIZES]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2))
    for r in results:
        print(
            f"{r['nodes']:>6} nodes {r['pods']:>6} pods {r['gangs']:>6} gangs: explain "
            f"{r['explain_best_s']:.2f}s best / {r['explain_median_s']:.2f}s median, "
            f"{r['planning_passes']} passes, fixes {', '.join(r['fixes']) or '-'}"
        )
    print(f"written to {OUT.relative_to(ROOT)}")
    return 0


@pytest.mark.bench
def test_bench_whatif() -> None:
    assert main(["--runs", "1"]) == 0


if __name__ == "__main__":
    sys.exit(main())
