"""Outputs: deterministic JSON and plot, the table, the CLI."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from controller.core.config import PlannerConfig
from tests.simulation import ClusterSpec, compare, synthetic
from tests.simulation.__main__ import main
from tests.simulation.report import resample

ALL = ("phalanx", "greedy-per-pod", "summed-quota", "fifo-no-backfill", "sjf-oracle")


def run_once(out: Path) -> tuple[bytes, bytes]:
    spec = ClusterSpec(nodes=6, gpus_per_node=8, rack_size=3, racks_per_zone=1)
    w = synthetic(150, 42, spec.total_gpus, load=1.0, priority_fraction=0.2)
    c = compare(w, spec, ALL, PlannerConfig(default_schedule_timeout=3600.0), name="det")
    json_path, png_path = c.write(out, timing=False)
    return json_path.read_bytes(), png_path.read_bytes()


def test_same_input_gives_the_same_json_and_png(tmp_path: Path) -> None:
    first = run_once(tmp_path / "a" / "det")
    second = run_once(tmp_path / "b" / "det")
    assert first == second
    doc = json.loads(first[0])
    assert sorted(doc["policies"]) == sorted(ALL)
    assert "timing" not in doc["policies"]["phalanx"]
    assert len(doc["timeline"]["phalanx"]["queue_jobs"]) == doc["timeline"]["bins"]


def test_resample_is_a_time_average() -> None:
    # 0 until t=1, 4 on [1, 3), 2 from t=3 on; bins of 1 over [0, 4).
    assert resample([1.0, 3.0], [4, 2], 0.0, 4.0, 4) == [0.0, 4.0, 4.0, 2.0]
    assert resample([0.0, 0.5], [2, 4], 0.0, 1.0, 1) == [3.0]
    assert resample([], [], 0.0, 1.0, 2) == [0.0, 0.0]


def _size(png: bytes) -> tuple[int, int]:
    """Width and height from the PNG header."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)


def test_cli_writes_json_and_png_and_prints_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sim" / "cli"
    code = main(
        [
            "--synthetic",
            "60",
            "--seed",
            "3",
            "--nodes",
            "4",
            "--out",
            str(out),
            "--quiet",
            "--schedule-timeout",
            "900",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "| phalanx |" in printed and "| greedy-per-pod |" in printed and "jobs/s" in printed
    doc = json.loads((tmp_path / "sim" / "cli.json").read_text())
    assert doc["setup"]["planner"]["default_schedule_timeout"] == 900.0
    assert doc["policies"]["phalanx"]["timing"]["jobs_per_s"] > 0
    width, height = _size((tmp_path / "sim" / "cli.png").read_bytes())
    assert width > 500 and height > 500


def test_cli_reads_a_trace_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text(
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-03 00:00:05,100.0,16,1600.0,a\n"
        "2017-10-03 00:00:01,60.0,1,60.0,b\n"
        "2017-10-04 00:00:00,60.0,1,60.0,b\n"
    )
    out = tmp_path / "w"
    assert (
        main(
            ["--trace", str(trace), "--start", "2017-10-03", "--days", "1", "--nodes", "2", "--out", str(out)]
        )
        == 0
    )
    doc = json.loads((tmp_path / "w.json").read_text())
    assert doc["setup"]["jobs"] == 2
    assert doc["policies"]["phalanx"]["metrics"]["finished"] == 2
    assert "phalanx" in capsys.readouterr().err  # progress
