"""How bench-peers writes a gang for the stock kube-scheduler's own gang scheduling (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.bench.peers.report import LOWER, Metric, table
from tests.localcluster.cluster import ClusterConfig, LocalCluster
from tests.localcluster.peers import GANG_LABEL, SYSTEMS, make_system
from tests.localcluster.versions import release


def native(version: str) -> LocalCluster:
    return LocalCluster(ClusterConfig(workdir=Path("/nonexistent"), release=release(version)))


@pytest.mark.parametrize("version", ["1.36", "1.37"])
def test_gang_is_a_native_podgroup_then_a_job_whose_template_names_it(version: str) -> None:
    cluster = native(version)
    group, body = make_system("native", cluster, None).gang("bench", "g", 24, 1, "5s")
    assert group["apiVersion"] == cluster.config.release.workload_api
    assert group["kind"] == "PodGroup"
    assert group["spec"] == {"schedulingPolicy": {"gang": {"minCount": 24}}}
    assert body["kind"] == "Job" and body["spec"]["parallelism"] == 24
    template = body["spec"]["template"]
    assert template["spec"]["schedulingGroup"] == {"podGroupName": "g"}
    assert "schedulerName" not in template["spec"]  # the stock scheduler
    assert template["metadata"]["labels"][GANG_LABEL] == "g"


def test_the_native_system_runs_on_a_cluster_with_the_schedulers_gang_plugin_and_not_on_1_35() -> None:
    assert SYSTEMS["native"].cluster_settings == {"gang_plugin": True}
    assert SYSTEMS["phalanx"].cluster_settings == {}
    with pytest.raises(RuntimeError, match=r"1\.36 or later"):
        make_system("native", native("1.35"), None).up()


def test_the_table_answers_phalanx_against_the_native_gangs_beside_the_best_peer() -> None:
    results = {"phalanx": {"w": 2.0}, "kueue": {"w": 1.0}, "native": {"w": 8.0}}
    text = table("t", results, (Metric("w", "wait", LOWER),))
    assert "| metric | phalanx | kueue | native | Phalanx ÷ best peer | Phalanx ÷ native |" in text
    assert "| wait (lower is better) | 2 | 1 | 8 | 2.00 | 0.25 |" in text
