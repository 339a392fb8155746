"""The replay's topology model: racks and NVLink domains of nodes, the narrowest domain each gang ran
in, and what Phalanx keeps together that a topology-blind planner spreads."""

from __future__ import annotations

from tests.simulation import ClusterSpec, compare

from .helpers import jobs, workload

# 8 nodes × 8 GPUs: NVLink domains of 2 nodes, racks of 4, zones of 2 racks.
SPEC = ClusterSpec(nodes=8, gpus_per_node=8, rack_size=4, racks_per_zone=2, nvlink_size=2)


def test_the_narrowest_domain_of_a_set_of_nodes() -> None:
    assert SPEC.narrowest([3, 3]) == "node"
    assert SPEC.narrowest([2, 3]) == "nvlink"
    assert SPEC.narrowest([0, 3]) == "rack"
    assert SPEC.narrowest([0, 7]) == "zone"
    assert ClusterSpec(nodes=8, rack_size=4, racks_per_zone=1).narrowest([0, 7]) == "cluster"


def test_phalanx_keeps_a_gang_in_one_nvlink_domain_that_a_blind_planner_spreads() -> None:
    # Eight 8-GPU jobs fill the nodes in order; those on nodes 0, 2, 6 and 7 end first. Then a
    # 16-GPU gang (2 pods × 8): nodes 0 and 2 come first by name but sit in two NVLink domains;
    # only nodes 6-7 are one.
    durations = (50.0, 1000.0, 50.0, 1000.0, 1000.0, 1000.0, 50.0, 50.0)
    w = workload(jobs(*((0.0, d, 8) for d in durations), (60.0, 100.0, 16)))
    c = compare(w, SPEC, ("phalanx", "phalanx-no-topology"))
    aware = c.summaries["phalanx"]["topology"]
    blind = c.summaries["phalanx-no-topology"]["topology"]
    assert aware["gangs"] == blind["gangs"] == 1
    assert aware["inside_nvlink_pct"] == 100.0
    assert blind["inside_nvlink_pct"] == 0.0
