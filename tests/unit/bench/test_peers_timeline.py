"""The figures bench-peers publishes: partial holding, waits, allocation, Phalanx ÷ best peer."""

from __future__ import annotations

import pytest

from tests.bench.peers.report import HIGHER, LOWER, Metric, ratio, table
from tests.bench.peers.timeline import GangRecord, PodRecord, summarize


def gang(bound: list[float | None], finished: list[float | None], size: int = 2, gpus: int = 4) -> GangRecord:
    record = GangRecord("g", size, gpus, submitted=0.0)
    for b, f in zip(bound, finished, strict=True):
        record.pods.append(PodRecord("g", gpus, bound=b, finished=f, succeeded=f is not None))
    return record


def test_gang_placed_when_all_members_hold_nodes_at_once() -> None:
    g = gang([1.0, 3.0], [10.0, 10.0])
    assert g.all_bound_at(20.0) == 3.0
    # The first member held 4 GPUs for 2 s alone.
    assert g.partial_gpu_seconds(20.0) == pytest.approx(8.0)


def test_member_gone_before_the_last_arrives_means_never_placed() -> None:
    g = gang([1.0, 5.0], [2.0, 9.0])
    assert g.all_bound_at(20.0) is None
    # Both members' holding counts as partial, up to the end of the run.
    assert g.partial_gpu_seconds(20.0) == pytest.approx(4 * 1.0 + 4 * 4.0)


def test_half_placed_gang_holds_its_gpus_until_the_end() -> None:
    g = gang([2.0, None], [None, None])
    assert g.partial_gpu_seconds(12.0) == pytest.approx(40.0)
    assert not g.completed()


def test_summary_waits_completion_and_allocation() -> None:
    a = gang([1.0, 1.0], [5.0, 5.0])
    b = gang([5.0, 6.0], [9.0, 10.0])
    b.submitted = 0.5
    figures = summarize([a, b], start=0.0, end=10.0, total_gpus=8)
    assert figures["gangs_completed"] == 2
    assert figures["wait_p99_s"] == pytest.approx(5.5)
    assert figures["apply_to_last_bound_s"] == pytest.approx(6.0)
    assert figures["apply_to_last_completed_s"] == pytest.approx(10.0)
    assert figures["partial_gpu_seconds"] == pytest.approx(4.0)
    # 2×4 GPUs for 4 s, then 4 for 4 s and 4 for 4 s: 64 GPU-s of 80.
    assert figures["gpu_allocation_pct"] == pytest.approx(80.0)


def test_ratio_against_the_best_peer_in_the_metrics_direction() -> None:
    assert ratio(2.0, [4.0, 1.0, None], LOWER) == "2.00"
    assert ratio(2.0, [4.0, 1.0], HIGHER) == "0.50"
    assert ratio(0.0, [0.0, 3.0], LOWER) == "= (both 0)"
    assert ratio(None, [1.0], LOWER) == "—"


def test_table_marks_failed_systems_and_ratio_ignores_them() -> None:
    results = {
        "phalanx": {"wait_p50_s": 1.0},
        "kueue": {"wait_p50_s": 4.0},
        "volcano": {"error": "RuntimeError: boom"},
    }
    text = table("t", results, (Metric("wait_p50_s", "wait", LOWER),))
    assert "| wait (lower is better) | 1 | 4 | failed | 0.25 |" in text
    assert "volcano failed: RuntimeError: boom" in text


def test_a_gangs_start_is_split_where_its_last_member_appears() -> None:
    g = GangRecord("g", 2, 1, submitted=0.0)
    g.pods = [
        PodRecord("g", 1, created=1.0, schedulable=3.0, bound=4.0),
        PodRecord("g", 1, created=2.5, schedulable=3.5, bound=6.0),
    ]
    figures = summarize([g], start=0.5, end=10.0, total_gpus=8)
    assert figures["apply_to_last_bound_s"] == pytest.approx(5.5)
    assert figures["apply_to_last_created_s"] == pytest.approx(2.0)  # the Job controller's part
    assert figures["last_created_to_last_bound_s"] == pytest.approx(3.5)  # the gang scheduler's
    assert figures["last_created_to_last_schedulable_s"] == pytest.approx(1.0)  # its gates
    assert figures["last_schedulable_to_last_bound_s"] == pytest.approx(2.5)  # the binding
