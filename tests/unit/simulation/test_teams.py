"""Trace replay with teams: quotas from offered load, fairness figures, and the team policies."""

from __future__ import annotations

import pytest

from controller.core.config import PlannerConfig
from tests.simulation.cluster import ClusterSpec
from tests.simulation.teams import Samples, fairness, jain, replay, team_quotas
from tests.simulation.trace import Job

SPEC = ClusterSpec(2, 8, 0, 0)  # 16 GPUs


def job(i: int, team: str, submit: float, duration: float, gpus: int) -> Job:
    return Job(id=f"j{i}", submit=submit, duration=duration, gpus=gpus, team=team)


def test_quotas_follow_offered_load_and_sum_to_the_cluster() -> None:
    jobs = [job(0, "a", 0, 300, 8), job(1, "b", 0, 100, 8), job(2, "b", 0, 100, 4)]
    quotas = team_quotas(jobs, SPEC)
    assert quotas == {"a": 11, "b": 5}  # 2400 : 1200 GPU-s of 16 (10 : 5), the rest to the busiest
    assert sum(quotas.values()) == 16


def test_jain_index_and_distance_from_fair_share() -> None:
    assert jain([1, 1, 1]) == pytest.approx(1.0)
    assert jain([1, 0, 0]) == pytest.approx(1 / 3)
    samples = Samples([0.0], [{"a": 8, "b": 0}], [{"a": 8.0, "b": 8.0}])
    figures = fairness(samples, 16)
    assert figures["jain_avg"] == pytest.approx(0.5)  # ratios 1 and 0
    assert figures["fair_share_distance_pct"] == pytest.approx(50.0)


def borrowed_then_owner_arrives() -> list[Job]:
    """Team a fills the cluster with four 4-GPU jobs of 10 h; team b's 8-GPU job of 20 h (the same
    offered load: quotas 8 and 8) comes an hour later."""
    jobs = [job(i, "a", i, 10 * 3600, 4) for i in range(4)]
    jobs.append(job(4, "b", 3600, 20 * 3600, 8))
    return jobs


def test_queues_reclaim_where_today_the_owner_waits_and_strict_quotas_never_lend() -> None:
    doc = replay(
        borrowed_then_owner_arrives(),
        SPEC,
        ["phalanx", "phalanx-queues", "kueue-cohort", "strict-quota"],
        PlannerConfig(preemption_min_runtime_seconds=300),
        sample_period=600,
        window=7200,
    )
    assert doc["quotas"] == {"a": 8, "b": 8}
    waits = {name: data["waits_by_team"]["b"]["avg_wait_h"] for name, data in doc["policies"].items()}
    assert waits["phalanx"] >= 8  # b waits for a's borrowed jobs to end
    assert waits["phalanx-queues"] == 0  # reclaimed at once (a's jobs ran an hour)
    assert doc["policies"]["phalanx-queues"]["stats"]["reclaims"] == 1
    assert doc["policies"]["phalanx-queues"]["summary"]["preemptions"] == 2  # two 4-GPU gangs, whole
    assert waits["kueue-cohort"] == 0
    a_waits = doc["policies"]["strict-quota"]["waits_by_team"]["a"]
    assert a_waits["p95_wait_h"] >= 8  # never borrows: two of a's jobs wait for the other two
