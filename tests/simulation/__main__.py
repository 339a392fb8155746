"""``python -m tests.simulation``: replay a trace window (or a synthetic mix) under each policy.

Examples::

    python -m tests.simulation --trace tests/data/philly.csv.gz \\
        --start 2017-10-16 --days 7 --nodes 64 --gpus-per-node 8 --out out/sim/philly-week
    python -m tests.simulation --synthetic 2000 --seed 1 --nodes 16 --out out/sim/synthetic

Writes ``<out>.json`` and ``<out>.png``, prints the tables and progress (on stderr).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

from controller.core.config import PlannerConfig
from tests.simulation.cluster import ClusterSpec
from tests.simulation.compare import DEFAULT_POLICIES, compare
from tests.simulation.engine import Progress, RunResult
from tests.simulation.policies import POLICIES
from tests.simulation.trace import MIXES, Workload, load_trace, synthetic


def _none_or_float(text: str) -> float | None:
    return None if text.lower() in ("none", "off", "") else float(text)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m tests.simulation", description=__doc__.splitlines()[0] if __doc__ else None
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--trace", help="CSV with timestamp,duration,num_gpus[,gpu_time,cluster]")
    src.add_argument("--synthetic", type=int, metavar="N", help="N synthetic jobs instead of a trace")
    p.add_argument("--start", help="trace window start (ISO date/time, UTC); default: first job")
    p.add_argument("--days", type=float, help="trace window length in days; default: to the end")
    p.add_argument("--limit", type=int, help="replay only the first N jobs of the window")
    p.add_argument("--seed", type=int, default=0, help="synthetic mix / priority draw seed")
    p.add_argument("--mix", choices=sorted(MIXES), default="gangs", help="synthetic gang sizes")
    p.add_argument("--load", type=float, default=0.9, help="synthetic offered load (fraction of GPUs)")
    p.add_argument("--mean-duration", type=float, default=3600.0, help="synthetic mean job seconds")
    p.add_argument("--high-priority-fraction", type=float, default=0.0, help="jobs given --high-priority")
    p.add_argument("--high-priority", type=int, default=100)
    p.add_argument("--nodes", type=int, default=64)
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--rack-size", type=int, default=8, help="nodes per rack (0: no racks)")
    p.add_argument("--racks-per-zone", type=int, default=4, help="(0: no zones)")
    p.add_argument("--nvlink-size", type=int, default=0, help="nodes per NVLink domain (0: none)")
    p.add_argument("--policies", default=",".join(DEFAULT_POLICIES), help=f"of {', '.join(POLICIES)}")
    p.add_argument("--period", type=float, default=1.0, help="planning period, virtual seconds")
    p.add_argument("--every-tick", action="store_true", help="plan at every tick (slow; same result)")
    # PlannerConfig knobs
    p.add_argument("--schedule-timeout", type=_none_or_float, default=None, help="seconds (none)")
    p.add_argument("--no-preemption", action="store_true")
    # 300 s, not the controller's default of 0: the published replays use it (anti-thrashing).
    p.add_argument("--min-runtime", type=float, default=300.0, help="preemption minimum runtime, s")
    p.add_argument(
        "--starvation-age",
        type=_none_or_float,
        default=None,
        help="seconds, or none (the controller's default)",
    )
    p.add_argument("--out", default="out/sim/sim", help="output path without extension")
    p.add_argument("--name", help="name in the JSON (default: the --out file name)")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    return p


def workload_of(args: argparse.Namespace, spec: ClusterSpec) -> Workload:
    if args.trace:
        return load_trace(
            args.trace,
            args.start,
            args.days,
            args.limit,
            priority_fraction=args.high_priority_fraction,
            high_priority=args.high_priority,
            seed=args.seed,
        )
    return synthetic(
        args.synthetic,
        args.seed,
        spec.total_gpus,
        load=args.load,
        mix=args.mix,
        mean_duration=args.mean_duration,
        priority_fraction=args.high_priority_fraction,
        high_priority=args.high_priority,
    )


def config_of(args: argparse.Namespace) -> PlannerConfig:
    config = PlannerConfig(
        default_schedule_timeout=args.schedule_timeout,
        preemption=not args.no_preemption,
        starvation_age_seconds=args.starvation_age,
    )
    if args.min_runtime is not None:
        config = replace(config, preemption_min_runtime_seconds=args.min_runtime)
    return config


def progress_printer() -> Progress:
    """Progress lines on stderr: simulated time, jobs done, queue, cycles, jobs/s since the start."""
    first_seen: dict[str, float] = {}

    def progress(policy: str, t: float, done: int, total: int, queue: int, cycles: int) -> None:
        now = time.perf_counter()
        since = first_seen.setdefault(policy, now)
        rate = done / (now - since) if now > since else 0.0
        print(
            f"  {policy:<17} t={t / 86400:7.2f} d  done {done:>6}/{total}  queue {queue:>5}  "
            f"cycles {cycles:>7}  {rate:7.0f} jobs/s",
            file=sys.stderr,
            flush=True,
        )

    return progress


def print_speed(result: RunResult) -> None:
    rate = len(result.runs) / result.wall_seconds if result.wall_seconds > 0 else 0.0
    extra = ""
    if "plan_seconds" in result.policy_stats:
        extra = (
            f", {result.policy_stats['plan_calls']} plan() calls, "
            f"{result.policy_stats['plan_seconds']:.1f}s in plan(), "
            f"{result.policy_stats['snapshot_seconds']:.1f}s building snapshots"
        )
    print(
        f"{result.policy}: {result.wall_seconds:.1f}s wall, {rate:.0f} simulated jobs/s, "
        f"{result.cycles} cycles{extra}"
    )


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    spec = ClusterSpec(args.nodes, args.gpus_per_node, args.rack_size, args.racks_per_zone, args.nvlink_size)
    workload = workload_of(args, spec)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    name = args.name or args.out.rstrip("/").rsplit("/", 1)[-1]
    started = time.perf_counter()
    if not args.quiet:
        print(
            f"{len(workload.jobs)} jobs ({workload.source}), {spec.nodes} nodes × {spec.gpus_per_node} GPUs, "
            f"policies: {', '.join(policies)}",
            file=sys.stderr,
        )
    comparison = compare(
        workload,
        spec,
        policies,
        config_of(args),
        period=args.period,
        name=name,
        every_tick=args.every_tick,
        progress=None if args.quiet else progress_printer(),
    )
    json_path, png_path = comparison.write(args.out)
    elapsed = time.perf_counter() - started
    setup = comparison.setup()
    print(
        f"{setup['jobs']} jobs ({setup['too_big_for_cluster']} too big for the cluster, left out), "
        f"offered load in the window {setup['offered_load_in_window_pct']}% of {spec.total_gpus} GPUs"
    )
    print(comparison.table())
    print()
    for result in comparison.results:
        print_speed(result)
    problems = {n: m["bounds"] for n, m in comparison.summaries.items() if m["bounds"]}
    for policy, found in problems.items():
        print(f"BOUND VIOLATED ({policy}): {'; '.join(found)}")
    print(f"total {elapsed:.1f}s; written {json_path} and {png_path}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
