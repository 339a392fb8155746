"""Outputs of a comparison: a JSON document, markdown tables, a PNG of queue length and GPU use.

The JSON holds, per policy, the metrics (``metrics.summarize``), the policy's own counters and the
timeline resampled to fixed bins (time averages). ``timing`` (wall-clock seconds, jobs/s) is the
only part that changes from one run to the next; ``document(..., timing=False)`` leaves it out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.simulation.engine import RunResult
from tests.simulation.metrics import BUCKETS


def resample(ts: Sequence[float], vs: Sequence[float], t0: float, t1: float, bins: int) -> list[float]:
    """Time average of the step function (value vs[i] on [ts[i], ts[i+1])) over `bins` equal bins
    of [t0, t1]. Before ts[0] the value is 0; after the last point it stays."""
    if bins <= 0 or t1 <= t0:
        return []
    width = (t1 - t0) / bins
    out = [0.0] * bins
    n = len(ts)
    for i in range(n):
        start = max(ts[i], t0)
        end = min(ts[i + 1] if i + 1 < n else t1, t1)
        if end <= start or not vs[i]:
            continue
        value = vs[i]
        b = int((start - t0) / width)
        while b < bins and start < end:
            edge = min(t0 + (b + 1) * width, end)
            out[b] += value * (edge - start)
            start = edge
            b += 1
    return [round(v / width, 4) for v in out]


def plot_end(results: Sequence[RunResult]) -> float:
    """Plot up to the last time any policy still had a queue (then queues are empty everywhere)."""
    end = 0.0
    for result in results:
        queue = result.timeline.queue
        ts = result.timeline.t
        for i in range(len(ts) - 1, -1, -1):
            if queue[i] > 0:
                end = max(end, ts[i + 1] if i + 1 < len(ts) else ts[i])
                break
    return end or max((r.end for r in results), default=1.0)


def document(
    name: str,
    setup: Mapping[str, Any],
    results: Sequence[RunResult],
    summaries: Mapping[str, Mapping[str, Any]],
    bins: int = 400,
    timing: bool = True,
) -> dict[str, Any]:
    t0 = min((r.first_arrival for r in results), default=0.0)
    t1 = max(plot_end(results), t0 + 1.0)
    step = (t1 - t0) / bins
    doc: dict[str, Any] = {
        "name": name,
        "setup": dict(setup),
        "policies": {},
        "timeline": {"t0_s": t0, "bin_s": step, "bins": bins},
    }
    for result in results:
        entry: dict[str, Any] = {
            "metrics": summaries[result.policy],
            "stats": {k: v for k, v in result.policy_stats.items() if not k.endswith("_seconds")},
        }
        if timing:
            jobs = len(result.runs)
            entry["timing"] = {
                "wall_s": round(result.wall_seconds, 3),
                "jobs_per_s": round(jobs / result.wall_seconds, 1) if result.wall_seconds > 0 else None,
                **{k: v for k, v in result.policy_stats.items() if k.endswith("_seconds")},
            }
        doc["policies"][result.policy] = entry
        tl = result.timeline
        doc["timeline"][result.policy] = {
            "queue_jobs": resample(tl.t, tl.queue, t0, t1, bins),
            "gpus_allocated": resample(tl.t, tl.alloc, t0, t1, bins),
            "gpus_partial": resample(tl.t, tl.partial, t0, t1, bins),
        }
    return doc


def write_json(path: str | Path, doc: Mapping[str, Any]) -> None:
    Path(path).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def _h(seconds: float) -> str:
    return f"{seconds / 3600:.2f}"


def table(summaries: Mapping[str, Mapping[str, Any]]) -> str:
    """Markdown: one row per policy (times in hours), then JCT / delay by gang size.

    GPU alloc % and useful % are over [first arrival, last event] (long jobs stretch it); "alloc % in
    window" is the allocation during the arrival window only."""
    head = (
        "| policy | jobs done | stuck | avg JCT h | p50 JCT h | p99 JCT h | avg wait h | p99 wait h "
        "| makespan h | GPU alloc % | useful % | alloc % in window | partial GPU-h | preempt | lost GPU-h "
        "| timeouts |"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for name, m in summaries.items():
        lines.append(
            f"| {name} | {m['finished']}/{m['jobs']} | {m['deadlocked_gangs']} | {_h(m['jct_s']['avg'])} "
            f"| {_h(m['jct_s']['median'])} | {_h(m['jct_s']['p99'])} | {_h(m['delay_s']['avg'])} "
            f"| {_h(m['delay_s']['p99'])} | {m['makespan_h']:.1f} | {m['gpu_alloc_pct']:.1f} "
            f"| {m['gpu_useful_pct']:.1f} | {m['gpu_alloc_window_pct']:.1f} | {m['partial_gpu_h']:.1f} "
            f"| {m['preemptions']} "
            f"| {m['preemption_lost_gpu_h']:.1f} | {m['timeouts']} |"
        )
    present = [b for b, _, _ in BUCKETS if any(b in m["by_size"] for m in summaries.values())]
    head2 = (
        "| policy | " + " | ".join(f"{b} GPU: avg JCT h / avg wait h / p99 wait h" for b in present) + " |"
    )
    lines += ["", head2, "|" + "---|" * (len(present) + 1)]
    for name, m in summaries.items():
        cells = []
        for b in present:
            g = m["by_size"].get(b)
            if g is None:
                cells.append("-")
                continue
            stuck = g["jobs"] - g["finished"]
            cell = f"{_h(g['jct_s']['avg'])} / {_h(g['delay_s']['avg'])} / {_h(g['delay_s']['p99'])}"
            cells.append(cell + (f" ({stuck} stuck)" if stuck else ""))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    head3 = (
        "| policy | multi-pod gangs | inside one node % | one NVLink domain % | one rack % | one zone % "
        "| GPU-h across racks |"
    )
    lines += ["", head3, "|" + "---|" * (head3.count("|") - 1)]
    for name, m in summaries.items():
        t = m["topology"]
        lines.append(
            f"| {name} | {t['gangs']} | {t['inside_node_pct']:.1f} | {t['inside_nvlink_pct']:.1f} "
            f"| {t['inside_rack_pct']:.1f} | {t['inside_zone_pct']:.1f} | {t['across_racks_gpu_h']:.1f} |"
        )
    return "\n".join(lines)


def plot(path: str | Path, doc: Mapping[str, Any], capacity_gpus: int) -> None:
    """Three panels over time (queue length, GPUs allocated, GPUs held by partial gangs), one line
    per policy, drawn with matplotlib (deterministic output: no timestamps in the file)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timeline = doc["timeline"]
    bins = int(timeline["bins"])
    step = float(timeline["bin_s"])
    t0 = float(timeline["t0_s"])
    xs = [(t0 + step * (i + 0.5)) / 86400 for i in range(bins)]
    names = list(doc["policies"])
    panels = [
        ("Jobs waiting (queue length)", "queue_jobs", None),
        (f"GPUs allocated (of {capacity_gpus})", "gpus_allocated", float(capacity_gpus)),
        ("GPUs held by partial gangs", "gpus_partial", None),
    ]
    figure, axes = plt.subplots(len(panels), 1, figsize=(11, 2.6 * len(panels)), sharex=True)
    for ax, (title, series, y_max) in zip(axes, panels, strict=True):
        for name in names:
            ax.plot(xs, timeline[name][series], label=name, linewidth=1.2)
        ax.set_title(title, fontsize=10, loc="left")
        if y_max is not None:
            ax.set_ylim(0, y_max * 1.05)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("time (days since window start)")
    axes[0].legend(loc="upper right", fontsize=8, ncol=min(len(names), 4))
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=100, metadata={"Software": None})
    plt.close(figure)
