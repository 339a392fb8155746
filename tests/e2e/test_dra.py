"""Gangs whose GPUs are DRA devices (resource.k8s.io/v1), on a control plane whose GPUs exist only
as ResourceSlice devices: the real kube-scheduler allocates the claims, KWOK fakes the kubelet.
One cluster for the file; each test adds fake nodes (and their slices) of its own."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests import builders
from tests.conftest import _namespace
from tests.e2e.kube import apply, bound, gated, held_through_a_pass, podgroup, pods
from tests.e2e.side_cluster import side_cluster
from tests.e2e.test_kubectl_phalanx import as_json
from tests.e2e.waiting import eventually
from tests.localcluster import LocalCluster
from tests.localcluster.cluster import ClusterConfig
from tests.localcluster.fleet import (
    DRA_DEVICE_CLASS,
    DRA_DRIVER,
    DRA_EXTENDED_RESOURCE,
    GPUS_DRA,
    FleetSpec,
    node_manifests,
    resource_slice_manifest,
)
from tests.localcluster.phalanx import Phalanx

POOL_LABEL = "e2e.phalanx.io/pool"


@pytest.fixture(scope="module")
def dra_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Phalanx]]:
    config = ClusterConfig(
        name="phalanx-dra",
        workdir=tmp_path_factory.mktemp("dra-cluster"),
        fleet=FleetSpec(gpu_nodes=0, cpu_nodes=1, gpus_as=GPUS_DRA),
    )
    with side_cluster(config) as both:
        yield both


class DevicePool:
    """Fake nodes whose GPUs are only devices of one node-local ResourceSlice each, for one test."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.name = f"dra-{uuid.uuid4().hex[:6]}"
        self.nodes: list[str] = []
        self.slices: list[str] = []

    @property
    def selector(self) -> dict[str, str]:
        return {POOL_LABEL: self.name}

    def add(self, count: int, gpus: int) -> list[str]:
        spec = FleetSpec(gpu_nodes=count, gpus_per_node=gpus, cpu_nodes=0, gpus_as=GPUS_DRA)
        nodes = node_manifests(spec)
        start = len(self.nodes)
        for i, node in enumerate(nodes):
            node["metadata"]["name"] = name = f"{self.name}-{start + i}"
            node["metadata"]["labels"]["kubernetes.io/hostname"] = name
            node["metadata"]["labels"][POOL_LABEL] = self.name
            self.nodes.append(name)
        self.cluster.apply_objects(nodes)
        if gpus:  # nodes without devices of their own publish no slice
            self.cluster.apply_objects([resource_slice_manifest(spec, name) for name in self.nodes[start:]])
            self.slices += [f"{n}-{DRA_DRIVER}" for n in self.nodes[start:]]
        for name in self.nodes[start:]:
            self.cluster.kubectl("wait", "--for=condition=Ready", f"node/{name}", "--timeout=30s")
        return self.nodes[start:]

    def add_shared(self, gpus: int) -> str:
        """A slice of network-attached devices every node of this pool reaches (its nodeSelector
        matches the pool's label); returns the devices' pool name."""
        name = f"{self.name}-shared"
        spec = FleetSpec(gpu_nodes=1, gpus_per_node=gpus, cpu_nodes=0, gpus_as=GPUS_DRA)
        body = resource_slice_manifest(spec, name)
        del body["spec"]["nodeName"]
        term = {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": [self.name]}]}
        body["spec"]["nodeSelector"] = {"nodeSelectorTerms": [term]}
        self.cluster.apply_objects([body])
        self.slices.append(body["metadata"]["name"])
        return name

    def delete(self) -> None:
        if self.slices:
            self.cluster.kubectl("delete", "resourceslice", *self.slices, "--wait=false", check=False)
        if self.nodes:
            self.cluster.kubectl("delete", "node", *self.nodes, "--wait=false", check=False)


@pytest.fixture
def env(dra_cluster: tuple[LocalCluster, Phalanx]) -> Iterator[tuple[LocalCluster, Phalanx, str, DevicePool]]:
    cluster, phalanx = dra_cluster
    pool = DevicePool(cluster)
    namespaces = _namespace(cluster, "dra", {"phalanx.io/gang-scheduling": "enabled"})
    yield cluster, phalanx, next(namespaces), pool
    next(namespaces, None)
    pool.delete()


def claim_spec(count: int, selector: str | None = None, match: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": DRA_DEVICE_CLASS, "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    devices: dict[str, Any] = {"requests": [{"name": "gpus", "exactly": exactly}]}
    if match:
        devices["constraints"] = [{"matchAttribute": match}]
    return {"devices": devices}


def template(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": spec},
    }


def claim_job(
    name: str, pool: DevicePool, n: int, template_name: str | None = None, claim: str | None = None
) -> dict[str, Any]:
    """A Job of ``n`` pods, each claiming devices from a template (one claim per pod) or naming one
    shared claim; no nvidia.com/gpu in its requests."""
    source = {"resourceClaimTemplateName": template_name} if template_name else {"resourceClaimName": claim}
    job = builders.job(name).gpus(0).parallelism(n).node_selector(pool.selector)
    job.pod_spec(resourceClaims=[{"name": "gpus", **source}])
    built = job.build()
    built["spec"]["template"]["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpus"}]}
    return built


def members(cluster: LocalCluster, ns: str, job: str) -> list[dict[str, Any]]:
    return [p for p in pods(cluster, ns, f"job-name={job}") if not p["metadata"].get("deletionTimestamp")]


def n_bound(cluster: LocalCluster, ns: str, job: str) -> int:
    return sum(1 for p in members(cluster, ns, job) if bound(p))


def pod_claims(cluster: LocalCluster, ns: str, pod: dict[str, Any]) -> list[dict[str, Any]]:
    names = [s["resourceClaimName"] for s in pod.get("status", {}).get("resourceClaimStatuses", [])]
    extended = pod.get("status", {}).get("extendedResourceClaimStatus") or {}
    if extended.get("resourceClaimName"):
        names.append(extended["resourceClaimName"])
    names += [
        c["resourceClaimName"] for c in pod["spec"].get("resourceClaims", []) if c.get("resourceClaimName")
    ]
    return [cluster.kubectl_json("get", "resourceclaim", n, "-n", ns) for n in names]


def allocated_devices(claim: dict[str, Any]) -> list[dict[str, Any]]:
    return list(claim.get("status", {}).get("allocation", {}).get("devices", {}).get("results", []))


# A gang that does not fit even the empty pool is Unschedulable; one that would, InsufficientCapacity.
SHORT = ("Unschedulable", "InsufficientCapacity")


def waits_saying(cluster: LocalCluster, ns: str, job: str, *reasons: str) -> str:
    def says() -> str | None:
        status = podgroup(cluster, ns, job).get("status") or {}
        return str(status.get("message")) if status.get("reason") in reasons else None

    return eventually(says, 60, what=f"{job}'s PodGroup to say {reasons}")


def every_member_on_its_devices(cluster: LocalCluster, ns: str, job: str) -> None:
    """Each member is bound on the node whose slice (pool) holds the devices its claims got."""
    for pod in members(cluster, ns, job):
        claims = pod_claims(cluster, ns, pod)
        assert claims, pod["metadata"]["name"]
        for claim in claims:
            results = allocated_devices(claim)
            assert results, claim["metadata"]["name"]
            assert {r["pool"] for r in results} == {pod["spec"]["nodeName"]}


def test_a_gang_one_device_short_holds_every_member_then_starts_whole(
    env: tuple[LocalCluster, Phalanx, str, DevicePool],
) -> None:
    cluster, phalanx, ns, pool = env
    pool.add(2, gpus=4)
    apply(cluster, ns, template("three-gpus", claim_spec(3)))
    # 3 pods × 3 devices = 9; two nodes of 4 devices hold only 2 such claims (and 8 devices).
    apply(cluster, ns, claim_job("short", pool, 3, template_name="three-gpus"))
    message = waits_saying(cluster, ns, "short", *SHORT)
    assert DRA_DEVICE_CLASS in message, message
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: (
            len(members(cluster, ns, "short")) == 3
            and all(gated(p) and not bound(p) for p in members(cluster, ns, "short"))
        ),
        what="every member of the short gang gated, none bound",
    )
    # kubectl phalanx counts each member's claimed devices as its GPUs (the one DeviceClass here).
    [explained] = as_json(cluster, "explain", "job/short", "-n", ns)["gangs"]
    assert [m.get(DRA_DEVICE_CLASS) for m in explained["members"]] == [3, 3, 3], explained["members"]
    assert DRA_DEVICE_CLASS in explained["decision"]["message"], explained["decision"]
    pool.add(1, gpus=4)
    eventually(lambda: n_bound(cluster, ns, "short") == 3, 60, what="the gang bound whole")
    every_member_on_its_devices(cluster, ns, "short")


def test_network_attached_devices_count_once_for_every_node_they_reach(
    env: tuple[LocalCluster, Phalanx, str, DevicePool],
) -> None:
    cluster, phalanx, ns, pool = env
    pool.add(2, gpus=0)
    shared = pool.add_shared(3)
    apply(cluster, ns, template("one-gpu", claim_spec(1)))
    # Both nodes reach the same 3 devices: 3 claims fit, not 6.
    apply(cluster, ns, claim_job("four", pool, 4, template_name="one-gpu"))
    message = waits_saying(cluster, ns, "four", *SHORT)
    assert DRA_DEVICE_CLASS in message, message
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: all(gated(p) and not bound(p) for p in members(cluster, ns, "four")),
        what="every member of the gang of four gated, none bound",
    )
    cluster.kubectl("delete", "job", "four", "-n", ns, "--wait=true")
    apply(cluster, ns, claim_job("three", pool, 3, template_name="one-gpu"))
    eventually(lambda: n_bound(cluster, ns, "three") == 3, 60, what="the gang of three bound whole")
    for pod in members(cluster, ns, "three"):
        assert pod["spec"]["nodeName"] in pool.nodes
        for claim in pod_claims(cluster, ns, pod):
            assert {r["pool"] for r in allocated_devices(claim)} == {shared}


def test_members_sharing_one_named_claim_land_where_its_devices_are(
    env: tuple[LocalCluster, Phalanx, str, DevicePool],
) -> None:
    cluster, _, ns, pool = env
    taken, free = pool.add(2, gpus=4)
    # Every device of the first node is held by another pod's claim: the shared claim fits only
    # the second, and the gang must be pinned there (the first node has the most other room used).
    apply(cluster, ns, template("four-gpus", claim_spec(4)))
    filler = claim_job("filler", pool, 1, template_name="four-gpus")
    filler["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/hostname"] = taken
    apply(cluster, ns, filler)
    eventually(lambda: n_bound(cluster, ns, "filler") == 1, 60, what="the filler bound")
    shared = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "shared"}}
    apply(cluster, ns, {**shared, "spec": claim_spec(4)})
    apply(cluster, ns, claim_job("sharing", pool, 3, claim="shared"))
    eventually(lambda: n_bound(cluster, ns, "sharing") == 3, 60, what="the sharing gang bound whole")
    nodes = {p["spec"]["nodeName"] for p in members(cluster, ns, "sharing")}
    assert nodes == {free}, nodes
    every_member_on_its_devices(cluster, ns, "sharing")


def test_a_cel_selector_counts_only_the_devices_it_matches(
    env: tuple[LocalCluster, Phalanx, str, DevicePool],
) -> None:
    cluster, phalanx, ns, pool = env
    pool.add(2, gpus=4)
    low = f"device.attributes['{DRA_DRIVER}'].index < 2"  # 2 devices a node match
    apply(cluster, ns, template("low-index", claim_spec(1, selector=low)))
    # 5 pods × 1 matching device: 8 devices free, only 4 match.
    apply(cluster, ns, claim_job("five", pool, 5, template_name="low-index"))
    waits_saying(cluster, ns, "five", *SHORT)
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: all(gated(p) for p in members(cluster, ns, "five")),
        what="the gang of five held",
    )
    cluster.kubectl("delete", "job", "five", "-n", ns, "--wait=true")
    apply(cluster, ns, claim_job("four", pool, 4, template_name="low-index"))
    eventually(lambda: n_bound(cluster, ns, "four") == 4, 60, what="the gang of four bound whole")
    every_member_on_its_devices(cluster, ns, "four")
    for pod in members(cluster, ns, "four"):
        for claim in pod_claims(cluster, ns, pod):
            assert all(int(r["device"].split("-")[1]) < 2 for r in allocated_devices(claim))


def test_match_attribute_keeps_each_claim_in_one_nvlink_domain(
    env: tuple[LocalCluster, Phalanx, str, DevicePool],
) -> None:
    cluster, phalanx, ns, pool = env
    pool.add(1, gpus=8)  # two NVLink domains of 4
    match = f"{DRA_DRIVER}/nvlinkDomain"
    apply(cluster, ns, template("three-linked", claim_spec(3, match=match)))
    # 3 claims of 3 devices in one domain: a node of two 4-device domains holds only 2 (9 > 8 too,
    # but 2 claims of 3 would fit 8 devices in any split: the domains make it 2, not 2.67).
    apply(cluster, ns, claim_job("linked", pool, 3, template_name="three-linked"))
    waits_saying(cluster, ns, "linked", *SHORT)
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: n_bound(cluster, ns, "linked") == 0,
        what="no member of the linked gang bound",
    )
    pool.add(1, gpus=8)
    eventually(lambda: n_bound(cluster, ns, "linked") == 3, 60, what="the linked gang bound whole")
    every_member_on_its_devices(cluster, ns, "linked")
    for pod in members(cluster, ns, "linked"):
        for claim in pod_claims(cluster, ns, pod):
            domains = {int(r["device"].split("-")[1]) // 4 for r in allocated_devices(claim)}
            assert len(domains) == 1, domains


def test_an_expression_phalanx_cannot_evaluate_waits_and_says_so(
    env: tuple[LocalCluster, Phalanx, str, DevicePool],
) -> None:
    cluster, phalanx, ns, pool = env
    pool.add(1, gpus=4)
    missing = f"device.attributes['{DRA_DRIVER}'].nosuch == 'x'"  # an attribute no device has
    apply(cluster, ns, template("unknowable", claim_spec(1, selector=missing)))
    apply(cluster, ns, claim_job("unknowable", pool, 2, template_name="unknowable"))
    message = waits_saying(cluster, ns, "unknowable", "DevicesUnproven")
    assert "could not be evaluated" in message and DRA_DEVICE_CLASS in message, message
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: all(gated(p) and not bound(p) for p in members(cluster, ns, "unknowable")),
        what="the gang held at its gate",
    )


def test_devices_of_a_gang_let_go_are_not_given_away_before_the_scheduler_allocates_them(
    env: tuple[LocalCluster, Phalanx, str, DevicePool],
) -> None:
    """Between a gang's gate lift and the scheduler's allocation its claims hold no devices. Its
    pods here name a scheduler that does not run, so that moment lasts until the bind timeout."""
    cluster, phalanx, ns, pool = env
    pool.add(1, gpus=8)
    apply(cluster, ns, template("four-gpus", claim_spec(4)))
    first = claim_job("first", pool, 2, template_name="four-gpus")
    first["spec"]["template"]["spec"]["schedulerName"] = "e2e-no-such-scheduler"
    apply(cluster, ns, first)

    def first_let_go() -> bool:
        found = members(cluster, ns, "first")
        return len(found) == 2 and not any(gated(p) or bound(p) for p in found)

    eventually(first_let_go, 60, what="the first gang admitted, its members unbound")
    try:
        apply(cluster, ns, claim_job("second", pool, 1, template_name="four-gpus"))
        message = waits_saying(cluster, ns, "second", *SHORT)
        assert DRA_DEVICE_CLASS in message, message
        held_through_a_pass(
            cluster,
            phalanx,
            # Once the first gang is rolled back (bind timeout), its devices are free again.
            lambda: not first_let_go() or all(gated(p) for p in members(cluster, ns, "second")),
            what="the second gang gated while the first one's members wait for their scheduler",
        )
    finally:
        cluster.kubectl("delete", "job", "first", "-n", ns, "--wait=false", check=False)


def priority_class(cluster: LocalCluster, value: int) -> str:
    name = f"dra-{value}-{uuid.uuid4().hex[:6]}"
    body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}}
    cluster.apply_objects([{**body, "value": value}])
    return name


def test_preempting_a_lower_priority_gang_frees_its_devices_for_a_higher_one(
    env: tuple[LocalCluster, Phalanx, str, DevicePool],
) -> None:
    cluster, _, ns, pool = env
    low, high = priority_class(cluster, 100), priority_class(cluster, 100000)
    pool.add(1, gpus=4)
    apply(cluster, ns, template("two-gpus", claim_spec(2)))
    victim = claim_job("low", pool, 2, template_name="two-gpus")
    victim["spec"]["template"]["spec"]["priorityClassName"] = low
    apply(cluster, ns, victim)
    eventually(lambda: n_bound(cluster, ns, "low") == 2, 60, what="the low gang holds every device")
    urgent = claim_job("urgent", pool, 2, template_name="two-gpus")
    urgent["spec"]["template"]["spec"]["priorityClassName"] = high
    apply(cluster, ns, urgent)
    eventually(lambda: n_bound(cluster, ns, "urgent") == 2, 90, what="the urgent gang bound whole")
    assert n_bound(cluster, ns, "low") == 0
    every_member_on_its_devices(cluster, ns, "urgent")
    cluster.kubectl("delete", "priorityclass", low, high, "--wait=false", check=False)


def test_a_queue_limit_on_dra_gpus_holds_a_gang_although_devices_are_free(
    env: tuple[LocalCluster, Phalanx, str, DevicePool],
) -> None:
    cluster, _, ns, pool = env
    pool.add(1, gpus=8)
    queue = f"dra-{uuid.uuid4().hex[:6]}"
    spec = {"resources": {DRA_DEVICE_CLASS: {"quota": "0", "limit": "3"}}}
    body = {"apiVersion": "scheduling.phalanx.io/v1alpha1", "kind": "Queue", "metadata": {"name": queue}}
    cluster.apply_objects([{**body, "spec": spec}])
    try:
        cluster.kubectl("label", "namespace", ns, f"phalanx.io/queue={queue}", "--overwrite")
        apply(cluster, ns, template("one-gpu", claim_spec(1)))
        apply(cluster, ns, claim_job("first", pool, 3, template_name="one-gpu"))
        eventually(lambda: n_bound(cluster, ns, "first") == 3, 60, what="3 devices in the queue")
        apply(cluster, ns, claim_job("second", pool, 1, template_name="one-gpu"))
        message = waits_saying(cluster, ns, "second", "QueueLimit")
        assert message == f"queue {queue} is at its limit: 3 of 3 {DRA_DEVICE_CLASS}; the gang needs 1"
        assert n_bound(cluster, ns, "second") == 0
    finally:
        cluster.kubectl("delete", "queues.scheduling.phalanx.io", queue, "--wait=false", check=False)


def test_nvidia_gpu_gangs_served_through_extended_resource_name_run_whole(
    env: tuple[LocalCluster, Phalanx, str, DevicePool],
) -> None:
    """The class maps nvidia.com/gpu onto its devices for this test only."""
    cluster, phalanx, ns, pool = env
    patch = {"spec": {"extendedResourceName": DRA_EXTENDED_RESOURCE}}
    cluster.kubectl("patch", "deviceclass", DRA_DEVICE_CLASS, "--type=merge", "-p", json.dumps(patch))
    try:
        extended_gang_runs_whole(cluster, phalanx, ns, pool)
    finally:
        unpatch = {"spec": {"extendedResourceName": None}}
        cluster.kubectl("patch", "deviceclass", DRA_DEVICE_CLASS, "--type=merge", "-p", json.dumps(unpatch))


def extended_gang_runs_whole(cluster: LocalCluster, phalanx: Phalanx, ns: str, pool: DevicePool) -> None:
    pool.add(2, gpus=4)
    # No node lists nvidia.com/gpu in its allocatable: only the DeviceClass offers it.
    job = builders.job("plain").gpus(3).parallelism(3).node_selector(pool.selector).build()
    apply(cluster, ns, job)
    waits_saying(cluster, ns, "plain", *SHORT)
    held_through_a_pass(
        cluster, phalanx, lambda: n_bound(cluster, ns, "plain") == 0, what="no member of the plain gang bound"
    )
    pool.add(1, gpus=4)
    eventually(lambda: n_bound(cluster, ns, "plain") == 3, 60, what="the nvidia.com/gpu gang bound whole")
    every_member_on_its_devices(cluster, ns, "plain")
