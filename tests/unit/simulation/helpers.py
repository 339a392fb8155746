"""Small hand-made workloads for the simulation tests."""

from __future__ import annotations

from collections.abc import Sequence

from tests.simulation.trace import Job, Workload


def jobs(*specs: tuple[float, float, int] | tuple[float, float, int, int]) -> tuple[Job, ...]:
    """(submit, duration, gpus[, priority]) -> jobs j0, j1, ... in that order."""
    out = []
    for i, spec in enumerate(specs):
        priority = spec[3] if len(spec) > 3 else 0
        out.append(Job(id=f"j{i}", submit=spec[0], duration=spec[1], gpus=spec[2], priority=priority))
    return tuple(out)


def workload(job_list: Sequence[Job], window: float | None = None) -> Workload:
    last = max((j.submit for j in job_list), default=0.0)
    return Workload(tuple(job_list), "test", "", window if window is not None else last + 1.0)
