"""Phalanx owns the Admitted and Degraded conditions of a PodGroup and no others: a condition a user
(or another controller) wrote survives every status write."""

from __future__ import annotations

from typing import Any

from controller.api import resources as r
from controller.pipeline.status import merge_conditions
from tests.component.controller.harness import NS, Harness, gang, gates_of, podgroup

USERS = {
    "type": "DataStaged",
    "status": "True",
    "reason": "Prefetched",
    "message": "the dataset is on the nodes' local disks",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


def conditions(h: Harness) -> list[dict[str, Any]]:
    return list(h.pg("g")["status"]["conditions"])  # type: ignore[index]


async def test_a_users_condition_survives_the_controllers_status_writes() -> None:
    h = Harness()
    h.cluster(nodes=2, gpus=4)
    group = podgroup("g", min_member=4)
    group["status"] = {"conditions": [USERS]}
    h.kube.seed(r.PODGROUPS, group)
    h.kube.seed(r.PODS, *gang(3, "g", min_member=4))  # 3 of 4 members: waits

    await h.step()
    assert [c["type"] for c in conditions(h)] == ["DataStaged", "Admitted"]
    assert conditions(h)[0] == USERS
    assert conditions(h)[1]["status"] == "False"

    # Written again when the gang is admitted: still there, unchanged, in its place.
    h.kube.seed(r.PODS, *gang(4, "g", min_member=4)[3:])
    await h.step()
    assert all(gates_of(h.pod(f"g-{i}")) == [] for i in range(4))
    assert conditions(h)[0] == USERS
    assert conditions(h)[1]["status"] == "True"


async def test_a_condition_written_between_passes_is_kept() -> None:
    h = Harness()
    h.cluster(nodes=2, gpus=4)
    h.kube.seed(r.PODGROUPS, podgroup("g", min_member=4))
    h.kube.seed(r.PODS, *gang(3, "g", min_member=4))
    await h.step()
    h.kube.mutate(r.PODGROUPS, NS, "g", lambda pg: pg["status"]["conditions"].append(USERS))
    h.kube.seed(r.PODS, *gang(4, "g", min_member=4)[3:])
    await h.step()
    assert [c["type"] for c in conditions(h)] == ["Admitted", "DataStaged"]
    assert conditions(h)[0]["status"] == "True"


def test_merge_replaces_its_own_types_in_place_and_keeps_every_other_condition() -> None:
    ours = [{"type": "Admitted", "status": "True"}, {"type": "Degraded", "status": "False"}]
    current = [{"type": "A"}, {"type": "Admitted", "status": "False"}, {"type": "B"}, "garbage"]
    assert merge_conditions(current, ours) == [
        {"type": "A"},
        {"type": "Admitted", "status": "True"},
        {"type": "B"},
        {"type": "Degraded", "status": "False"},
    ]
    assert merge_conditions(None, ours) == ours
