"""Gangs that do not fit ask the real cluster-autoscaler for their nodes, whole.

One control plane for this file, with no GPU node of its own, the cluster-autoscaler beside it (its
kwok provider grows a node group of 0..4 nodes × 8 GPUs) and Phalanx's controller started with
--provisioning-requests best-effort-atomic. Gated pods are invisible to the autoscaler: without the
ProvisioningRequests Phalanx writes, none of these gangs would ever get a node.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests import builders
from tests.conftest import _namespace
from tests.e2e.kube import apply, bound, events, gated, podgroup, pods
from tests.e2e.side_cluster import side_cluster
from tests.e2e.waiting import eventually, stays
from tests.localcluster import LocalCluster
from tests.localcluster.autoscaler import NODE_GROUP_LABEL, Autoscaler, NodeGroup
from tests.localcluster.cluster import ClusterConfig
from tests.localcluster.fleet import FleetSpec
from tests.localcluster.phalanx import PhalanxOptions

GROUP = NodeGroup(name="gpu-pool", min_size=0, max_size=4, gpus=8)
REQUESTS = "provisioningrequests.autoscaling.x-k8s.io"
QUEUES = "queues.scheduling.phalanx.io"
CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS = "autoscaling.x-k8s.io/provisioning-class-name"


@pytest.fixture(scope="module")
def scaled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Autoscaler]]:
    config = ClusterConfig(
        name="phalanx-autoscaled",
        workdir=tmp_path_factory.mktemp("autoscaled-cluster"),
        fleet=FleetSpec(gpu_nodes=0, cpu_nodes=1),
    )
    options = PhalanxOptions()
    options.controller_env["PHALANX_CONTROLLER_PROVISIONING_REQUESTS"] = "best-effort-atomic"
    options.controller_env["PHALANX_CONTROLLER_PROVISIONING_RETRY_SECONDS"] = "10"
    started: list[Autoscaler] = []

    def beside(cluster: LocalCluster) -> Callable[[], None]:
        autoscaler = Autoscaler(cluster)
        started.append(autoscaler)
        autoscaler.ensure(GROUP)
        return autoscaler.down

    with side_cluster(config, options, beside) as (cluster, _):
        yield cluster, started[0]


@pytest.fixture
def ns(scaled: tuple[LocalCluster, Autoscaler]) -> Iterator[str]:
    cluster, autoscaler = scaled
    # Every test starts from an empty node group: the previous test's nodes scaled down.
    eventually(lambda: not autoscaler.nodes(), 180, 1.0, what="the node group back at 0 nodes")
    yield from _namespace(cluster, "scaled", {"phalanx.io/gang-scheduling": "enabled"})


def gpu_job(name: str, pods_: int, gpus: int = 8) -> dict[str, Any]:
    """A Job of ``pods_`` pods × ``gpus`` GPUs that runs on the node group's nodes only."""
    return (
        builders.job(name)
        .gpus(gpus)
        .parallelism(pods_)
        .node_selector({NODE_GROUP_LABEL: GROUP.name})
        .run_for("600s")
        .build()
    )


def requests_of(cluster: LocalCluster, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cluster.kubectl_json("get", REQUESTS, "-n", namespace)["items"]
    return [r for r in items if not r["metadata"].get("deletionTimestamp")]


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    found = next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), None)
    return found or {}


def members(cluster: LocalCluster, namespace: str, job: str) -> list[dict[str, Any]]:
    return pods(cluster, namespace, f"job-name={job}")


def running_on(cluster: LocalCluster, namespace: str, job: str) -> set[str]:
    """The nodes of the job's members, once all are bound (else empty)."""
    found = members(cluster, namespace, job)
    if not found or not all(bound(p) for p in found):
        return set()
    return {p["spec"]["nodeName"] for p in found}


def test_a_gang_that_does_not_fit_gets_its_nodes_from_the_autoscaler_and_starts_whole(
    scaled: tuple[LocalCluster, Autoscaler], ns: str
) -> None:
    cluster, autoscaler = scaled
    apply(cluster, ns, gpu_job("train", 2))  # 16 GPUs: two nodes of the group

    def asked() -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The request and its pod set's template, read together: both go once the gang is bound."""
        found = requests_of(cluster, ns)
        if len(found) != 1:  # one request for the gang, never two
            return None
        name = found[0]["spec"]["podSets"][0]["podTemplateRef"]["name"]
        return found[0], cluster.kubectl_json("get", "podtemplate", name, "-n", ns)

    request, template = eventually(asked, 60, what="a ProvisioningRequest and its PodTemplate")
    assert request["spec"]["provisioningClassName"] == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    assert [s["count"] for s in request["spec"]["podSets"]] == [2]
    owner = request["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"]) == ("PodGroup", "train")
    spec = template["template"]["spec"]
    assert spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "8"
    assert spec["nodeSelector"] == {NODE_GROUP_LABEL: GROUP.name}
    assert "schedulingGates" not in spec

    nodes = eventually(lambda: running_on(cluster, ns, "train"), 180, 1.0, what="the gang bound on new nodes")
    assert len(nodes) == 2 and set(nodes) <= set(autoscaler.nodes(GROUP.name))
    assert len(autoscaler.nodes(GROUP.name)) == 2
    assert len(requests_of(cluster, ns)) <= 1
    name = request["metadata"]["name"]
    for pod in members(cluster, ns, "train"):
        annotations = pod["metadata"]["annotations"]
        assert annotations[CONSUME] == name
        assert annotations[CLASS] == "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    reasons = {e["reason"] for e in events(cluster, ns, "train")}
    assert {"ProvisioningRequested", "CapacityProvisioned", "Admitted"} <= reasons
    # The booking is used: the request goes once the gang is bound.
    eventually(lambda: not requests_of(cluster, ns), 60, what="the request deleted once the gang runs")
    cluster.kubectl("delete", "job", "train", "-n", ns, "--wait=false")


def test_a_gang_bigger_than_the_node_group_gets_no_node_and_says_so_then_deleting_it_deletes_the_request(
    scaled: tuple[LocalCluster, Autoscaler], ns: str
) -> None:
    cluster, autoscaler = scaled
    apply(cluster, ns, gpu_job("huge", 6))  # 48 GPUs: more than 4 nodes × 8

    def not_found() -> bool:
        found = requests_of(cluster, ns)
        return bool(found) and condition(found[0], "Provisioned").get("status") == "False"

    eventually(not_found, 120, 1.0, what="the autoscaler answering it found no room")
    said = eventually(
        lambda: (
            (c := condition(podgroup(cluster, ns, "huge"), "CapacityRequested")).get("reason")
            == "CapacityNotFound"
            and c
        ),
        60,
        what="the PodGroup saying so",
    )
    assert said["status"] == "True"
    assert "found no room for the whole gang" in said["message"]
    assert "found no room" in podgroup(cluster, ns, "huge")["status"]["message"]
    assert "ProvisioningFailed" in {e["reason"] for e in events(cluster, ns, "huge")}
    stays(lambda: not autoscaler.nodes(), 10.0, 1.0, what="no node added")
    assert all(gated(p) for p in members(cluster, ns, "huge"))

    # Deleted while its request is pending: the request goes with it.
    cluster.kubectl("delete", "job", "huge", "-n", ns, "--wait=false")
    eventually(lambda: not requests_of(cluster, ns), 60, what="the request deleted with the gang")


def test_two_gangs_waiting_at_once_get_a_request_each_and_run_on_their_own_booked_nodes(
    scaled: tuple[LocalCluster, Autoscaler], ns: str
) -> None:
    cluster, autoscaler = scaled
    apply(cluster, ns, gpu_job("left", 2))
    apply(cluster, ns, gpu_job("right", 2))

    # Read once: a gang bound on its nodes deletes its request, maybe before a second look.
    def two() -> list[dict[str, Any]] | None:
        found = requests_of(cluster, ns)
        return found if len(found) == 2 else None

    both = eventually(two, 60, what="two ProvisioningRequests")
    owners = sorted(r["metadata"]["ownerReferences"][0]["name"] for r in both)
    assert owners == ["left", "right"]
    left = eventually(lambda: running_on(cluster, ns, "left"), 240, 1.0, what="left bound")
    right = eventually(lambda: running_on(cluster, ns, "right"), 240, 1.0, what="right bound")
    assert len(left) == 2 and len(right) == 2 and not left & right
    assert left | right == set(autoscaler.nodes(GROUP.name))
    consumed = {
        job: {p["metadata"]["annotations"].get(CONSUME) for p in members(cluster, ns, job)}
        for job in ("left", "right")
    }
    assert len(consumed["left"]) == 1 and len(consumed["right"]) == 1
    assert consumed["left"] != consumed["right"]
    cluster.kubectl("delete", "job", "left", "right", "-n", ns, "--wait=false")


def test_a_gang_held_by_its_queue_limit_asks_for_nothing(
    scaled: tuple[LocalCluster, Autoscaler], ns: str
) -> None:
    cluster, autoscaler = scaled
    queue = f"capped-{uuid.uuid4().hex[:6]}"
    body = {
        "apiVersion": "scheduling.phalanx.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": queue},
        "spec": {"resources": {"nvidia.com/gpu": {"quota": "0", "limit": "8"}}},
    }
    cluster.apply_objects([body])
    try:
        cluster.kubectl("label", "namespace", ns, f"phalanx.io/queue={queue}", "--overwrite")
        apply(cluster, ns, gpu_job("capped", 2))  # 16 GPUs; the queue allows 8
        eventually(
            lambda: (podgroup(cluster, ns, "capped").get("status") or {}).get("reason") == "QueueLimit",
            60,
            what="the gang held by its queue's limit",
        )
        stays(
            lambda: not requests_of(cluster, ns) and not autoscaler.nodes(), 10.0, 1.0, what="nothing asked"
        )
        assert not condition(podgroup(cluster, ns, "capped"), "CapacityRequested")
        # The limit raised, the same gang waits for capacity only: now it asks.
        raised = {"spec": {"resources": {"nvidia.com/gpu": {"quota": "0", "limit": "16"}}}}
        cluster.kubectl("patch", QUEUES, queue, "--type=merge", "-p", json.dumps(raised))
        eventually(lambda: requests_of(cluster, ns), 60, what="a request once the limit allows the gang")
        eventually(lambda: running_on(cluster, ns, "capped"), 180, 1.0, what="the gang bound on new nodes")
    finally:
        cluster.kubectl("delete", "job", "capped", "-n", ns, "--wait=false", check=False)
        cluster.kubectl("delete", QUEUES, queue, "--wait=false", check=False)
