"""`make bench` is not part of `make test`; this keeps its webhook floor server from rotting."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from tests.bench import bench_webhook as bench


@pytest.mark.parametrize("event_loop", ["asyncio", "uvloop"])
def test_the_benchmark_floor_server_starts_and_answers_over_tls(tmp_path: Path, event_loop: str) -> None:
    ca = bench.write_cert(tmp_path)
    port = bench.free_port()
    context = ssl.create_default_context(cadata=ca.decode())
    with bench.started(bench.floor_command(port, tmp_path, event_loop), tmp_path / "floor.log"):
        # Raises if nothing answers over TLS within its timeout (e.g. the floor failed to import).
        asyncio.run(bench.wait_ready(f"https://localhost:{port}/mutate", context))


def test_every_review_of_the_benchmark_mixes_is_admitted(tmp_path: Path) -> None:
    """The bodies wrk sends: eleven reviews per MPIJob gang, each answered 200 by the webhook."""
    from webhook.admission import Admitter
    from webhook.metrics import WebhookMetrics
    from webhook.mutate import MutationConfig

    gang = bench.weighted(bench.GANG_MIX)
    assert len(gang) == 16 * sum(bench.GANG_MIX.values())
    assert [kind for kind, _ in gang[:11]] == ["mpijob", "launcher-job", *["job-pod"] * 9]
    admitter = Admitter(MutationConfig(), WebhookMetrics())
    statuses = {(kind, admitter.admit(body, 0.0).status) for kind, body in gang}
    assert statuses == {("mpijob", 200), ("launcher-job", 200), ("job-pod", 200)}
    script = bench.wrk_script(tmp_path, bench.GANG_MIX)
    assert len(list(tmp_path.glob("body-*.json"))) == len(gang)
    assert "bodies[i + 1]" in script.read_text()
