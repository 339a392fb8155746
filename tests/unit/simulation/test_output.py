"""Outputs: deterministic JSON, the table, the PNG writer, the CLI."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest

from controller.core.config import PlannerConfig
from controller.simulation import ClusterSpec, compare, synthetic
from controller.simulation.__main__ import main
from controller.simulation.png import Canvas, encode_png
from controller.simulation.report import resample

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


def _decode(png: bytes) -> tuple[int, int, bytes]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, size = 8, b"", (0, 0)
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind = png[pos + 4 : pos + 8]
        data = png[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", png[pos + 8 + length : pos + 12 + length])
        assert crc == zlib.crc32(kind + data) & 0xFFFFFFFF
        if kind == b"IHDR":
            size = struct.unpack(">II", data[:8])
            assert data[8:10] == bytes([8, 2])  # 8-bit RGB
        elif kind == b"IDAT":
            idat += data
        pos += 12 + length
    return size[0], size[1], zlib.decompress(idat)


def test_png_writer_round_trips() -> None:
    canvas = Canvas(5, 3)
    canvas.set(1, 2, (10, 20, 30))
    canvas.line(0, 0, 4, 0, (255, 0, 0))
    width, height, raw = _decode(encode_png(canvas))
    assert (width, height) == (5, 3)
    assert len(raw) == height * (1 + 3 * width)

    def row(y: int) -> bytes:
        return raw[y * 16 + 1 : (y + 1) * 16]

    assert row(0) == bytes([255, 0, 0]) * 5
    assert row(2)[3:6] == bytes([10, 20, 30])
    assert row(1) == bytes([255, 255, 255]) * 5


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
    width, height, _ = _decode((tmp_path / "sim" / "cli.png").read_bytes())
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
