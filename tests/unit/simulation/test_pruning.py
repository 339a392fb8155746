"""Pruned replay passes (tests/simulation/pruning.py) decide exactly what full passes decide."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.config import PlannerConfig
from tests.simulation import ClusterSpec, Job, gang_shape, synthetic
from tests.simulation.engine import Engine, RunResult
from tests.simulation.policies import PhalanxPolicy
from tests.simulation.pruning import PassOrder, pod_bounds

from .helpers import jobs

CONFIG = PlannerConfig(preemption_min_runtime_seconds=300.0)


def replay(
    job_list: tuple[Job, ...], spec: ClusterSpec, prune: bool, config: PlannerConfig = CONFIG
) -> tuple[RunResult, list[tuple[Any, ...]]]:
    fitting = [j for j in job_list if spec.fits_empty(gang_shape(j.gpus, spec.gpus_per_node))]
    result = Engine(fitting, spec, PhalanxPolicy(config, prune=prune)).run()
    # Job by job: when each started (first and last time), finished, and on which nodes.
    outcome = [
        (r.job.id, r.first_start, r.started, r.finish, r.restarts, tuple(r.nodes)) for r in result.runs
    ]
    return result, outcome


@pytest.mark.parametrize(
    ("seed", "nodes", "gpus", "mix"),
    [(1, 4, 8, "gangs"), (2, 3, 4, "philly"), (3, 6, 8, "philly"), (4, 2, 2, "gangs"), (5, 5, 8, "gangs")],
)
def test_pruned_passes_give_every_job_the_same_start_and_nodes(
    seed: int, nodes: int, gpus: int, mix: str
) -> None:
    spec = ClusterSpec(nodes=nodes, gpus_per_node=gpus, rack_size=2, racks_per_zone=2)
    w = synthetic(250, seed, spec.total_gpus, load=1.5, mean_duration=900.0, mix=mix)
    pruned, fast = replay(w.jobs, spec, prune=True)
    full, slow = replay(w.jobs, spec, prune=False)
    assert fast == slow
    # ... and pruning did its work: fewer gangs asked about, fewer plan() calls.
    assert pruned.policy_stats["gangs_left_out"] > 0
    assert full.policy_stats["gangs_left_out"] == 0
    assert pruned.policy_stats["plan_calls"] < full.policy_stats["plan_calls"]


def test_a_gang_behind_the_first_prefix_that_fits_is_still_reached() -> None:
    # 4 nodes × 8 GPUs: a long 24-GPU job and a short 8-GPU one run; 30 gangs of 2 × 8 GPUs queue,
    # then a 1-GPU job. When the short job ends, the 8 free GPUs take no 2 × 8 gang (each is
    # planned: one pod would fit, so they are not inert), but the 1-GPU job far behind them starts.
    queue = [(0, 10_000, 24), (0, 100, 8)] + [(1 + k, 50, 16) for k in range(30)] + [(40, 50, 1)]
    spec = ClusterSpec(nodes=4, gpus_per_node=8, rack_size=0, racks_per_zone=0)
    pruned, fast = replay(jobs(*queue), spec, prune=True)
    _, slow = replay(jobs(*queue), spec, prune=False)
    assert fast == slow
    assert fast[-1][1] == 100.0  # the 1-GPU job starts when the short one ends
    assert pruned.policy_stats["longer_passes"] > 0


@pytest.mark.parametrize(
    "config",
    [
        PlannerConfig(default_schedule_timeout=600.0),
        PlannerConfig(starvation_age_seconds=600.0),
    ],
)
def test_pruning_stays_off_where_its_proof_does_not_hold(config: PlannerConfig) -> None:
    spec = ClusterSpec(nodes=2, gpus_per_node=8)
    w = synthetic(40, 1, spec.total_gpus, load=1.5, mean_duration=600.0)
    result, _ = replay(w.jobs, spec, prune=True, config=config)
    assert result.policy_stats["gangs_left_out"] == 0


def test_pruning_stays_off_with_priorities() -> None:
    spec = ClusterSpec(nodes=2, gpus_per_node=8)
    w = synthetic(40, 1, spec.total_gpus, load=1.5, mean_duration=600.0, priority_fraction=0.3)
    result, _ = replay(w.jobs, spec, prune=True)
    assert result.policy_stats["gangs_left_out"] == 0


def test_pod_bounds_count_the_pods_of_each_size_that_fit() -> None:
    # nodes with 0, 1, 3 and 8 free GPUs
    bound = pod_bounds([1, 1, 0, 1, 0, 0, 0, 0, 1])
    assert bound[1] == 1 + 3 + 8
    assert bound[2] == 1 + 4
    assert bound[4] == 2
    assert bound[8] == 1


def test_pass_order_finds_the_first_live_gangs_and_checks_the_rest() -> None:
    order = PassOrder()
    for index, (pods, per_pod) in enumerate([(1, 8), (1, 1), (2, 1), (1, 4), (3, 1)]):
        order.add((0, float(index), "ns", f"g{index}"), index, pods, per_pod)
    bound = pod_bounds([0, 0, 1, 0, 0, 0, 0, 0, 0])  # one node, 2 GPUs free: the 8-GPU gang is inert
    assert order.first_live(bound, 2) == ([1, 2], 3)
    assert order.first_live(bound, 10) == ([1, 2, 4], 5)
    none_left = pod_bounds([1, 0, 0, 0, 0, 0, 0, 0, 0])
    assert order.all_wait_from(3, none_left)
    assert order.all_wait_from(3, pod_bounds([0, 1, 0, 0, 0, 0, 0, 0, 0]))  # 1 GPU: 4 and 3 × 1 wait
    three_free = pod_bounds([0, 0, 0, 1, 0, 0, 0, 0, 0])
    assert not order.all_wait_from(3, three_free)  # gang 4's 3 pods of 1 GPU fit
    order.remove((0, 4.0, "ns", "g4"), 4)
    assert order.all_wait_from(3, three_free)  # only the 4-GPU gang is left
