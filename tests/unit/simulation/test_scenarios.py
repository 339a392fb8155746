"""Hand-made cases whose outcome is known, run through every policy (the real core for phalanx)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.core.config import PlannerConfig
from tests.simulation import ClusterSpec, Comparison, compare
from tests.simulation.engine import Run

from .helpers import jobs, workload

SMALL = ClusterSpec(nodes=2, gpus_per_node=4, rack_size=0)
ALL = ("phalanx", "greedy-per-pod", "summed-quota", "fifo-no-backfill", "sjf-oracle")


def by_id(comparison: Comparison, policy: str) -> dict[str, Run]:
    result = next(r for r in comparison.results if r.policy == policy)
    return {run.job.id: run for run in result.runs}


def test_two_gangs_arriving_together_deadlock_greedy_but_not_phalanx() -> None:
    # 2 nodes × 4 GPUs; two 8-GPU jobs (2 pods × 4 GPUs each) created at the same moment. The
    # scheduler's queue interleaves their pods (creation order): j0-0, j1-0, j0-1, j1-1; each gang
    # gets one node and waits forever for the other.
    w = workload(jobs((0.0, 100.0, 8), (0.0, 100.0, 8)))
    c = compare(w, SMALL, ALL)
    greedy = c.summaries["greedy-per-pod"]
    assert greedy["finished"] == 0
    assert greedy["deadlocked_gangs"] == 2
    assert greedy["deadlocked_gpus_held"] == 8
    phalanx = c.summaries["phalanx"]
    assert phalanx["deadlocked_gangs"] == 0
    runs = by_id(c, "phalanx")
    assert (runs["j0"].started, runs["j0"].finish) == (0.0, 100.0)
    assert (runs["j1"].started, runs["j1"].finish) == (100.0, 200.0)
    for policy in ("summed-quota", "fifo-no-backfill", "sjf-oracle"):
        assert c.summaries[policy]["finished"] == 2, policy
    for policy in ALL:
        assert c.summaries[policy]["bounds"] == [], policy


def test_partial_gang_holds_gpus_under_greedy() -> None:
    # j0 (4 GPUs) fills node 0 for 100 s; j1 (8 GPUs = 2 × 4) gets node 1 at once and holds it idle
    # until node 0 frees up: 4 GPUs × 100 s held by a partial gang.
    w = workload(jobs((0.0, 100.0, 4), (0.0, 50.0, 8)))
    c = compare(w, SMALL, ("phalanx", "greedy-per-pod"))
    greedy = c.summaries["greedy-per-pod"]
    assert greedy["partial_gpu_h"] == pytest.approx(4 * 100 / 3600)
    assert greedy["finished"] == 2
    assert c.summaries["phalanx"]["partial_gpu_h"] == 0.0
    assert by_id(c, "greedy-per-pod")["j1"].started == 100.0
    assert by_id(c, "phalanx")["j1"].started == 100.0


def test_summed_quota_admits_what_cannot_be_placed_and_phalanx_does_not() -> None:
    # j0: 5 GPUs = 2 pods × 3, one per node, for 1000 s: each node keeps 1 free GPU (2 in total).
    # j1 (t=10): one pod of 2 GPUs. The free sum (2) covers it, no node does: summed-quota admits it
    # (stranded), and its quota then keeps j2 (t=20, 1 GPU, which fits) waiting until j0 ends.
    # Phalanx keeps j1 waiting and starts j2 at once.
    w = workload(jobs((0.0, 1000.0, 5), (10.0, 100.0, 2), (20.0, 100.0, 1)))
    c = compare(w, SMALL, ALL)
    quota, phalanx = by_id(c, "summed-quota"), by_id(c, "phalanx")
    assert quota["j1"].stranded and c.summaries["summed-quota"]["stranded_admissions"] == 1
    assert c.summaries["phalanx"]["stranded_admissions"] == 0
    assert phalanx["j2"].started == 20.0
    assert quota["j2"].started == 1000.0
    assert phalanx["j1"].started == quota["j1"].started == 1000.0
    # The head of line (j1) blocks j2 without backfill.
    assert by_id(c, "fifo-no-backfill")["j2"].started == 1000.0
    for policy in ALL:
        assert c.summaries[policy]["bounds"] == [], policy


def test_preemption_evicts_the_whole_low_priority_gang_and_restarts_it() -> None:
    # One node × 4 GPUs. j0 (priority 0, 4 GPUs) runs from t=0 for 1000 s; j1
    # (priority 100, 4 GPUs, 100 s) arrives at t=400, after the minimum runtime (300 s): Phalanx
    # evicts j0, holds its room for j1 (admitted at the next tick), and j0 starts over when j1 ends.
    spec = ClusterSpec(nodes=1, gpus_per_node=4, rack_size=0)
    w = workload(jobs((0.0, 1000.0, 4, 0), (400.0, 100.0, 4, 100)))
    c = compare(w, spec, ("phalanx",), PlannerConfig(starvation_age_seconds=None))
    runs = by_id(c, "phalanx")
    assert runs["j1"].started == 401.0
    assert runs["j0"].restarts == 1
    assert runs["j0"].first_start == 0.0
    assert runs["j0"].started == 501.0
    assert runs["j0"].finish == 1501.0
    m = c.summaries["phalanx"]
    assert m["preemptions"] == 1
    assert m["preemption_lost_gpu_h"] == pytest.approx(4 * 400 / 3600)
    assert m["bounds"] == []
    # Without preemption the high-priority job waits for the end of j0.
    c2 = compare(w, spec, ("phalanx",), PlannerConfig(preemption=False, starvation_age_seconds=None))
    assert by_id(c2, "phalanx")["j1"].started == 1000.0
    assert c2.summaries["phalanx"]["preemptions"] == 0


def test_preemption_waits_for_the_minimum_runtime() -> None:
    # j1 arrives at t=100; j0 may be preempted only from t=300 (its minimum runtime): nothing
    # changes in the cluster at t=300, the engine wakes up for it.
    spec = ClusterSpec(nodes=1, gpus_per_node=4, rack_size=0)
    w = workload(jobs((0.0, 1000.0, 4, 0), (100.0, 100.0, 4, 100)))
    config = PlannerConfig(starvation_age_seconds=None, preemption_min_runtime_seconds=300.0)
    c = compare(w, spec, ("phalanx",), config)
    runs = by_id(c, "phalanx")
    assert runs["j0"].restarts == 1
    assert runs["j1"].started == 301.0


def test_timeouts_are_counted_once_and_the_gang_keeps_waiting() -> None:
    w = workload(jobs((0.0, 500.0, 8), (1.0, 10.0, 8), (2.0, 10.0, 8)))
    config = PlannerConfig(default_schedule_timeout=60.0, starvation_age_seconds=None)
    c = compare(w, SMALL, ("phalanx",), config)
    runs = by_id(c, "phalanx")
    assert [runs[j].timed_out for j in ("j0", "j1", "j2")] == [False, True, True]
    assert c.summaries["phalanx"]["timeouts"] == 2
    assert runs["j1"].started == 500.0 and runs["j2"].started == 510.0
    # With a timeout the gang can no longer reserve: still all finish.
    assert c.summaries["phalanx"]["finished"] == 3


def test_starvation_reservation_stops_small_jobs_from_overtaking_a_big_one() -> None:
    # 2 nodes × 4 GPUs. A stream of 1-GPU jobs keeps some GPUs busy on both nodes; an 8-GPU gang
    # (j0 at t=1) never fits while they keep coming. After the starvation age the core reserves
    # both nodes for it: they drain, it starts.
    stream: list[tuple[float, float, int]] = [(0.0, 400.0, 1), (0.0, 400.0, 1)]
    stream += [(float(t), 400.0, 1) for t in range(200, 4000, 200)]
    specs: list[tuple[float, float, int]] = [(1.0, 100.0, 8), *stream]
    w = workload(jobs(*specs))
    without = compare(w, SMALL, ("phalanx",), PlannerConfig(starvation_age_seconds=None))
    with_ = compare(w, SMALL, ("phalanx",), PlannerConfig(starvation_age_seconds=600.0))
    late = by_id(without, "phalanx")["j0"].started
    early = by_id(with_, "phalanx")["j0"].started
    assert early is not None and late is not None
    assert early < late
    assert with_.summaries["phalanx"]["bounds"] == []


def test_all_or_nothing_fifo_blocks_the_queue_and_sjf_reorders_it() -> None:
    spec = ClusterSpec(nodes=1, gpus_per_node=4, rack_size=0)
    # j0 occupies 2 GPUs; j1 (4 GPUs) waits; j2 (1 GPU) would fit: FIFO keeps it behind j1.
    w = workload(jobs((0.0, 100.0, 2), (1.0, 100.0, 4), (2.0, 10.0, 1), (2.0, 5.0, 1)))
    c = compare(w, spec, ("fifo-no-backfill", "sjf-oracle", "phalanx"))
    fifo, sjf, phalanx = by_id(c, "fifo-no-backfill"), by_id(c, "sjf-oracle"), by_id(c, "phalanx")
    assert fifo["j2"].started == 200.0
    assert sjf["j2"].started == 2.0 and phalanx["j2"].started == 2.0
    assert sjf["j1"].started == 100.0


def test_too_big_jobs_are_left_out_for_every_policy() -> None:
    w = workload(jobs((0.0, 10.0, 1), (0.0, 10.0, 16)))
    c = compare(w, SMALL, ALL)
    assert c.setup()["too_big_for_cluster"] == 1
    assert all(m["jobs"] == 1 and m["finished"] == 1 for m in c.summaries.values())


def test_config_is_passed_to_the_core() -> None:
    w = workload(jobs((0.0, 10.0, 1)))
    config = replace(PlannerConfig(), preemption_min_runtime_seconds=5.0)
    c = compare(w, SMALL, ("phalanx",), config)
    assert c.setup()["planner"]["preemption_min_runtime_seconds"] == 5.0
