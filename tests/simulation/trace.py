"""Jobs to replay: the Philly CSV trace (a time window of it) or a seeded synthetic mix.

A job of ``g`` GPUs on nodes of ``G`` GPUs becomes a gang of ``k = ceil(g / G)`` pods of
``ceil(g / k)`` GPUs each (``min_member = k``): a job that fits one node is one pod of ``g`` GPUs;
a bigger one is spread over as few pods as possible, split evenly. Philly's sizes on 8-GPU nodes:
1, 2, 4, 8 -> one pod; 12 -> 2 × 6; 16 -> 2 × 8; 24 -> 3 × 8; 32 -> 4 × 8; 64 -> 8 × 8;
128 -> 16 × 8. (The plain ``min(g, G)`` GPUs per pod would turn 12 into 2 × 8 = 16 GPUs; the even
split asks for exactly ``g`` whenever ``k`` divides ``g``, and rounds up otherwise.)

Times are seconds of virtual time from the start of the window (``t = 0``). Rows of the CSV are
not sorted: jobs are sorted by (submission, row number), so equal timestamps keep a stable order.
"""

from __future__ import annotations

import csv
import gzip
import math
import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TextIO

# Philly's gang sizes and how often they occur (README of the trace), for synthetic mixes.
PHILLY_SIZES: tuple[tuple[int, float], ...] = (
    (1, 76_627),
    (2, 1_818),
    (4, 1_870),
    (8, 1_643),
    (12, 7),
    (16, 199),
    (24, 7),
    (32, 67),
    (64, 6),
    (128, 3),
)
# A mix heavier in multi-node gangs (where gang scheduling matters).
GANG_HEAVY_SIZES: tuple[tuple[int, float], ...] = (
    (1, 50),
    (2, 8),
    (4, 8),
    (8, 12),
    (16, 10),
    (24, 3),
    (32, 6),
    (64, 3),
)
MIXES = {"philly": PHILLY_SIZES, "gangs": GANG_HEAVY_SIZES}


@dataclass(frozen=True, slots=True)
class Job:
    id: str  # stable: "r<row>" for trace rows, "s<n>" for synthetic jobs
    submit: float  # seconds from the window start
    duration: float  # seconds of running once all its pods run
    gpus: int  # as asked by the trace
    team: str = "default"  # the trace's virtual cluster: the gang's namespace
    priority: int = 0


@dataclass(frozen=True, slots=True)
class GangShape:
    pods: int
    per_pod: int

    @property
    def gpus(self) -> int:
        return self.pods * self.per_pod


def gang_shape(gpus: int, gpus_per_node: int) -> GangShape:
    """The gang a job of `gpus` GPUs becomes on nodes of `gpus_per_node` GPUs (see module doc)."""
    if gpus < 1 or gpus_per_node < 1:
        raise ValueError(f"a job needs >= 1 GPU on nodes of >= 1 GPU (got {gpus} on {gpus_per_node})")
    pods = -(-gpus // gpus_per_node)
    return GangShape(pods, -(-gpus // pods))


@dataclass(frozen=True, slots=True)
class Workload:
    """The jobs of one replay plus where they came from."""

    jobs: tuple[Job, ...]
    source: str  # "trace:<path>" or "synthetic:<n>:<seed>:<mix>"
    window_start: str  # ISO time of t = 0 ("" for synthetic)
    window_seconds: float  # length of the arrival window
    skipped: int = 0  # rows dropped: malformed, zero GPUs or zero duration


def parse_time(text: str) -> datetime:
    value = datetime.fromisoformat(text.strip())
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


Row = tuple[datetime, int, float, int, str]  # submitted, row number, duration, GPUs, cluster


# The Philly trace, stored in the repository (tests/data/README.md says where it comes from).
PHILLY = Path(__file__).resolve().parents[1] / "data" / "philly.csv.gz"


def default_trace() -> Path:
    """The trace benchmarks replay: ``PHALANX_TRACE`` if set, else the Philly trace of the repository."""
    return Path(os.environ.get("PHALANX_TRACE") or PHILLY)


def open_trace(path: str | Path) -> TextIO:
    """A trace CSV as text, gzip-compressed (``.gz``) or not."""
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", newline="")
    return Path(path).open(newline="")


def read_rows(path: str | Path) -> tuple[list[Row], int]:
    """The usable rows of the CSV (unsorted), and how many were not (malformed, zero GPUs or
    duration)."""
    rows: list[Row] = []
    skipped = 0
    with open_trace(path) as f:
        for n, row in enumerate(csv.DictReader(f)):
            try:
                submitted = parse_time(row["timestamp"])
                duration = float(row["duration"])
                gpus = int(float(row["num_gpus"]))
            except (KeyError, TypeError, ValueError):
                skipped += 1
                continue
            if gpus < 1 or not duration > 0 or not math.isfinite(duration):
                skipped += 1
                continue
            rows.append((submitted, n, duration, gpus, (row.get("cluster") or "default").strip()))
    return rows, skipped


def load_trace(
    path: str | Path,
    start: str | None = None,
    days: float | None = None,
    limit: int | None = None,
    priority_fraction: float = 0.0,
    high_priority: int = 100,
    seed: int = 0,
) -> Workload:
    """Jobs submitted in [start, start + days) (the whole trace when `start` is None), sorted.

    `priority_fraction` of the jobs (drawn with `seed`, the same jobs whatever the policy) get
    `high_priority`; the trace itself has no priorities. `limit` keeps the first jobs only.
    """
    rows, skipped = read_rows(path)
    if not rows:
        raise ValueError(f"{path}: no usable job")
    rows.sort(key=lambda r: (r[0], r[1]))
    origin = parse_time(start) if start else rows[0][0]
    end = origin + timedelta(days=days) if days is not None else None
    selected = [r for r in rows if r[0] >= origin and (end is None or r[0] < end)]
    if limit is not None:
        selected = selected[:limit]
    rng = random.Random(seed)
    jobs = []
    for submitted, n, duration, gpus, team in selected:
        high = rng.random() < priority_fraction
        jobs.append(
            Job(
                id=f"r{n}",
                submit=(submitted - origin).total_seconds(),
                duration=duration,
                gpus=gpus,
                team=f"team-{team}",
                priority=high_priority if high else 0,
            )
        )
    window = (end - origin).total_seconds() if end is not None else (jobs[-1].submit if jobs else 0.0)
    return Workload(tuple(jobs), f"trace:{path}", origin.isoformat(), window, skipped)


def synthetic(
    n: int,
    seed: int,
    total_gpus: int,
    load: float = 0.9,
    mix: str = "gangs",
    mean_duration: float = 3600.0,
    priority_fraction: float = 0.0,
    high_priority: int = 100,
    teams: int = 4,
) -> Workload:
    """`n` jobs with sizes from `mix`, log-normal durations (mean `mean_duration`), Poisson arrivals
    at the rate that offers `load` × `total_gpus` GPUs of work on average."""
    if n < 0 or total_gpus < 1 or load <= 0:
        raise ValueError("synthetic: n >= 0, total_gpus >= 1 and load > 0 are required")
    sizes = MIXES[mix]
    rng = random.Random(seed)
    values = [s for s, _ in sizes]
    weights = [w for _, w in sizes]
    mean_gpus = sum(s * w for s, w in sizes) / sum(weights)
    sigma = 1.2
    mu = math.log(mean_duration) - sigma * sigma / 2
    rate = load * total_gpus / (mean_gpus * mean_duration)  # jobs per second
    t = 0.0
    jobs = []
    for k in range(n):
        t += rng.expovariate(rate)
        gpus = rng.choices(values, weights)[0]
        duration = max(1.0, round(rng.lognormvariate(mu, sigma)))
        high = rng.random() < priority_fraction
        jobs.append(
            Job(
                id=f"s{k}",
                submit=round(t, 3),
                duration=duration,
                gpus=gpus,
                team=f"team-{k % teams}",
                priority=high_priority if high else 0,
            )
        )
    return Workload(tuple(jobs), f"synthetic:{n}:{seed}:{mix}", "", t)


def offered_gpu_seconds(jobs: Sequence[Job], gpus_per_node: int) -> float:
    return sum(gang_shape(j.gpus, gpus_per_node).gpus * j.duration for j in jobs)
