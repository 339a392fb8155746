"""How big a workload's gang is, and how many members it may have at once, from its spec: the one
table the webhook sizes templates with and the controller re-sizes scaled workloads with."""

from __future__ import annotations

from typing import Any

from shared.kinds import KINDS, MPIJOB, RAYCLUSTER, STATEFULSET


def mpijob(workers: int, policy: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": workers}}}
    if policy:
        spec["launcherCreationPolicy"] = policy
    return {"spec": spec}


def test_a_launcher_created_after_its_workers_is_not_in_the_gang_but_may_join_it() -> None:
    kind = KINDS[MPIJOB]
    assert (kind.gang_size(mpijob(4)), kind.largest_gang(mpijob(4))) == (5, 5)
    waits = mpijob(4, "WaitForWorkersReady")
    assert (kind.gang_size(waits), kind.largest_gang(waits)) == (4, 5)


def test_a_raycluster_may_grow_to_its_groups_max_replicas() -> None:
    kind = KINDS[RAYCLUSTER]
    cluster = {
        "spec": {
            "workerGroupSpecs": [
                {"minReplicas": 1, "maxReplicas": 3, "numOfHosts": 2},
                {"minReplicas": 2, "maxReplicas": 2},
            ]
        }
    }
    assert (kind.gang_size(cluster), kind.largest_gang(cluster)) == (1 + 2 + 2, 1 + 6 + 2)
    unbounded = {"spec": {"workerGroupSpecs": [{"minReplicas": 1}]}}
    assert kind.largest_gang(unbounded) is None


def test_other_kinds_have_exactly_their_gang_size() -> None:
    kind = KINDS[STATEFULSET]
    assert kind.largest_gang({"spec": {"replicas": 3}}) == kind.gang_size({"spec": {"replicas": 3}}) == 3
