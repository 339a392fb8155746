"""Trace loading (sorting, windows, malformed rows), gang shapes and synthetic mixes."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.simulation.trace import gang_shape, load_trace, synthetic

CSV = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-04 00:00:10,100.0,8,800.0,aaa
2017-10-03 12:00:00,50.0,1,50.0,bbb
2017-10-03 00:00:00,10.0,16,160.0,aaa
2017-10-02 23:59:59,10.0,1,10.0,aaa
not a time,10.0,1,10.0,aaa
2017-10-03 06:00:00,0,1,0,aaa
2017-10-03 06:00:00,10.0,0,0,aaa
2017-10-03 12:00:00,20.0,2,40.0,ccc
2017-10-05 00:00:00,30.0,4,120.0,aaa
"""


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.csv"
    path.write_text(CSV)
    return path


def test_rows_are_sorted_and_windowed(trace: Path) -> None:
    w = load_trace(trace, "2017-10-03", 2)
    assert [j.submit for j in w.jobs] == [0.0, 43200.0, 43200.0, 86410.0]
    # Equal timestamps keep the file's order (row numbers).
    assert [j.id for j in w.jobs] == ["r2", "r1", "r7", "r0"]
    assert [j.gpus for j in w.jobs] == [16, 1, 2, 8]
    assert w.jobs[0].team == "team-aaa"
    assert w.window_seconds == 2 * 86400
    assert w.skipped == 3  # bad time, zero duration, zero GPUs
    assert w.window_start.startswith("2017-10-03T00:00:00")


def test_window_boundaries(trace: Path) -> None:
    # [start, start + days): 2017-10-02 23:59:59 is before, 2017-10-05 00:00:00 is the end.
    assert len(load_trace(trace, "2017-10-03", 2).jobs) == 4
    assert len(load_trace(trace, "2017-10-02 23:59:59", 1).jobs) == 4
    assert len(load_trace(trace, "2017-10-03 00:00:01", 1).jobs) == 2
    whole = load_trace(trace)
    assert len(whole.jobs) == 6 and whole.jobs[0].submit == 0.0
    assert [j.submit for j in whole.jobs] == sorted(j.submit for j in whole.jobs)
    assert len(load_trace(trace, "2017-10-03", 2, limit=2).jobs) == 2


def test_priority_draw_is_seeded(trace: Path) -> None:
    a = load_trace(trace, priority_fraction=0.5, seed=1)
    b = load_trace(trace, priority_fraction=0.5, seed=1)
    assert [j.priority for j in a.jobs] == [j.priority for j in b.jobs]
    assert {j.priority for j in load_trace(trace, priority_fraction=1.0).jobs} == {100}


@pytest.mark.parametrize(
    ("gpus", "per_node", "pods", "per_pod"),
    [
        (1, 8, 1, 1),
        (4, 8, 1, 4),
        (8, 8, 1, 8),
        (12, 8, 2, 6),
        (16, 8, 2, 8),
        (24, 8, 3, 8),
        (128, 8, 16, 8),
        (5, 4, 2, 3),  # not divisible: rounded up (6 GPUs asked)
        (8, 4, 2, 4),
    ],
)
def test_gang_shape(gpus: int, per_node: int, pods: int, per_pod: int) -> None:
    shape = gang_shape(gpus, per_node)
    assert (shape.pods, shape.per_pod) == (pods, per_pod)
    assert shape.gpus >= gpus and shape.per_pod <= per_node


def test_gang_shape_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        gang_shape(0, 8)


def test_synthetic_mix_is_seeded_and_sorted() -> None:
    a = synthetic(200, 7, 64, load=0.8)
    b = synthetic(200, 7, 64, load=0.8)
    assert a == b
    assert synthetic(200, 8, 64, load=0.8) != a
    submits = [j.submit for j in a.jobs]
    assert submits == sorted(submits)
    assert all(j.duration >= 1 and j.gpus >= 1 for j in a.jobs)
    # The offered load is about what was asked for (a loose check: 200 log-normal draws).
    offered = sum(j.gpus * j.duration for j in a.jobs) / (64 * a.window_seconds)
    assert 0.4 < offered < 1.6


def test_the_repositorys_philly_trace_is_read_compressed_as_it_is_stored() -> None:
    """Benchmarks replay a trace any fresh clone has: tests/data/philly.csv.gz (82,247 jobs)."""
    from tests.simulation.trace import PHILLY, default_trace, read_rows

    assert default_trace() == PHILLY or default_trace().exists()
    rows, skipped = read_rows(PHILLY)
    assert len(rows) + skipped == 82_247 and len(rows) > 80_000
