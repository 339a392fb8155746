"""Trace-driven discrete-event simulation of gang scheduling policies.

Drives the real pure core (``controller.core.plan``) through a job trace next to simple baselines
(greedy per-pod placement, summed-quota admission, FIFO without backfill, shortest-job-first with
known durations) and reports what operators compare: job completion time, queueing delay, GPU
allocation, GPU-hours wasted by partial gangs, deadlocks, preemptions and timeouts.

Run ``python -m tests.simulation --help``. Does file I/O (CSV in, JSON and PNG out) but no
network and no asyncio: it never imports the controller's shell.
"""

from tests.simulation.cluster import ClusterSpec
from tests.simulation.compare import DEFAULT_POLICIES, Comparison, compare
from tests.simulation.trace import Job, Workload, gang_shape, load_trace, synthetic

__all__ = [
    "DEFAULT_POLICIES",
    "ClusterSpec",
    "Comparison",
    "Job",
    "Workload",
    "compare",
    "gang_shape",
    "load_trace",
    "synthetic",
]
