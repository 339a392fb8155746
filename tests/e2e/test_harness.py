"""The local control plane is real: gates, the real scheduler, kwok, the Job controller, Workloads."""

from __future__ import annotations

import json
from typing import Any

from tests.e2e.waiting import eventually, stays
from tests.localcluster import LocalCluster, procs


def _pod(name: str, gpus: int, gated: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ]
    }
    if gated:
        spec["schedulingGates"] = [{"name": "example.com/hold"}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _get(cluster: LocalCluster, ns: str, kind: str, name: str) -> dict[str, Any]:
    result: dict[str, Any] = cluster.kubectl_json("get", kind, name, "-n", ns)
    return result


def _condition(pod: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in pod.get("status", {}).get("conditions", []):
        if cond["type"] == kind:
            return dict(cond)
    return None


def test_gated_pod_waits_until_the_gate_is_removed(cluster: LocalCluster, namespace: str) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(_pod("gated", 2, gated=True)))

    def scheduling_gated() -> bool:
        cond = _condition(_get(cluster, namespace, "pod", "gated"), "PodScheduled")
        return bool(cond and cond.get("reason") == "SchedulingGated")

    eventually(scheduling_gated, 20, what="PodScheduled=False/SchedulingGated")
    # Nodes have plenty of room, yet the real scheduler must leave a gated pod alone.
    stays(
        lambda: not _get(cluster, namespace, "pod", "gated")["spec"].get("nodeName"),
        2.0,
        what="gated pod unbound",
    )

    cluster.kubectl(
        "patch",
        "pod",
        "gated",
        "-n",
        namespace,
        "--type=json",
        "-p",
        json.dumps([{"op": "remove", "path": "/spec/schedulingGates"}]),
    )
    pod = eventually(
        lambda: (p := _get(cluster, namespace, "pod", "gated"))["status"].get("phase") == "Running" and p,
        30,
        what="pod Running after its gate is removed",
    )
    node = cluster.kubectl_json("get", "node", pod["spec"]["nodeName"])
    assert int(node["status"]["allocatable"]["nvidia.com/gpu"]) >= 2


def test_pod_larger_than_any_node_is_unschedulable(cluster: LocalCluster, namespace: str) -> None:
    too_big = cluster.config.fleet.gpus_per_node + 1
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(_pod("huge", too_big, gated=False)))

    def unschedulable() -> bool:
        cond = _condition(_get(cluster, namespace, "pod", "huge"), "PodScheduled")
        return bool(cond and cond["status"] == "False" and cond.get("reason") == "Unschedulable")

    eventually(unschedulable, 30, what="PodScheduled=False/Unschedulable")
    assert not _get(cluster, namespace, "pod", "huge")["spec"].get("nodeName")


def test_job_controller_creates_pods(cluster: LocalCluster, namespace: str) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "three"},
        "spec": {
            "parallelism": 3,
            "completions": 3,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
                }
            },
        },
    }
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(job))
    pods = eventually(
        lambda: (
            (items := cluster.kubectl_json("get", "pods", "-n", namespace, "-l", "job-name=three")["items"])
            and len(items) == 3
            and items
        ),
        30,
        what="3 pods from the Job controller",
    )
    assert {p["metadata"]["ownerReferences"][0]["kind"] for p in pods} == {"Job"}


def test_workload_api_is_served(cluster: LocalCluster, namespace: str) -> None:
    resources = cluster.kubectl("api-resources", "--api-group=scheduling.k8s.io", "-o", "name").stdout.split()
    assert "workloads.scheduling.k8s.io" in resources
    workload = {
        "apiVersion": "scheduling.k8s.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "train"},
        "spec": {"podGroups": [{"name": "workers", "policy": {"gang": {"minCount": 2}}}]},
    }
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(workload))
    got = _get(cluster, namespace, "workload.scheduling.k8s.io", "train")
    assert got["spec"]["podGroups"][0]["policy"]["gang"]["minCount"] == 2


def test_version_and_loopback_only(cluster: LocalCluster) -> None:
    version = json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert version["gitVersion"].startswith("v1.35.")
    pids = cluster.pids()
    assert {"kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok-controller"} <= set(
        pids
    )
    sockets = procs.listening_addresses(list(pids.values()))
    listening_pids = {pid for _, _, pid in sockets}
    assert pids["kube-apiserver"] in listening_pids and pids["etcd"] in listening_pids
    exposed = sorted((addr, port) for addr, port, _ in sockets if not procs.is_loopback(addr))
    assert not exposed, f"cluster processes listen beyond loopback: {exposed}"
