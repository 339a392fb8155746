"""Trace replay with teams: queues, fair share and reclaim against today's Phalanx and quota baselines.

``python -m tests.simulation.teams --trace tests/data/philly.csv.gz --start 2017-10-03
--days 7 --out out/sim/teams-week``

The trace's ``cluster`` column is the team. Each team gets a GPU quota proportional to its offered
load in the window (GPU-seconds), the quotas summing to the cluster. Policies:

- ``phalanx``: today's Phalanx, no queues (priority, then age, cluster-wide);
- ``phalanx-queues``: the real core with one flat queue per team (quota, no limit, weight 1):
  fairness order, borrowing, reclaim of whole gangs of teams above their fair share;
- ``kueue-cohort``: Kueue-style: one ClusterQueue per team in one cohort; a job is admitted when
  its team's usage stays within its nominal quota, or by borrowing while the cohort's unused quota
  (the cluster-wide free sum) covers it; a team within its quota reclaims from borrowing teams
  (youngest first) until the sum suffices. Sums only: the pods are then placed one by one (best fit)
  and may not fit (stranded, holding partial room), as ``summed-quota`` does;
- ``strict-quota``: the same without borrowing (and so without reclaim): a team never exceeds its
  quota.

Every policy is sampled every ``--sample`` virtual seconds: per team the GPUs its placed pods hold
and its fair share (hierarchical water-filling of the core, ``controller.core.queues``, over what
each team asks for: its running and waiting jobs). Reported: Jain's fairness index of
usage/fair share over the teams that ask for something (time average), the mean distance between
a team's usage and its fair share (as % of the cluster), waits per team, and the usual job figures.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from controller.core.config import PlannerConfig
from controller.core.model import Admit, Preempt, Queue, QueueResource, Snapshot
from controller.core.queues import QueueTree, fair_shares
from shared.constants import GPU_RESOURCE
from tests.simulation.cluster import ClusterSpec
from tests.simulation.engine import Engine, Policy, Run
from tests.simulation.metrics import percentile, summarize
from tests.simulation.policies import PhalanxPolicy, SummedQuota, _PodQueue, _Queue
from tests.simulation.trace import Job, gang_shape, load_trace

GPU = GPU_RESOURCE


def team_quotas(jobs: Sequence[Job], spec: ClusterSpec) -> dict[str, int]:
    """GPU quota per team, proportional to its offered GPU-seconds, summing to the cluster."""
    load: dict[str, float] = {}
    for job in jobs:
        load[job.team] = (
            load.get(job.team, 0.0) + gang_shape(job.gpus, spec.gpus_per_node).gpus * job.duration
        )
    total = sum(load.values()) or 1.0
    quotas = {team: int(spec.total_gpus * amount / total) for team, amount in load.items()}
    left = spec.total_gpus - sum(quotas.values())
    for team in sorted(load, key=lambda t: -load[t])[:left]:
        quotas[team] += 1
    return dict(sorted(quotas.items()))


def queues_of(quotas: dict[str, int]) -> dict[str, Queue]:
    return {team: Queue(team, None, {GPU: QueueResource(quota)}) for team, quota in quotas.items()}


# ---- policies ------------------------------------------------------------------------------------


class QueuedPhalanx(PhalanxPolicy):
    """The real core with one queue per team."""

    def __init__(self, config: PlannerConfig, quotas: dict[str, int]) -> None:
        super().__init__(config, name="phalanx-queues", all_gangs=True)  # running gangs: reclaim victims
        self.queues = queues_of(quotas)
        self.reclaims = 0

    def _pending(self, run: Run, now: float) -> None:
        super()._pending(run, now)
        self.pending[run.index] = replace(self.pending[run.index], queue=run.job.team)

    def snapshot(self, now: float) -> Snapshot:
        return replace(super().snapshot(now), queues=self.queues)

    def _admit(self, run: Run, decision: Admit, now: float) -> None:
        super()._admit(run, decision, now)
        engine = self.engine
        assert engine is not None
        epoch = run.epoch
        # Reclaim may take it once it has run its minimum: the pass then can decide differently.
        engine.wake_at(
            now + self.config.preemption_min_runtime_seconds,
            lambda: run.running and run.epoch == epoch and bool(self.pending),
        )

    def _preempt(self, run: Run, decision: Preempt, now: float) -> None:
        if decision.reclaimed_from:
            self.reclaims += 1
        super()._preempt(run, decision, now)

    def stats(self) -> dict[str, float | int]:
        return {**super().stats(), "reclaims": self.reclaims}


class TeamQuota:
    """Kueue-style per-team quotas on GPU sums (see the module doc); pods placed one by one."""

    def __init__(self, quotas: dict[str, int], borrowing: bool, min_runtime: float) -> None:
        self.name = "kueue-cohort" if borrowing else "strict-quota"
        self.quotas = quotas
        self.borrowing = borrowing
        self.min_runtime = min_runtime
        self.engine: Engine | None = None
        self.waiting = _Queue(lambda r: r.order)
        self.pods = _PodQueue()
        self.used: dict[str, int] = dict.fromkeys(quotas, 0)
        self.admitted: dict[int, Run] = {}
        self.admitted_at: dict[int, float] = {}
        self.reclaims = 0

    def attach(self, engine: Engine) -> None:
        self.engine = engine

    def on_arrival(self, run: Run, now: float) -> None:
        self.waiting.add(run)

    def on_complete(self, run: Run, now: float) -> None:
        self._release(run)

    def _release(self, run: Run) -> None:
        self.used[run.job.team] -= run.shape.gpus
        del self.admitted[run.index]
        self.admitted_at.pop(run.index, None)

    def _reclaim(self, run: Run, need: int, now: float) -> bool:
        """Evict borrowing teams' youngest jobs until ``need`` GPUs of the sum are free."""
        engine = self.engine
        assert engine is not None
        victims: list[Run] = []
        freed = 0
        over = {t: self.used[t] - self.quotas.get(t, 0) for t in self.used}
        for other in sorted(self.admitted.values(), key=lambda r: -self.admitted_at[r.index]):
            team = other.job.team
            if team == run.job.team or over[team] < other.shape.gpus or not other.running:
                continue
            if now - self.admitted_at[other.index] < self.min_runtime:
                continue
            victims.append(other)
            over[team] -= other.shape.gpus
            freed += other.shape.gpus
            if freed >= need:
                break
        if freed < need:
            return False
        for victim in victims:
            self._release(victim)
            engine.evict(victim)
            self.reclaims += 1
            self.waiting.add(victim)
        return True

    def cycle(self, now: float) -> None:
        engine = self.engine
        assert engine is not None
        free = engine.spec.total_gpus - sum(self.used.values())
        # Smallest demands refused in this pass (a bigger one fails the same way): per team within
        # its quota, and for borrowing.
        refused: dict[str, int] = {}
        refused_borrowing = 1 << 30
        admitted: list[Run] = []
        for run in self.waiting.runs:
            team = run.job.team
            demand = run.shape.gpus
            if run.index in self.admitted or demand >= refused.get(team, 1 << 30):
                continue
            within = self.used[team] + demand <= self.quotas.get(team, 0)
            if not within and (not self.borrowing or demand >= refused_borrowing):
                continue
            if demand > free:
                if within and self.borrowing and self._reclaim(run, demand - free, now):
                    free = engine.spec.total_gpus - sum(self.used.values())
                elif within:
                    refused[team] = demand
                    continue
                else:
                    refused_borrowing = demand
                    continue
            self.used[team] += demand
            free -= demand
            self.admitted[run.index] = run
            self.admitted_at[run.index] = now
            admitted.append(run)
            self.pods.add(run, now)
            if self.borrowing:
                engine.wake_at(now + self.min_runtime, lambda: bool(self.waiting.runs))
        if admitted:
            self.waiting.keep(lambda r: r.index not in self.admitted)
        if self.pods:
            self.pods.place(engine)
        for run in admitted:
            if len(run.nodes) < run.shape.pods:
                run.stranded = True

    def stats(self) -> dict[str, float | int]:
        return {"admitted": len(self.admitted), "reclaims": self.reclaims}


# ---- sampling ------------------------------------------------------------------------------------


@dataclass
class Samples:
    t: list[float] = field(default_factory=list)
    usage: list[dict[str, int]] = field(default_factory=list)
    fair: list[dict[str, float]] = field(default_factory=list)


class Sampled:
    """A policy, and every ``period`` virtual seconds each team's GPUs in use and fair share."""

    def __init__(self, inner: Policy, quotas: dict[str, int], period: float) -> None:
        self.inner = inner
        self.name = inner.name
        self.period = period
        self.tree = QueueTree(queues_of(quotas))
        self.active: dict[int, Run] = {}
        self.samples = Samples()
        self.next_sample = 0.0
        self.engine: Engine | None = None

    def attach(self, engine: Engine) -> None:
        self.engine = engine
        self.inner.attach(engine)

    def on_arrival(self, run: Run, now: float) -> None:
        self.active[run.index] = run
        self.inner.on_arrival(run, now)

    def on_complete(self, run: Run, now: float) -> None:
        self.active.pop(run.index, None)
        self.inner.on_complete(run, now)

    def cycle(self, now: float) -> None:
        # Nothing was placed or evicted since the last cycle: the samples due meanwhile all see
        # the state as it is now (arrivals and completions of this tick aside).
        while now > self.next_sample:
            self.sample(self.next_sample)
            self.next_sample += self.period
        self.inner.cycle(now)

    def sample(self, t: float) -> None:
        engine = self.engine
        assert engine is not None
        usage: dict[str, int] = {}
        asked: dict[str, dict[str, int]] = {}
        for run in self.active.values():
            team = run.job.team
            usage[team] = usage.get(team, 0) + len(run.nodes) * run.shape.per_pod
            want = asked.setdefault(team, {})
            want[GPU] = want.get(GPU, 0) + run.shape.gpus
        fair = fair_shares(self.tree, asked, {GPU: engine.spec.total_gpus}, [GPU])
        self.samples.t.append(t)
        self.samples.usage.append(usage)
        self.samples.fair.append({team: shares[GPU] for team, shares in fair.items() if team in asked})

    def stats(self) -> dict[str, float | int]:
        return self.inner.stats()


def jain(values: Sequence[float]) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one has everything."""
    square = sum(v * v for v in values)
    return (sum(values) ** 2) / (len(values) * square) if square > 0 else 1.0


def fairness(samples: Samples, total_gpus: int) -> dict[str, float]:
    indexes, distance = [], []
    for usage, fair in zip(samples.usage, samples.fair, strict=True):
        ratios = [min(usage.get(team, 0) / share, 2.0) for team, share in fair.items() if share >= 1]
        if len(ratios) >= 2:
            indexes.append(jain(ratios))
        if fair:
            distance.append(sum(abs(usage.get(team, 0) - share) for team, share in fair.items()) / total_gpus)
    return {
        "jain_avg": round(sum(indexes) / len(indexes), 4) if indexes else 1.0,
        "jain_p10": round(percentile(indexes, 10), 4) if indexes else 1.0,
        "fair_share_distance_pct": round(100 * sum(distance) / len(distance), 2) if distance else 0.0,
    }


def waits_by_team(runs: Sequence[Run]) -> dict[str, dict[str, float]]:
    out: dict[str, list[float]] = {}
    for run in runs:
        if run.first_start is not None:
            out.setdefault(run.job.team, []).append((run.first_start - run.job.submit) / 3600)
    return {
        team: {
            "jobs": len(w),
            "avg_wait_h": round(sum(w) / len(w), 2),
            "p95_wait_h": round(percentile(w, 95), 2),
        }
        for team, w in sorted(out.items())
    }


POLICIES: dict[str, Callable[[PlannerConfig, dict[str, int]], Policy]] = {
    "phalanx": lambda config, quotas: PhalanxPolicy(config),
    "phalanx-queues": QueuedPhalanx,
    "kueue-cohort": lambda config, quotas: TeamQuota(quotas, True, config.preemption_min_runtime_seconds),
    "strict-quota": lambda config, quotas: TeamQuota(quotas, False, config.preemption_min_runtime_seconds),
}
_ = SummedQuota  # the same placement as summed-quota (policies.py): sums admit, pods placed one by one


def replay(
    jobs: Sequence[Job],
    spec: ClusterSpec,
    policies: Sequence[str],
    config: PlannerConfig,
    sample_period: float,
    window: float,
) -> dict[str, Any]:
    fits = [j for j in jobs if spec.fits_empty(gang_shape(j.gpus, spec.gpus_per_node))]
    quotas = team_quotas(fits, spec)
    doc: dict[str, Any] = {"quotas": quotas, "jobs": len(fits), "policies": {}}
    for name in policies:
        sampled = Sampled(POLICIES[name](config, quotas), quotas, sample_period)
        result = Engine(fits, spec, sampled, window_seconds=window).run()
        print(f"  {name}: {len(fits)} jobs in {result.wall_seconds:.1f}s", file=sys.stderr, flush=True)
        summary = summarize(result)
        hours = {k: round(v / 3600, 2) for k, v in summary["jct_s"].items()}
        waits = {k: round(v / 3600, 2) for k, v in summary["delay_s"].items()}
        doc["policies"][name] = {
            "fairness": fairness(sampled.samples, spec.total_gpus),
            "summary": {
                "jct_h": hours,
                "wait_h": waits,
                "gpu_alloc_pct_in_window": round(summary["gpu_alloc_window_pct"], 1),
                "preemptions": summary["preemptions"],
                "partial_gpu_h": round(summary["partial_gpu_h"], 1),
                "stranded_admissions": summary["stranded_admissions"],
            },
            "stats": sampled.stats(),
            "waits_by_team": waits_by_team(result.runs),
            "stuck": summary["deadlocked_gangs"],
            "wall_seconds": round(result.wall_seconds, 1),
            "samples": {"t": sampled.samples.t, "usage": sampled.samples.usage, "fair": sampled.samples.fair},
        }
    return doc


def plot_teams(path: Path, doc: dict[str, Any], teams: Sequence[str]) -> None:
    """Per policy, each of ``teams``' GPUs in use (solid) and its fair share (dashed) over time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # Up to the last sample in which any policy still had a team using GPUs.
    end = 0.0
    for data in doc["policies"].values():
        samples = data["samples"]
        busy = [t for t, usage in zip(samples["t"], samples["usage"], strict=True) if any(usage.values())]
        end = max(end, busy[-1] if busy else 0.0)
    names = list(doc["policies"])
    figure, axes = plt.subplots(len(names), 1, figsize=(11, 2.4 * len(names)), sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], names, strict=True):
        samples = doc["policies"][name]["samples"]
        keep = [i for i, t in enumerate(samples["t"]) if t <= end]
        xs = [samples["t"][i] / 86400 for i in keep]
        for k, team in enumerate(teams):
            color = f"C{k}"
            ax.plot(xs, [samples["usage"][i].get(team, 0) for i in keep], color=color, label=f"{team} used")
            fair = [samples["fair"][i].get(team, 0.0) for i in keep]
            ax.plot(xs, fair, color=color, linestyle="--", linewidth=0.9, label=f"{team} fair share")
        ax.set_title(f"{name}: GPUs used and fair share per team", fontsize=10, loc="left")
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("time (days since window start)")
    axes[0, 0].legend(loc="upper right", fontsize=7, ncol=len(teams))
    figure.tight_layout()
    figure.savefig(path, format="png", dpi=100, metadata={"Software": None})
    plt.close(figure)


def table(doc: dict[str, Any]) -> str:
    lines = [
        "| policy | Jain avg | Jain p10 | dist. from fair share % | avg wait h | p99 wait h | avg JCT h | "
        "GPU alloc % | evictions |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, data in doc["policies"].items():
        f, s = data["fairness"], data["summary"]
        wait, jct = s.get("wait_h", {}), s.get("jct_h", {})
        lines.append(
            f"| {name} | {f['jain_avg']} | {f['jain_p10']} | {f['fair_share_distance_pct']} | "
            f"{wait.get('avg', '')} | {wait.get('p99', '')} | {jct.get('avg', '')} | "
            f"{s.get('gpu_alloc_pct_in_window', '')} | {s.get('preemptions', 0)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--trace", required=True)
    p.add_argument("--start")
    p.add_argument("--days", type=float)
    p.add_argument("--limit", type=int)
    p.add_argument("--nodes", type=int, default=64)
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--policies", default=",".join(POLICIES))
    p.add_argument("--sample", type=float, default=600.0, help="virtual seconds between samples")
    p.add_argument("--min-runtime", type=float, default=300.0, help="before reclaim/preemption, s")
    p.add_argument("--out", default="out/sim/teams")
    args = p.parse_args(argv)
    workload = load_trace(args.trace, args.start, args.days, args.limit)
    spec = ClusterSpec(args.nodes, args.gpus_per_node, 8, 4)
    config = PlannerConfig(preemption_min_runtime_seconds=args.min_runtime)
    policies = [x.strip() for x in args.policies.split(",") if x.strip()]
    doc = replay(workload.jobs, spec, policies, config, args.sample, workload.window_seconds)
    doc["source"] = workload.source
    doc["window_start"] = workload.window_start
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(doc))
    busiest = sorted(doc["quotas"], key=lambda t: -doc["quotas"][t])[:3]
    plot_teams(out.with_suffix(".png"), doc, busiest)
    print(f"{doc['jobs']} jobs, quotas {doc['quotas']}")
    print(table(doc))
    for name, data in doc["policies"].items():
        waits = ", ".join(
            f"{t} {w['avg_wait_h']}/{w['p95_wait_h']}"
            for t, w in data["waits_by_team"].items()
            if t in busiest
        )
        print(f"{name}: waits avg/p95 h by team: {waits}; stuck {data['stuck']}; {data['wall_seconds']}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
