"""Small read helpers over kubectl for e2e assertions."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

from tests.e2e.waiting import eventually, held
from tests.localcluster import LocalCluster
from tests.localcluster.phalanx import Phalanx

GATE = "phalanx.io/gang"
GROUP_LABEL = "phalanx.io/pod-group"


def apply(cluster: LocalCluster, namespace: str, obj: dict[str, Any]) -> str:
    """Server-side apply, as `kubectl apply --server-side` would; returns kubectl's stderr (warnings)."""
    result = cluster.kubectl(
        "apply", "--server-side", "--field-manager=e2e", "-n", namespace, "-f", "-", input=json.dumps(obj)
    )
    return result.stderr


def pods(cluster: LocalCluster, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
    args = ["get", "pods", "-n", namespace]
    if selector:
        args += ["-l", selector]
    items: list[dict[str, Any]] = cluster.kubectl_json(*args)["items"]
    return items


def gated(pod: dict[str, Any]) -> bool:
    return any(g.get("name") == GATE for g in pod["spec"].get("schedulingGates") or [])


def bound(pod: dict[str, Any]) -> bool:
    return bool(pod["spec"].get("nodeName"))


def podgroup(
    cluster: LocalCluster, namespace: str, name: str, group: str = "scheduling.sigs.k8s.io"
) -> dict[str, Any]:
    result: dict[str, Any] = cluster.kubectl_json("get", f"podgroups.{group}", name, "-n", namespace)
    return result


def events(cluster: LocalCluster, namespace: str, name: str) -> list[dict[str, Any]]:
    items = cluster.kubectl_json("get", "events", "-n", namespace)["items"]
    return [e for e in items if e["involvedObject"].get("name") == name]


def set_pod_quota(cluster: LocalCluster, namespace: str, name: str, pods: int) -> None:
    """A ResourceQuota on the number of pods, applied and waited for until it is in force."""
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name},
        "spec": {"hard": {"pods": str(pods)}},
    }
    apply(cluster, namespace, quota)
    eventually(
        lambda: (
            cluster.kubectl_json("get", "resourcequota", name, "-n", namespace)
            .get("status", {})
            .get("hard", {})
            .get("pods")
            == str(pods)
        ),
        20,
        what=f"quota of {pods} pods in force",
    )


def group_pods(cluster: LocalCluster, namespace: str, group: str) -> list[dict[str, Any]]:
    """The gang's members (by the canonical label) that are not being deleted."""
    return [
        p
        for p in pods(cluster, namespace, f"{GROUP_LABEL}={group}")
        if not p["metadata"].get("deletionTimestamp")
    ]


def n_bound(cluster: LocalCluster, namespace: str, group: str) -> int:
    return sum(1 for p in group_pods(cluster, namespace, group) if bound(p))


# The controller re-plans every gang whenever a PriorityClass changes: touching this one (value 0,
# never used by a pod) is how a test makes it plan now instead of at its next resync.
REPLAN_CLASS = "e2e-phalanx-replan"


def replan(cluster: LocalCluster) -> None:
    tick = {"e2e.phalanx.io/tick": uuid.uuid4().hex}
    body = {"metadata": {"name": REPLAN_CLASS, "annotations": tick}, "value": 0}
    cluster.apply_objects([{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", **body}])


def held_through_a_pass(
    cluster: LocalCluster, phalanx: Phalanx, probe: Callable[[], bool], what: str
) -> None:
    """``probe`` holds until every gang was re-planned after this call (see ``waiting.held``)."""
    held(probe, phalanx.planning_passes, lambda: replan(cluster), what=what)
