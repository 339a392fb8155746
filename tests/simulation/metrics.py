"""What operators compare, computed from one policy's ``RunResult``, and the bounds that must hold.

- JCT (job completion time) = finish - submit; queueing delay = (last) start - submit, so for a job
  that was never evicted JCT = delay + duration; an evicted job's delay includes the lost run.
- by gang size in GPUs: ``1``, ``2-8``, ``9-15``, ``>=16`` (a bucket is left out when empty).
- makespan: last completion - first arrival.
- GPU allocation %: allocated GPUs (every started pod, partial gangs and runs lost to preemption
  included) integrated over [first arrival, last event] / (GPUs × that span); the last event is
  the last completion, or later when jobs arrive into a deadlock. Useful % counts only the
  runs that completed. ``alloc = useful + partial + lost`` exactly (checked).
- GPU-hours held by partial gangs (some pods started, not all): idle GPUs.
- deadlocks: gangs that never finished (stuck forever); GPUs they hold at the end.
- preemptions (gang evictions) and the GPU-hours of the runs they threw away; schedule timeouts.
- topology, over finished gangs of several pods: the share that ran inside one node, one NVLink
  domain, one rack, one zone (each level counts the narrower ones), and the GPU-hours of those that
  ran across racks.

Bounds (``check_bounds``, also asserted by the tests): JCT >= duration for every finished job;
allocation <= 100 %; useful utilisation <= min(1, offered load / capacity) over the same span, where
the offered load is every job's GPUs × duration (finished or not).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from tests.simulation.engine import Run, RunResult

EPS = 1e-6
BUCKETS: tuple[tuple[str, int, int], ...] = (
    ("1", 1, 1),
    ("2-8", 2, 8),
    ("9-15", 9, 15),
    (">=16", 16, 1 << 30),
)


def bucket_of(gpus: int) -> str:
    for name, low, high in BUCKETS:
        if low <= gpus <= high:
            return name
    raise ValueError(gpus)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100]) of a non-empty sequence."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(min(rank, len(ordered))) - 1]


def _stats(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"avg": 0.0, "median": 0.0, "p99": 0.0}
    return {
        "avg": statistics.fmean(values),
        "median": float(statistics.median(values)),
        "p99": percentile(values, 99),
    }


def _group(runs: Iterable[Run]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    by: dict[str, list[Run]] = {}
    for run in runs:
        by.setdefault(bucket_of(run.job.gpus), []).append(run)
    for name, _, _ in BUCKETS:
        group = by.get(name)
        if not group:
            continue
        done = [r for r in group if r.finish is not None]
        out[name] = {
            "jobs": len(group),
            "finished": len(done),
            "jct_s": _stats([r.finish - r.job.submit for r in done if r.finish is not None]),
            "delay_s": _stats([r.started - r.job.submit for r in done if r.started is not None]),
        }
    return out


def summarize(result: RunResult) -> dict[str, Any]:
    runs = result.runs
    done = [r for r in runs if r.finish is not None]
    stuck = [r for r in runs if r.finish is None]
    gpus = result.spec.total_gpus
    first = result.first_arrival
    last_finish = max((r.finish for r in done if r.finish is not None), default=first)
    makespan = max(last_finish - first, 0.0)
    # Allocation is integrated up to the last event, which can come after the last completion
    # (arrivals that join a deadlock): rates are taken over that span.
    span = max(result.end - first, makespan)
    useful = sum(r.shape.gpus * r.job.duration for r in done)
    offered = sum(r.shape.gpus * r.job.duration for r in runs)
    capacity = gpus * span
    held_forever = sum(r.shape.per_pod * len(r.nodes) for r in stuck)
    all_jct = [r.finish - r.job.submit for r in done if r.finish is not None]
    all_delay = [r.started - r.job.submit for r in done if r.started is not None]
    metrics: dict[str, Any] = {
        "jobs": len(runs),
        "finished": len(done),
        "jct_s": _stats(all_jct),
        "delay_s": _stats(all_delay),
        "by_size": _group(runs),
        "makespan_h": makespan / 3600,
        "gpu_alloc_pct": 100 * result.alloc_gpu_seconds / capacity if capacity else 0.0,
        "gpu_useful_pct": 100 * useful / capacity if capacity else 0.0,
        "offered_load_pct": 100 * offered / capacity if capacity else 0.0,
        "gpu_alloc_window_pct": (
            100 * result.window_alloc_gpu_seconds / (gpus * result.window_seconds)
            if result.window_seconds > 0
            else 0.0
        ),
        "partial_gpu_h": result.partial_gpu_seconds / 3600,
        "deadlocked_gangs": len(stuck),
        "deadlocked_gpus_held": held_forever,
        "preemptions": result.preemptions,
        "preempted_jobs": sum(1 for r in runs if r.restarts),
        "preemption_lost_gpu_h": result.lost_gpu_seconds / 3600,
        "timeouts": sum(1 for r in runs if r.timed_out),
        "stranded_admissions": sum(1 for r in runs if r.stranded),
        "avg_queue_jobs": result.queue_job_seconds / span if span else 0.0,
        "max_queue_jobs": max(result.timeline.queue, default=0),
        "cycles": result.cycles,
    }
    metrics["topology"] = _topology(done)
    metrics["bounds"] = check_bounds(result, metrics)
    return metrics


TOPOLOGY_LEVELS = ("node", "nvlink", "rack", "zone", "cluster")


def _topology(done: Sequence[Run]) -> dict[str, Any]:
    multi = [r for r in done if r.shape.pods > 1]
    out: dict[str, Any] = {"gangs": len(multi)}
    for k, level in enumerate(TOPOLOGY_LEVELS[:-1]):
        inside = sum(1 for r in multi if r.inside in TOPOLOGY_LEVELS[: k + 1])
        out[f"inside_{level}_pct"] = 100 * inside / len(multi) if multi else 0.0
    across = [r for r in multi if r.inside in ("zone", "cluster")]
    out["across_racks_gpu_h"] = sum(r.shape.gpus * r.job.duration for r in across) / 3600
    return out


def check_bounds(result: RunResult, metrics: dict[str, Any]) -> list[str]:
    """Violated bounds, as sentences (empty: all hold)."""
    problems = []
    for run in result.runs:
        if run.finish is not None and run.finish - run.job.submit < run.job.duration - EPS:
            problems.append(
                f"job {run.job.id}: JCT {run.finish - run.job.submit} < duration {run.job.duration}"
            )
            break
    if metrics["gpu_alloc_pct"] > 100 + EPS:
        problems.append(f"GPU allocation {metrics['gpu_alloc_pct']:.3f}% > 100%")
    if metrics["gpu_useful_pct"] > min(100.0, metrics["offered_load_pct"]) + EPS:
        problems.append(
            f"useful utilisation {metrics['gpu_useful_pct']:.3f}% > min(100%, offered "
            f"{metrics['offered_load_pct']:.3f}%)"
        )
    useful_gpu_s = sum(r.shape.gpus * r.job.duration for r in result.runs if r.finish is not None)
    parts = useful_gpu_s + result.partial_gpu_seconds + result.lost_gpu_seconds
    if abs(result.alloc_gpu_seconds - parts) > 1e-6 * max(1.0, result.alloc_gpu_seconds):
        problems.append(
            f"allocated {result.alloc_gpu_seconds:.1f} GPU-s != useful + partial + lost {parts:.1f} GPU-s"
        )
    return problems
