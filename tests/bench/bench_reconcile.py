"""Cost of one reconcile pass of the controller's shell (store -> views -> plan -> statuses).

Run: ``python -m tests.bench.bench_reconcile``. The real reconciler, store and executor (wired as
the controller wires them) on the in-memory API server of the component tests: 400 nodes × 8 GPUs
holding many admitted, running 4-pod gangs, and a stream of 1-pod gangs arriving one per pass —
the steady state of a busy cluster, where a pass must not cost a rebuild of every gang. Each size
runs twice: with the views and statuses of unchanged gangs reused between passes (the controller's
default) and with every pass building them all again. Writes ``out/bench/reconcile.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from typing import Any

import pytest

from controller.api import resources as r
from controller.core import GangKey
from tests.bench.bench_core import ROOT
from tests.component.controller.harness import NS, Harness, bind, gang, podgroup

OUT = ROOT / "out" / "bench" / "reconcile.json"
SIZES = (200, 600, 1200)  # running gangs of 4 pods
STREAM = 20  # passes measured, one new 1-pod gang each


async def passes(running_gangs: int, reuse: bool) -> list[float]:
    h = Harness()
    h.cluster(nodes=400, gpus=8)
    if not reuse:
        h.reconciler.views = None
    for g in range(running_gangs):
        h.kube.seed(r.PODGROUPS, podgroup(name=f"g{g}", min_member=4))
        h.kube.seed(r.PODS, *gang(4, group=f"g{g}", min_member=4))
    await h.step()
    await h.step()
    for g in range(running_gangs):
        for i in range(4):
            pin = h.pin(f"g{g}-{i}")
            if pin:
                bind(h.kube, f"g{g}-{i}", pin, phase="Running")
    await h.step()
    await h.step()
    times = []
    for k in range(STREAM):
        h.kube.seed(r.PODGROUPS, podgroup(name=f"s{k}", min_member=1))
        h.kube.seed(r.PODS, *gang(1, group=f"s{k}", min_member=1))
        h.sync()
        started = time.perf_counter()
        await h.reconcile(GangKey(NS, f"s{k}"))
        times.append(time.perf_counter() - started)
    return times


def run(sizes: tuple[int, ...] = SIZES) -> dict[str, Any]:
    asyncio.run(passes(10, True))  # warm-up: the first pass of a process pays for imports and caches
    rows = []
    for size in sizes:
        row: dict[str, Any] = {"running_gangs": size, "pods": size * 4}
        for reuse in (True, False):
            times = asyncio.run(passes(size, reuse))
            row["reused_ms" if reuse else "rebuilt_ms"] = {
                "p50": round(statistics.median(times) * 1000, 1),
                "max": round(max(times) * 1000, 1),
            }
        rows.append(row)
    return {"stream_passes": STREAM, "nodes": 400, "sizes": rows}


def report(results: dict[str, Any]) -> str:
    lines = ["running gangs | pods | pass p50 (reused) | pass p50 (rebuilt) | rebuilt ÷ reused"]
    for row in results["sizes"]:
        reused, rebuilt = row["reused_ms"]["p50"], row["rebuilt_ms"]["p50"]
        ratio = rebuilt / reused if reused else float("nan")
        size, pods = row["running_gangs"], row["pods"]
        lines.append(f"{size:>13} | {pods:>4} | {reused:>14} ms | {rebuilt:>15} ms | {ratio:.1f}×")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="*", default=None)
    args = parser.parse_args(argv)
    results = run(tuple(args.sizes) if args.sizes else SIZES)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2) + "\n")
    print(report(results))
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


@pytest.mark.bench
def test_bench_reconcile() -> None:
    assert main(["--sizes", "20"]) == 0


if __name__ == "__main__":
    sys.exit(main())
