"""PodGroup-level ResourceClaims (1.37 beta, gate DRAWorkloadResourceClaims, off by default): a
native PodGroup's ``spec.resourceClaims`` is one claim for the whole gang, made once from its
template by the control plane and allocated once by the real kube-scheduler. A control plane of its
own with the gate on, whose GPUs exist only as ResourceSlice devices."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import _namespace
from tests.e2e.kube import apply, bound, gated, held_through_a_pass
from tests.e2e.side_cluster import side_cluster
from tests.e2e.test_dra import (
    SHORT,
    DevicePool,
    allocated_devices,
    claim_job,
    claim_spec,
    members,
    n_bound,
    template,
    waits_saying,
)
from tests.e2e.waiting import eventually
from tests.localcluster import LocalCluster
from tests.localcluster.cluster import ClusterConfig
from tests.localcluster.fleet import DRA_DEVICE_CLASS, GPUS_DRA, FleetSpec
from tests.localcluster.phalanx import Phalanx
from tests.localcluster.versions import release

pytestmark = pytest.mark.k8s_versions("1.37")
GATE = "DRAWorkloadResourceClaims"


@pytest.fixture(scope="module")
def claims_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Phalanx]]:
    config = ClusterConfig(
        name="phalanx-dra-groups",
        workdir=tmp_path_factory.mktemp("dra-groups-cluster"),
        fleet=FleetSpec(gpu_nodes=0, cpu_nodes=1, gpus_as=GPUS_DRA),
        feature_gates=(GATE,),
    )
    with side_cluster(config) as both:
        yield both


@pytest.fixture
def env(
    claims_cluster: tuple[LocalCluster, Phalanx],
) -> Iterator[tuple[LocalCluster, Phalanx, str, DevicePool]]:
    cluster, phalanx = claims_cluster
    pool = DevicePool(cluster)
    namespaces = _namespace(cluster, "dra-groups", {"phalanx.io/gang-scheduling": "enabled"})
    yield cluster, phalanx, next(namespaces), pool
    next(namespaces, None)
    pool.delete()


def native_group(name: str, min_count: int, claims: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": release().workload_api,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}, "resourceClaims": claims},
    }


def native(cluster: LocalCluster, ns: str, name: str) -> dict[str, Any]:
    group, version = release().workload_api.split("/")
    found: dict[str, Any] = cluster.kubectl_json("get", f"podgroups.{version}.{group}", name, "-n", ns)
    return found


def group_claim_name(cluster: LocalCluster, ns: str, group: str) -> str | None:
    statuses = (native(cluster, ns, group).get("status") or {}).get("resourceClaimStatuses") or []
    return next((s.get("resourceClaimName") for s in statuses if s.get("name") == "gpus"), None)


def test_a_podgroup_claim_one_device_short_holds_the_gang_then_runs_it_whole_on_its_devices(
    env: tuple[LocalCluster, Phalanx, str, DevicePool],
) -> None:
    cluster, phalanx, ns, pool = env
    pool.add(2, gpus=4)
    apply(cluster, ns, template("five-gpus", claim_spec(5)))
    claims = [{"name": "gpus", "resourceClaimTemplateName": "five-gpus"}]
    apply(cluster, ns, native_group("train", 3, claims))
    # The API server drops the field where the gate is off: this cluster must keep it.
    assert native(cluster, ns, "train")["spec"].get("resourceClaims") == claims
    # One claim for the group, made by the control plane from the template.
    made = eventually(lambda: group_claim_name(cluster, ns, "train"), 60, what="the PodGroup's claim made")
    job = claim_job("train", pool, 3, template_name="five-gpus")
    job["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": "train"}
    apply(cluster, ns, job)
    # 5 devices in one claim; no node has more than 4.
    message = waits_saying(cluster, ns, "train", *SHORT)
    assert DRA_DEVICE_CLASS in message, message
    held_through_a_pass(
        cluster,
        phalanx,
        lambda: (
            len(members(cluster, ns, "train")) == 3
            and all(gated(p) and not bound(p) for p in members(cluster, ns, "train"))
        ),
        what="every member of the gang gated, none bound",
    )
    # One node of 5: the group's one claim fits there (three claims of 5, one per pod, would not).
    [big] = pool.add(1, gpus=5)
    eventually(lambda: n_bound(cluster, ns, "train") == 3, 90, what="the gang bound whole")
    assert {p["spec"]["nodeName"] for p in members(cluster, ns, "train")} == {big}
    claim = cluster.kubectl_json("get", "resourceclaim", made, "-n", ns)
    results = allocated_devices(claim)
    assert len(results) == 5 and {r["pool"] for r in results} == {big}, results
    reserved = claim["status"].get("reservedFor") or []
    assert [(r.get("resource"), r.get("name")) for r in reserved] == [("podgroups", "train")], reserved
    for pod in members(cluster, ns, "train"):
        names = {s["resourceClaimName"] for s in pod["status"].get("resourceClaimStatuses") or []}
        assert names == {made}, (pod["metadata"]["name"], names)
