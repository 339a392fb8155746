"""Trace replay: every policy on one day of the Philly trace, 16 nodes × 8 GPUs.

Run: ``python -m tests.bench.bench_trace`` (or ``pytest -m bench tests/bench/bench_trace.py``).

Replays the jobs submitted on 2017-10-03 (UTC) with ``tests.simulation`` -- the real core for
``phalanx`` -- and writes ``out/bench/trace.json`` (the simulation's JSON plus wall time and
simulated jobs/s per policy) and ``out/bench/trace.png``, then prints the table. The trace is the
repository's (``tests/data/philly.csv.gz``; ``PHALANX_TRACE`` names another); without one it
replays a seeded synthetic mix instead.

Then the README's Philly week (2017-10-03 to 10-10, 64 nodes × 8 GPUs) for ``phalanx`` alone: its
replay speed (target: 1,000 simulated jobs/s) and the figures of the README's table, in
``bench.week`` of the same JSON (``--no-week`` skips it). Under a minute in all.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from controller.core.config import PlannerConfig
from tests.simulation import ClusterSpec, compare, load_trace, synthetic
from tests.simulation.compare import DEFAULT_POLICIES
from tests.simulation.trace import Workload, default_trace

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "out" / "bench" / "trace"
TRACE = default_trace()


def workload(start: str, days: float, spec: ClusterSpec) -> Workload:
    if TRACE.exists():
        return load_trace(TRACE, start, days)
    return synthetic(400, 1, spec.total_gpus, load=1.0, mix="philly")


WEEK = ("2017-10-03", 7.0, 64)  # start, days, nodes: the README's Philly week
WEEK_TARGET_JOBS_PER_S = 1000.0


def week() -> dict[str, Any]:
    """The README's Philly week, phalanx only: how fast the real core replays it, and its table row."""
    start, days, nodes = WEEK
    spec = ClusterSpec(nodes=nodes, gpus_per_node=8)
    config = PlannerConfig(preemption_min_runtime_seconds=300.0)
    comparison = compare(workload(start, days, spec), spec, ("phalanx",), config, name="bench-trace-week")
    result = comparison.results[0]
    m = comparison.summaries["phalanx"]
    hours = {
        f"{name}_{stat}_h": round(m[key][stat] / 3600, 2)
        for name, key in (("jct", "jct_s"), ("wait", "delay_s"))
        for stat in ("avg", "median", "p99")
    }
    return {
        "window": {"start": start, "days": days, "nodes": nodes},
        "jobs": len(result.runs),
        "wall_s": round(result.wall_seconds, 3),
        "jobs_per_s": round(len(result.runs) / result.wall_seconds, 1),
        "target_jobs_per_s": WEEK_TARGET_JOBS_PER_S,
        "plan_calls": result.policy_stats["plan_calls"],
        "plan_s": result.policy_stats["plan_seconds"],
        **hours,
        "gpu_alloc_window_pct": round(m["gpu_alloc_window_pct"], 1),
        "partial_gpu_h": round(m["partial_gpu_h"], 1),
    }


def run(
    start: str = "2017-10-03", days: float = 1.0, nodes: int = 16, with_week: bool = True
) -> dict[str, Any]:
    spec = ClusterSpec(nodes=nodes, gpus_per_node=8)
    w = workload(start, days, spec)
    started = time.perf_counter()
    # The published replay's preemption minimum runtime (the controller's own default is 0).
    config = PlannerConfig(preemption_min_runtime_seconds=300.0)
    comparison = compare(w, spec, DEFAULT_POLICIES, config, name="bench-trace")
    wall = time.perf_counter() - started
    json_path, png_path = comparison.write(OUT)
    doc: dict[str, Any] = json.loads(json_path.read_text())
    doc["bench"] = {
        "wall_s": round(wall, 3),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "png": str(png_path.relative_to(ROOT)),
    }
    if with_week:
        doc["bench"]["week"] = week()
    json_path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    doc["_table"] = comparison.table()
    return doc


def week_report(week: dict[str, Any]) -> list[str]:
    window = week["window"]
    return [
        f"Philly week ({window['start']}, {window['days']:g} d, {window['nodes']} nodes), phalanx: "
        f"{week['jobs']} jobs in {week['wall_s']:.1f} s = {week['jobs_per_s']:.0f} jobs/s "
        f"(target {week['target_jobs_per_s']:.0f}), {week['plan_calls']} plan() calls",
        f"  avg / p50 / p99 JCT h {week['jct_avg_h']} / {week['jct_median_h']} / {week['jct_p99_h']}, "
        f"avg / p99 wait h {week['wait_avg_h']} / {week['wait_p99_h']}, "
        f"GPU alloc % in window {week['gpu_alloc_window_pct']}, partial GPU-h {week['partial_gpu_h']}",
    ]


def report(doc: dict[str, Any]) -> str:
    setup = doc["setup"]
    lines = [
        f"trace replay: {setup['jobs']} jobs ({setup['source']}, from {setup['window_start'] or '-'}, "
        f"{setup['window_days']} d) on {setup['cluster']['nodes']} nodes × "
        f"{setup['cluster']['gpus_per_node']} GPUs, offered load {setup['offered_load_in_window_pct']}%",
        doc["_table"],
        "",
        f"{'policy':<18} {'wall s':>8} {'jobs/s':>9} {'cycles':>8}",
    ]
    for name, entry in doc["policies"].items():
        timing = entry["timing"]
        lines.append(
            f"{name:<18} {timing['wall_s']:>8.2f} {timing['jobs_per_s'] or 0:>9.0f} "
            f"{entry['metrics']['cycles']:>8}"
        )
    if doc["bench"].get("week"):
        lines += ["", *week_report(doc["bench"]["week"])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--start", default="2017-10-03")
    parser.add_argument("--days", type=float, default=1.0)
    parser.add_argument("--nodes", type=int, default=16)
    parser.add_argument("--no-week", action="store_true", help="skip the Philly-week replay speed")
    args = parser.parse_args(argv)
    doc = run(args.start, args.days, args.nodes, with_week=not args.no_week)
    print(report(doc))
    print(f"written to {OUT.relative_to(ROOT)}.json and .png")
    problems = {n: e["metrics"]["bounds"] for n, e in doc["policies"].items() if e["metrics"]["bounds"]}
    if problems:
        print(f"bounds violated: {problems}")
        return 1
    return 0


@pytest.mark.bench
def test_bench_trace() -> None:
    assert main([]) == 0


if __name__ == "__main__":
    sys.exit(main())
