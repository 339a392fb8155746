"""Queues on the real control plane: borrowing idle GPUs, reclaim of the youngest borrowed gang
whole, limits of a queue and of its parent, and KAI's Queue with the KAI tutorial's pods.

Queues are cluster-wide: every test deletes its own at the end, so the other tests (whose
PodGroups name queues such as `research`) see no queue at all, as before.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import NodePool
from tests.e2e.kube import apply, events, gated, group_pods, n_bound, podgroup
from tests.e2e.test_compat import apply_manifest
from tests.e2e.test_controller import count_bound, members, pooled_job
from tests.e2e.waiting import eventually, stays
from tests.localcluster import LocalCluster
from tests.localcluster.phalanx import Phalanx

GPU = "nvidia.com/gpu"
QUEUES = "queues.scheduling.phalanx.io"
KAI_QUEUES = "queues.scheduling.run.ai"
COMPAT = Path(__file__).parent / "manifests" / "compat"

MakeQueue = Callable[..., str]


@pytest.fixture
def make_queue(cluster: LocalCluster) -> Iterator[MakeQueue]:
    """Creates Phalanx Queues with names private to the test; deletes them afterwards."""
    suffix = uuid.uuid4().hex[:6]
    made: list[str] = []

    def make(
        name: str, quota: int = 0, limit: int | None = None, weight: float = 1, parent: str | None = None
    ) -> str:
        full = f"{name}-{suffix}"
        gpu: dict[str, Any] = {"quota": str(quota), "overQuotaWeight": weight}
        if limit is not None:
            gpu["limit"] = str(limit)
        spec: dict[str, Any] = {"resources": {GPU: gpu}}
        if parent:
            spec["parent"] = parent
        body = {"apiVersion": "scheduling.phalanx.io/v1alpha1", "kind": "Queue", "metadata": {"name": full}}
        cluster.apply_objects([{**body, "spec": spec}])
        made.append(full)
        return full

    yield make
    if made:
        cluster.kubectl("delete", QUEUES, *made, "--wait=false", check=False)


def queue_status(cluster: LocalCluster, name: str, kind: str = QUEUES) -> dict[str, Any]:
    status: dict[str, Any] = cluster.kubectl_json("get", kind, name).get("status") or {}
    return status


def label_namespace(cluster: LocalCluster, namespace: str, queue: str) -> None:
    cluster.kubectl("label", "namespace", namespace, f"phalanx.io/queue={queue}", "--overwrite")


def status_of(cluster: LocalCluster, namespace: str, job: str) -> tuple[str, str]:
    status = podgroup(cluster, namespace, job).get("status") or {}
    return str(status.get("reason", "")), str(status.get("message", ""))


def metric(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.split()[-1])
    raise AssertionError(f"{name}{{{wanted}}} not exported")


def test_a_team_borrows_idle_gpus_and_gives_back_its_youngest_borrowed_gang_whole(
    cluster: LocalCluster,
    gang_namespace: str,
    other_gang_namespace: str,
    pool: NodePool,
    phalanx: Phalanx,
    make_queue: MakeQueue,
) -> None:
    pool.add(1, gpus=8)
    # Team A's weight 0: it gets nothing beyond its quota of 4 as a fair share, but borrows what
    # is idle. Team B is promised 4.
    team_a = make_queue("team-a", quota=4, weight=0)
    team_b = make_queue("team-b", quota=4)
    label_namespace(cluster, gang_namespace, team_a)
    for i in range(4):
        apply(cluster, gang_namespace, pooled_job(f"a{i}", pool).parallelism(2).build())
        eventually(lambda i=i: count_bound(cluster, gang_namespace, f"a{i}") == 2, 30, what=f"a{i} runs")
        time.sleep(1.1)  # distinct start times (seconds): a3 is the youngest
    eventually(
        lambda: queue_status(cluster, team_a).get("allocated", {}).get(GPU) == "8",
        20,
        what="team A holds 8 GPUs on a quota of 4",
    )
    table = cluster.kubectl("get", QUEUES, team_a).stdout
    assert "8/4/4" in table, table  # GPUs used / fair share (weight 0: its quota) / quota

    # Team B's gang links its queue the Kueue way, with a label on the Job.
    job_b = pooled_job("b", pool).parallelism(2).build()
    job_b["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": team_b}
    apply(cluster, other_gang_namespace, job_b)
    # The Job controller deletes a suspended Job's pods one API call at a time, so a3 may be seen
    # with one pod left for an instant; what must not happen is a3 *staying* partly running.
    deadline = time.monotonic() + 40
    partial_since: float | None = None
    while count_bound(cluster, other_gang_namespace, "b") < 2:
        now = time.monotonic()
        if count_bound(cluster, gang_namespace, "a3") in (0, 2):
            partial_since = None
        else:
            partial_since = partial_since or now
            assert now - partial_since < 5, "a3 left partly running for 5s"
        assert now < deadline, "team B's gang not admitted within 40s"
        time.sleep(0.2)
    for i in range(3):
        assert count_bound(cluster, gang_namespace, f"a{i}") == 2, f"a{i} (older) was touched"
    assert count_bound(cluster, gang_namespace, "a3") == 0
    assert all(gated(p) for p in members(cluster, gang_namespace, "a3"))  # recreated, waiting whole
    preempting = [
        e["message"] for e in events(cluster, other_gang_namespace, "b") if e["reason"] == "Preempting"
    ]
    assert any(
        f"reclaiming 2 pods from queues above their fair share: {gang_namespace}/a3" in m for m in preempting
    )
    assert metric(phalanx.metrics(), "phalanx_queue_reclaims_total", queue=team_a) >= 1
    eventually(
        lambda: queue_status(cluster, team_b).get("allocated", {}).get(GPU) == "2",
        20,
        what="team B's status shows its 2 GPUs",
    )


def test_limits_of_a_queue_and_of_its_parent_block_gangs_although_gpus_are_free(
    cluster: LocalCluster,
    gang_namespace: str,
    other_gang_namespace: str,
    pool: NodePool,
    make_queue: MakeQueue,
) -> None:
    pool.add(2, gpus=8)
    dept = make_queue("dept", limit=4)
    t1 = make_queue("t1", limit=3, parent=dept)
    t2 = make_queue("t2", parent=dept)
    label_namespace(cluster, gang_namespace, t1)
    label_namespace(cluster, other_gang_namespace, t2)

    apply(cluster, gang_namespace, pooled_job("first", pool).parallelism(3).build())
    eventually(lambda: count_bound(cluster, gang_namespace, "first") == 3, 30, what="3 GPUs in t1")
    apply(cluster, gang_namespace, pooled_job("second", pool).parallelism(1).build())
    apply(cluster, other_gang_namespace, pooled_job("sibling", pool).parallelism(2).build())
    eventually(
        lambda: (
            status_of(cluster, gang_namespace, "second")[0] == "QueueLimit"
            and status_of(cluster, other_gang_namespace, "sibling")[0] == "QueueLimit"
        ),
        20,
        what="both wait on a limit",
    )
    assert status_of(cluster, gang_namespace, "second")[1] == (
        f"queue {t1} is at its limit: 3 of 3 {GPU}; the gang needs 1"
    )
    assert status_of(cluster, other_gang_namespace, "sibling")[1] == (
        f"queue {dept} (parent of {t2}) would exceed its limit: 3 of 4 {GPU} in use; the gang needs 2"
    )
    stays(lambda: count_bound(cluster, other_gang_namespace, "sibling") == 0, 2.0, what="13 GPUs free, held")
    assert queue_status(cluster, t2).get("waitingGangs") == 1

    cluster.kubectl("delete", "job", "first", "-n", gang_namespace, "--wait=false")
    eventually(
        lambda: (
            count_bound(cluster, other_gang_namespace, "sibling") == 2
            and count_bound(cluster, gang_namespace, "second") == 1
        ),
        40,
        what="both admitted once t1's first gang is gone (1 + 2 of dept's 4)",
    )


def test_kai_queue_manifest_limits_the_kai_tutorial_pods(
    cluster: LocalCluster, gang_namespace: str, pool: NodePool
) -> None:
    docs = [d for d in yaml.safe_load_all((COMPAT / "kai-queues.yaml").read_text()) if d]
    cluster.apply_objects(docs)
    try:
        pool.add(1, gpus=8)
        apply_manifest(cluster, gang_namespace, "kai-elastic.yaml", pool)
        # minMember 2, maxMember 4, 4 pods: 8 GPUs are free, but queue research is limited to 3.
        eventually(lambda: n_bound(cluster, gang_namespace, "kai-elastic") == 3, 30, what="3 of 4 admitted")
        stays(
            lambda: n_bound(cluster, gang_namespace, "kai-elastic") == 3,
            2.0,
            what="the 4th held by the limit",
        )
        assert sum(1 for p in group_pods(cluster, gang_namespace, "kai-elastic") if gated(p)) == 1
        eventually(
            lambda: queue_status(cluster, "research", KAI_QUEUES).get("allocated", {}).get(GPU) == "3",
            20,
            what="KAI queue status",
        )
        table = cluster.kubectl("get", KAI_QUEUES).stdout
        assert "research" in table and "3/" in table, table
    finally:
        cluster.kubectl("delete", KAI_QUEUES, "research", "default", "--wait=false", check=False)
