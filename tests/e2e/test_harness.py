"""The local control plane is real: gates, the real scheduler, kwok, the Job controller, Workloads."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.waiting import eventually, stays
from tests.localcluster import LocalCluster, procs
from tests.localcluster.versions import KubeRelease


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


def _gang_template(k8s: KubeRelease, name: str, min_count: int) -> tuple[str, dict[str, Any]]:
    """One gang podGroup of a Workload, in the release's own Workload API: (list field, entry)."""
    gang = {"gang": {"minCount": min_count}}
    if k8s.workload_api == "scheduling.k8s.io/v1alpha1":
        return "podGroups", {"name": name, "policy": gang}
    return "podGroupTemplates", {"name": name, "schedulingPolicy": gang}


def test_workload_api_is_served(cluster: LocalCluster, namespace: str) -> None:
    k8s = cluster.config.release
    resources = cluster.kubectl("api-resources", "--api-group=scheduling.k8s.io", "-o", "name").stdout.split()
    assert "workloads.scheduling.k8s.io" in resources
    field, template = _gang_template(k8s, "workers", 2)
    workload = {
        "apiVersion": k8s.workload_api,
        "kind": "Workload",
        "metadata": {"name": "train"},
        "spec": {field: [template]},
    }
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(workload))
    group, version = k8s.workload_api.split("/")
    got = _get(cluster, namespace, f"workloads.{version}.{group}", "train")
    assert got["apiVersion"] == k8s.workload_api
    stored = got["spec"][field][0]
    assert {key: stored[key] for key in template} == template


def _native_gang_member(name: str, podgroup: str) -> dict[str, Any]:
    pod = _pod(name, gpus=1, gated=False)
    pod["spec"]["schedulingGroup"] = {"podGroupName": podgroup}
    return pod


def _native_gang(cluster: LocalCluster, namespace: str, name: str, min_count: int) -> dict[str, Any]:
    return {
        "apiVersion": cluster.config.release.workload_api,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def _bound(cluster: LocalCluster, namespace: str, names: list[str]) -> list[bool]:
    return [bool(_get(cluster, namespace, "pod", n)["spec"].get("nodeName")) for n in names]


@pytest.mark.k8s_versions("1.36")
def test_the_schedulers_own_gang_plugin_is_off_where_it_needs_its_own_gate(
    cluster: LocalCluster, namespace: str
) -> None:
    """On 1.36 the plugin has an alpha gate of its own, left off: 2 members of a native PodGroup of 3
    are bound one by one, which the plugin (PreEnqueue until minCount pods exist) would not do."""
    assert not cluster.config.runs_gang_plugin
    members = [_native_gang_member(f"member-{i}", "three") for i in range(2)]
    cluster.apply_objects([_native_gang(cluster, namespace, "three", 3), *members], "-n", namespace)
    stored = _get(cluster, namespace, "pod", "member-0")
    assert stored["spec"]["schedulingGroup"] == {"podGroupName": "three"}
    eventually(
        lambda: all(_bound(cluster, namespace, ["member-0", "member-1"])),
        30,
        what="both members of the incomplete native gang bound by the stock scheduler",
    )


@pytest.mark.k8s_versions("1.37")
def test_the_schedulers_own_gang_plugin_runs_as_it_does_with_the_workload_api_on(
    cluster: LocalCluster, namespace: str
) -> None:
    """On 1.37 the plugin comes with GenericWorkload, so the cluster runs it (Phalanx is tested beside
    it): 2 members of a native PodGroup of 3 wait, and all three are bound once the third exists."""
    assert cluster.config.runs_gang_plugin
    members = [_native_gang_member(f"member-{i}", "three") for i in range(2)]
    cluster.apply_objects([_native_gang(cluster, namespace, "three", 3), *members], "-n", namespace)
    stays(
        lambda: not any(_bound(cluster, namespace, ["member-0", "member-1"])),
        3.0,
        what="two members of a native gang of three unbound",
    )
    cluster.apply_objects([_native_gang_member("member-2", "three")], "-n", namespace)
    eventually(
        lambda: all(_bound(cluster, namespace, [f"member-{i}" for i in range(3)])),
        30,
        what="the native gang bound whole once its third member exists",
    )


def test_version_and_loopback_only(cluster: LocalCluster) -> None:
    version = json.loads(cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert version["gitVersion"] == cluster.config.release.version
    pids = cluster.pids()
    assert {"kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok-controller"} <= set(
        pids
    )
    sockets = procs.listening_addresses(list(pids.values()))
    listening_pids = {pid for _, _, pid in sockets}
    assert pids["kube-apiserver"] in listening_pids and pids["etcd"] in listening_pids
    exposed = sorted((addr, port) for addr, port, _ in sockets if not procs.is_loopback(addr))
    assert not exposed, f"cluster processes listen beyond loopback: {exposed}"
