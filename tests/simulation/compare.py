"""Run several policies on the same jobs and cluster, and write what they did."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from controller.core.config import PlannerConfig
from tests.simulation.cluster import ClusterSpec
from tests.simulation.engine import Engine, Progress, RunResult
from tests.simulation.metrics import summarize
from tests.simulation.policies import POLICIES
from tests.simulation.report import document, plot, table, write_json
from tests.simulation.trace import Job, Workload, gang_shape, offered_gpu_seconds

DEFAULT_POLICIES = ("phalanx", "greedy-per-pod", "summed-quota", "fifo-no-backfill", "sjf-oracle")


@dataclass
class Comparison:
    name: str
    workload: Workload
    spec: ClusterSpec
    config: PlannerConfig
    period: float
    jobs: list[Job]  # the replayed jobs (those that fit the empty cluster)
    too_big: list[Job]
    results: list[RunResult] = field(default_factory=list)
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)

    def setup(self) -> dict[str, Any]:
        w = self.workload
        gpn = self.spec.gpus_per_node
        offered = offered_gpu_seconds(self.jobs, gpn)
        window = w.window_seconds
        return {
            "source": w.source,
            "window_start": w.window_start,
            "window_days": round(window / 86400, 4),
            "jobs": len(self.jobs),
            "too_big_for_cluster": len(self.too_big),
            "skipped_rows": w.skipped,
            "gang_shape": "k = ceil(gpus / gpus_per_node) pods of ceil(gpus / k) GPUs",
            "offered_gpu_h": round(offered / 3600, 1),
            "offered_load_in_window_pct": round(100 * offered / (self.spec.total_gpus * window), 1)
            if window > 0
            else None,
            "cluster": asdict(self.spec) | {"total_gpus": self.spec.total_gpus},
            "planner": asdict(self.config),
            "period_s": self.period,
        }

    def document(self, timing: bool = True, bins: int = 400) -> dict[str, Any]:
        return document(self.name, self.setup(), self.results, self.summaries, bins=bins, timing=timing)

    def table(self) -> str:
        return table(self.summaries)

    def write(self, out: str | Path, timing: bool = True) -> tuple[Path, Path]:
        """Write ``<out>.json`` and ``<out>.png``; returns both paths."""
        base = Path(out)
        base.parent.mkdir(parents=True, exist_ok=True)
        json_path = base.with_name(base.name + ".json")
        png_path = base.with_name(base.name + ".png")
        doc = self.document(timing=timing)
        write_json(json_path, doc)
        plot(png_path, doc, self.spec.total_gpus)
        return json_path, png_path


def compare(
    workload: Workload,
    spec: ClusterSpec,
    policies: Sequence[str] = DEFAULT_POLICIES,
    config: PlannerConfig | None = None,
    period: float = 1.0,
    name: str = "sim",
    every_tick: bool = False,
    progress: Progress | None = None,
) -> Comparison:
    """Replay `workload` on `spec` under each policy (same jobs, same cluster) and summarise."""
    config = config or PlannerConfig()
    unknown = [p for p in policies if p not in POLICIES]
    if unknown:
        raise ValueError(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    fits: list[Job] = []
    too_big: list[Job] = []
    for job in workload.jobs:
        (fits if spec.fits_empty(gang_shape(job.gpus, spec.gpus_per_node)) else too_big).append(job)
    comparison = Comparison(name, workload, spec, config, period, fits, too_big)
    for policy_name in policies:
        policy = POLICIES[policy_name](config)
        engine = Engine(
            fits,
            spec,
            policy,
            period=period,
            every_tick=every_tick,
            window_seconds=workload.window_seconds,
            progress=progress,
        )
        result = engine.run()
        comparison.results.append(result)
        comparison.summaries[policy_name] = summarize(result)
    return comparison
