"""bench-peers' topology scenario: gangs that fit one rack, how each system is told to keep a gang
inside one, and the share of gangs that ran inside one (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.bench.peers.__main__ import builds
from tests.bench.peers.scenarios import RACK, topology
from tests.bench.peers.timeline import GangRecord, PodRecord, inside_one_domain
from tests.localcluster.cluster import ClusterConfig, LocalCluster
from tests.localcluster.fleet import FleetSpec, node_manifests
from tests.localcluster.peers import (
    SYSTEMS,
    TOPOLOGY_BUILDS,
    KaiSystem,
    KueueSystem,
    VolcanoSystem,
    kustomized_conversions,
    make_system,
    with_conversion_webhooks,
)


def system(name: str) -> object:
    return make_system(name, LocalCluster(ClusterConfig(workdir=Path("/nonexistent"))), None)


@pytest.mark.parametrize("full", [False, True])
def test_every_gang_fits_one_rack_and_more_than_half_of_them_need_most_of_one(full: bool) -> None:
    sc = topology(full)
    rack_gpus = sc.fleet.nodes_per_rack * sc.fleet.gpus_per_node
    assert sc.topology == RACK
    assert all(a.size * a.gpus <= rack_gpus for a in sc.arrivals)
    assert sum(a.size * a.gpus > rack_gpus // 2 for a in sc.arrivals) > len(sc.arrivals) // 2
    # More GPUs asked for than the fleet has at once: racks fragment while gangs come and go.
    running = sum(a.size * a.gpus for a in sc.arrivals if a.at < sc.arrivals[0].run_for_s)
    assert running > sc.fleet.total_gpus


def test_phalanx_and_kueue_say_it_their_own_way() -> None:
    [phalanx] = system("phalanx").topology_gang("bench", "g", 3, 4, "5s", RACK)  # type: ignore[attr-defined]
    assert phalanx["metadata"]["annotations"]["phalanx.io/topology-required"] == RACK
    [kueue] = system("kueue").topology_gang("bench", "g", 3, 4, "5s", RACK)  # type: ignore[attr-defined]
    template = kueue["spec"]["template"]["metadata"]
    assert template["annotations"]["kueue.x-k8s.io/podset-required-topology"] == RACK
    assert kueue["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "bench"
    assert SYSTEMS["coscheduling"].topology_unsupported  # nothing written for it: not run, and said so


def test_volcano_runs_the_topology_scenario_on_its_own_build_with_a_hard_tier_1_podgroup() -> None:
    assert SYSTEMS["volcano"].topology_unsupported is None
    assert TOPOLOGY_BUILDS["volcano"] == "volcano-topology"
    group, body = system("volcano").topology_gang("bench", "g", 3, 4, "5s", RACK)  # type: ignore[attr-defined]
    assert group["kind"] == "PodGroup" and body["kind"] == "Job"
    assert group["spec"]["minMember"] == 3
    # Hard: the gang waits rather than cross a tier-1 HyperNode (a rack).
    assert group["spec"]["networkTopology"] == {"mode": "hard", "highestTierAllowed": 1}
    template = body["spec"]["template"]
    assert template["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "g"
    assert template["spec"]["schedulerName"] == "volcano"


def test_volcano_hypernodes_are_the_fleets_racks_in_tier_1_and_its_zones_in_tier_2() -> None:
    fleet = topology(True).fleet  # 32 nodes, 4 a rack, 4 racks a zone: 8 racks in 2 zones
    hypernodes = VolcanoSystem.hypernodes(node_manifests(fleet), RACK)
    assert {h["apiVersion"] for h in hypernodes} == {"topology.volcano.sh/v1alpha1"}
    racks = [h for h in hypernodes if h["spec"]["tier"] == 1]
    zones = [h for h in hypernodes if h["spec"]["tier"] == 2]
    assert len(racks) == 8 and len(zones) == 2 and len(hypernodes) == 10
    by_rack = {node["metadata"]["labels"][RACK]: node["metadata"]["name"] for node in node_manifests(fleet)}
    for rack in racks:
        members = rack["spec"]["members"]
        assert len(members) == fleet.nodes_per_rack
        assert {m["type"] for m in members} == {"Node"}
        names = {m["selector"]["exactMatch"]["name"] for m in members}
        assert by_rack[rack["metadata"]["name"]] in names
        assert all(
            node["metadata"]["labels"][RACK] == rack["metadata"]["name"]
            for node in node_manifests(fleet)
            if node["metadata"]["name"] in names
        )
    zone_members = [m["selector"]["exactMatch"]["name"] for z in zones for m in z["spec"]["members"]]
    assert sorted(zone_members) == sorted(r["metadata"]["name"] for r in racks)
    assert {m["type"] for z in zones for m in z["spec"]["members"]} == {"HyperNode"}


def test_volcano_topology_conf_is_the_charts_plus_the_network_topology_aware_plugin(tmp_path: Path) -> None:
    stock = tmp_path / "volcano-scheduler.conf"
    stock.write_text(
        'actions: "enqueue, allocate, backfill"\n'
        "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n- plugins:\n  - name: predicates\n"
    )
    volcano = make_system("volcano", LocalCluster(ClusterConfig(workdir=tmp_path)), None)
    conf = yaml.safe_load(volcano.topology_conf(stock).read_text())  # type: ignore[attr-defined]
    assert conf["actions"] == "enqueue, allocate, backfill"
    assert [p["name"] for p in conf["tiers"][0]["plugins"]] == ["priority", "gang"]
    assert [p["name"] for p in conf["tiers"][1]["plugins"]] == ["predicates", "network-topology-aware"]


def test_kueue_topology_names_the_fleets_levels_down_to_the_hostname_and_its_flavor_names_it() -> None:
    fleet = FleetSpec(gpu_nodes=8, gpus_per_node=8, cpu_nodes=0)
    topology, flavor, queue = KueueSystem.queue_objects(fleet, RACK)
    assert topology["kind"] == "Topology"
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == [
        "topology.kubernetes.io/zone",
        RACK,
        "kubernetes.io/hostname",
    ]
    assert flavor["kind"] == "ResourceFlavor"
    # Every fake node carries type=kwok: the flavor's nodes are the whole fleet.
    assert flavor["spec"] == {"nodeLabels": {"type": "kwok"}, "topologyName": topology["metadata"]["name"]}
    [group] = queue["spec"]["resourceGroups"]
    assert group["flavors"][0]["name"] == flavor["metadata"]["name"]
    assert {"name": "nvidia.com/gpu", "nominalQuota": "64"} in group["flavors"][0]["resources"]
    # Without a topology: no Topology object and a plain flavor.
    flavor, _ = KueueSystem.queue_objects(fleet, None)
    assert flavor["kind"] == "ResourceFlavor" and "spec" not in flavor


def test_kai_is_told_by_the_jobs_annotations_and_the_podgroups_constraint_naming_its_topology() -> None:
    topology = KaiSystem.topology_object(RACK)
    assert topology["apiVersion"] == "kai.scheduler/v1alpha1"  # the only version its v0.12.0 CRD serves
    assert topology["kind"] == "Topology"
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == [
        "topology.kubernetes.io/zone",
        RACK,
        "kubernetes.io/hostname",
    ]
    group, body = system("kai").topology_gang("bench", "g", 3, 4, "5s", RACK)  # type: ignore[attr-defined]
    assert group["kind"] == "PodGroup" and body["kind"] == "Job"  # the PodGroup first, as for any gang
    name = topology["metadata"]["name"]
    # The scheduler ignores a constraint without a topology name: both are written.
    assert group["spec"]["topologyConstraint"] == {"topology": name, "requiredTopologyLevel": RACK}
    assert group["spec"]["minMember"] == 3
    assert body["metadata"]["annotations"] == {
        "kai.scheduler/topology": name,
        "kai.scheduler/topology-required-placement": RACK,
    }
    assert SYSTEMS["kai"].topology_unsupported is None


def kueue_patch(plural: str) -> str:
    return f"""apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.kueue.x-k8s.io
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service:
          namespace: system
          name: webhook-service
          path: /convert
      conversionReviewVersions:
      - v1
"""


def test_kueue_crds_get_the_conversion_webhooks_its_install_lists_pointed_at_loopback(tmp_path: Path) -> None:
    (tmp_path / "patches").mkdir()
    for plural in ("workloads", "resourceflavors"):
        (tmp_path / "patches" / f"webhook_in_{plural}.yaml").write_text(kueue_patch(plural))
    (tmp_path / "kustomization.yaml").write_text(
        "resources:\n- bases/kueue.x-k8s.io_workloads.yaml\n"
        "patches:\n- path: patches/webhook_in_workloads.yaml\n"
        "#- path: patches/webhook_in_resourceflavors.yaml\n"
    )
    patches = kustomized_conversions(tmp_path)
    # The commented-out patch is not Kueue's install: not listed.
    assert [p["metadata"]["name"] for p in patches] == ["workloads.kueue.x-k8s.io"]
    crds = [
        {"metadata": {"name": name}, "spec": {"group": "kueue.x-k8s.io"}}
        for name in ("workloads.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io")
    ]
    workloads, flavors = with_conversion_webhooks(crds, patches, "https://127.0.0.1:9443", "Q0E=")
    assert workloads["spec"]["conversion"] == {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {"url": "https://127.0.0.1:9443/convert", "caBundle": "Q0E="},
            "conversionReviewVersions": ["v1"],
        },
    }
    assert "conversion" not in flavors["spec"]
    assert "conversion" not in crds[0]["spec"]  # the manifests read are left as they are


def test_share_of_placed_gangs_inside_one_domain() -> None:
    domain_of = {"a1": "r1", "a2": "r1", "b1": "r2"}
    inside = GangRecord(
        "in", 2, 1, 0.0, [PodRecord("in", 1, bound=1.0, node="a1"), PodRecord("in", 1, bound=1.0, node="a2")]
    )
    spread = GangRecord(
        "out",
        2,
        1,
        0.0,
        [PodRecord("out", 1, bound=1.0, node="a1"), PodRecord("out", 1, bound=2.0, node="b1")],
    )
    waiting = GangRecord("wait", 2, 1, 0.0, [PodRecord("wait", 1, bound=1.0, node="b1")])  # never whole
    assert inside_one_domain([inside, spread, waiting], domain_of, end=10.0) == {
        "gangs_inside_one_domain": 1,
        "gangs_spread": 1,
        "inside_one_domain_pct": 50.0,
    }
    assert inside_one_domain([waiting], domain_of, end=10.0)["inside_one_domain_pct"] is None


def test_a_gang_moved_whole_stayed_inside_one_domain_but_one_member_moved_alone_spread_it() -> None:
    domain_of = {"a1": "r1", "a2": "r1", "b1": "r2", "b2": "r2"}
    # Both members evicted from r1, then made again by the Job and placed together in r2.
    moved = GangRecord(
        "moved",
        2,
        1,
        0.0,
        [
            PodRecord("moved", 1, bound=1.0, finished=5.0, node="a1"),
            PodRecord("moved", 1, bound=1.0, finished=5.0, node="a2"),
            PodRecord("moved", 1, bound=6.0, finished=16.0, succeeded=True, node="b1"),
            PodRecord("moved", 1, bound=6.0, finished=16.0, succeeded=True, node="b2"),
        ],
    )
    # One member evicted and its replacement placed in r2 while the other still runs in r1.
    split = GangRecord(
        "split",
        2,
        1,
        0.0,
        [
            PodRecord("split", 1, bound=1.0, node="a1"),
            PodRecord("split", 1, bound=1.0, finished=3.0, node="a2"),
            PodRecord("split", 1, bound=4.0, node="b1"),
        ],
    )
    assert inside_one_domain([moved, split], domain_of, end=20.0) == {
        "gangs_inside_one_domain": 1,
        "gangs_spread": 1,
        "inside_one_domain_pct": 50.0,
    }


def test_the_topology_scenario_alone_builds_volcanos_topology_build_and_not_its_usual_one() -> None:
    peers = ["phalanx", "coscheduling", "kueue", "volcano", "kai", "floor"]
    assert builds(peers, [True]) == ("kueue", "volcano-topology", "kai")
    assert builds(peers, [False, True]) == ("coscheduling", "kueue", "volcano", "kai", "volcano-topology")
    assert builds(peers, [False]) == ("coscheduling", "kueue", "volcano", "kai")
