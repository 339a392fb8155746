"""`make bench` is not part of `make test`; this keeps its webhook floor server from rotting."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

from tests.bench import bench_webhook as bench


def test_the_benchmark_floor_server_starts_and_answers_over_tls(tmp_path: Path) -> None:
    ca = bench.write_cert(tmp_path)
    port = bench.free_port()
    context = ssl.create_default_context(cadata=ca.decode())
    with bench.started(bench.floor_command(port, tmp_path), tmp_path / "floor.log"):
        # Raises if nothing answers over TLS within its timeout (e.g. the floor failed to import).
        asyncio.run(bench.wait_ready(f"https://localhost:{port}/mutate", context))
