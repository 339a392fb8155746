"""Re-queueing a gang whole without harming its Job, gangs that fall apart while running, and a
restarted leader taking its own lease back at once."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from tests import builders
from tests.conftest import NodePool
from tests.e2e.kube import apply, bound, events, gated, podgroup
from tests.e2e.test_controller import count_bound, members, pooled_job
from tests.e2e.waiting import eventually
from tests.localcluster import LocalCluster
from tests.localcluster.phalanx import Phalanx

LEASE = ("get", "lease", "phalanx-controller", "-n", "phalanx-system")


@pytest.fixture
def degraded_timeout(phalanx: Phalanx) -> Iterator[None]:
    """The controller re-queues a degraded gang after 5 s instead of 300 s."""
    phalanx.stop_controller()
    phalanx.start_controller({"PHALANX_CONTROLLER_DEGRADED_GANG_TIMEOUT_SECONDS": "5"})
    yield
    phalanx.stop_controller()
    phalanx.start_controller()


def job(cluster: LocalCluster, ns: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = cluster.kubectl_json("get", "job", name, "-n", ns)
    return result


def reasons(cluster: LocalCluster, ns: str, name: str) -> list[str]:
    return [e["reason"] for e in events(cluster, ns, name)]


def test_a_rollback_suspends_the_job_instead_of_deleting_its_pods(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    nodes = pool.add(2, gpus=8)
    # Two members of 8 GPUs: one per node. The scheduler refuses the one pinned to the node whose
    # host port is taken; Phalanx's plan does not model host ports, so it admits the gang and the
    # bind timeout (20 s here) rolls it back.
    port = {"containerPort": 7000, "hostPort": 7000}
    blocker = (
        builders.pod("port-holder").node_selector({"kubernetes.io/hostname": pool.hostname(nodes[0])}).build()
    )
    blocker["spec"]["containers"][0]["ports"] = [port]
    apply(cluster, gang_namespace, blocker)
    eventually(lambda: bound(cluster.kubectl_json("get", "pod", "port-holder", "-n", gang_namespace)), 20)
    manifest = pooled_job("ported", pool).parallelism(2).gpus(8).build()
    manifest["spec"]["template"]["spec"]["containers"][0]["ports"] = [port]
    apply(cluster, gang_namespace, manifest)
    eventually(
        lambda: "RolledBack" in reasons(cluster, gang_namespace, "ported"), 60, what="rolled back on timeout"
    )
    rolled = next(e for e in events(cluster, gang_namespace, "ported") if e["reason"] == "RolledBack")
    assert "suspended 1 Jobs until their pods are gone" in rolled["message"]
    # The Job lost nothing: no failure counted against its backoffLimit, and it runs again.
    eventually(
        lambda: job(cluster, gang_namespace, "ported")["spec"].get("suspend") is False, 30, what="resumed"
    )
    assert int(job(cluster, gang_namespace, "ported").get("status", {}).get("failed") or 0) == 0
    assert "phalanx.io/requeued" not in (
        job(cluster, gang_namespace, "ported")["metadata"].get("labels") or {}
    )

    cluster.kubectl("delete", "pod", "port-holder", "-n", gang_namespace, "--wait=false")
    eventually(lambda: count_bound(cluster, gang_namespace, "ported") == 2, 60, what="admitted again, whole")
    assert int(job(cluster, gang_namespace, "ported").get("status", {}).get("failed") or 0) == 0


@pytest.mark.usefixtures("degraded_timeout")
def test_a_running_gang_that_falls_apart_is_reported_and_requeued_whole(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    nodes = pool.add(2, gpus=4)
    apply(cluster, gang_namespace, pooled_job("pair", pool).parallelism(2).gpus(4).build())
    eventually(lambda: count_bound(cluster, gang_namespace, "pair") == 2, 30, what="the pair runs")
    lost = next(p for p in members(cluster, gang_namespace, "pair") if p["spec"]["nodeName"] == nodes[0])
    # The node is drained: its member goes and its replacement has nowhere to go.
    cluster.kubectl("cordon", nodes[0])
    cluster.kubectl("delete", "pod", lost["metadata"]["name"], "-n", gang_namespace, "--wait=false")

    def status() -> dict[str, Any]:
        return dict(podgroup(cluster, gang_namespace, "pair").get("status") or {})

    def degraded_status() -> dict[str, Any] | None:
        now = status()  # one read: the status may move on between two
        return now if now.get("reason") == "Degraded" else None

    degraded = eventually(degraded_status, 20, what="Degraded")
    assert degraded["message"].startswith("1 of 2 members running since ")
    condition = next(c for c in degraded["conditions"] if c["type"] == "Degraded")
    assert condition["status"] == "True"
    eventually(
        lambda: "RolledBack" in reasons(cluster, gang_namespace, "pair"), 30, what="re-queued after 5 s"
    )
    rolled = next(e for e in events(cluster, gang_namespace, "pair") if e["reason"] == "RolledBack")
    assert "ran with 1 of 2 members" in rolled["message"]
    # Whole again, waiting: no member runs alone on the one schedulable node.
    eventually(
        lambda: (
            len(members(cluster, gang_namespace, "pair")) == 2
            and all(gated(p) for p in members(cluster, gang_namespace, "pair"))
        ),
        40,
        what="the Job's pods recreated, gated",
    )
    cluster.kubectl("uncordon", nodes[0])
    eventually(lambda: count_bound(cluster, gang_namespace, "pair") == 2, 30, what="runs again, whole")


def _renewed(lease: dict[str, Any]) -> float:
    return datetime.fromisoformat(lease["spec"]["renewTime"].replace("Z", "+00:00")).timestamp()


def test_a_restarted_leader_takes_its_own_lease_back_at_once(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool, phalanx: Phalanx
) -> None:
    pool.add(1, gpus=8)
    before = cluster.kubectl_json(*LEASE)
    phalanx.stop_controller(kill=True)  # crashes without releasing its lease
    killed = time.time()
    phalanx.start_controller()  # the same replica (same identity) comes back
    after = eventually(
        lambda: (lease := cluster.kubectl_json(*LEASE)) and _renewed(lease) > killed and lease,
        20,
        what="renewed",
    )
    # Its own lease taken back, not a new leader's acquired after expiry (which a new identity per
    # process meant): same holder, no transition. How fast: tests/bench/bench_failover.py.
    assert after["spec"]["holderIdentity"] == before["spec"]["holderIdentity"]
    assert after["spec"].get("leaseTransitions") == before["spec"].get("leaseTransitions")
    apply(cluster, gang_namespace, pooled_job("after-restart", pool).parallelism(4).build())
    eventually(lambda: count_bound(cluster, gang_namespace, "after-restart") == 4, 30, what="admitting again")
