"""The floor of bench-peers: the same Job with no gang scheduler, the reference for a gang's start (pure)."""

from __future__ import annotations

from pathlib import Path

from tests.bench.peers.__main__ import VARIANTS
from tests.bench.peers.report import LOWER, Metric, table
from tests.bench.peers.scenarios import BUILDERS, scenario
from tests.localcluster.cluster import ClusterConfig, LocalCluster
from tests.localcluster.peers import BUILT_IN, SYSTEMS, make_system
from tests.localcluster.versions import release


def test_the_floor_is_the_plain_job_on_the_stock_scheduler_without_its_gang_plugin() -> None:
    cluster = LocalCluster(ClusterConfig(workdir=Path("/nonexistent"), release=release("1.37")))
    floor = make_system("floor", cluster, None)
    floor.up()  # starts nothing
    assert floor.pids() == {}
    (body,) = floor.gang("bench", "g", 1000, 1, "5s")
    (phalanx_body,) = make_system("phalanx", cluster, None).gang("bench", "g", 1000, 1, "5s")
    assert body == phalanx_body  # the same Job: only the namespace's opt-in differs
    assert SYSTEMS["floor"].cluster_settings == {"gang_plugin": False}
    assert "floor" in BUILT_IN


def test_the_floor_is_never_the_best_peer_and_gets_its_own_ratio() -> None:
    results = {"phalanx": {"w": 6.0}, "kueue": {"w": 4.0}, "floor": {"w": 3.0}}
    text = table("t", results, (Metric("w", "apply → all bound", LOWER),))
    assert "| metric | phalanx | kueue | floor | Phalanx ÷ best peer | Phalanx ÷ floor |" in text
    assert "| 6 | 4 | 3 | 1.50 | 2.00 |" in text


def test_the_huge_gangs_have_a_node_per_pod_and_run_beside_the_floor() -> None:
    for name, pods in (("large-1k", 1000), ("large-5k", 5000)):
        full = scenario(name, full=True)
        (arrival,) = full.arrivals
        assert arrival.size == pods and full.fleet.gpu_nodes == pods and full.until == "placed"
        assert "floor" in VARIANTS[name]
        small = BUILDERS[name](False)
        assert small.arrivals[0].size < pods
