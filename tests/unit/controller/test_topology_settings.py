"""The controller's topology settings: the default topology's levels and further named ones."""

from __future__ import annotations

import pytest

from controller.core import DEFAULT_LEVELS
from controller.runtime.config import ControllerSettings, parse_topologies
from controller.runtime.wiring import planner_config
from shared.settings import InvalidSettings


def test_the_default_topology_matches_common_clouds() -> None:
    config = planner_config(ControllerSettings(leader_election=False))
    assert config.topologies == (("default", DEFAULT_LEVELS),)
    levels = config.levels()
    assert levels == DEFAULT_LEVELS
    assert levels is not None
    # Each cloud's own labels, widest first, between the zone and the node.
    eks = [f"topology.k8s.aws/network-node-layer-{n}" for n in (1, 2, 3)]
    gke = [f"cloud.google.com/gce-topology-{p}" for p in ("block", "subblock", "host")]
    generic = ["topology.kubernetes.io/block", "topology.kubernetes.io/rack", "nvidia.com/gpu.clique"]
    for labels in (eks, gke, generic):
        positions = [levels.index(label) for label in labels]
        assert positions == sorted(positions), labels
    assert levels[0] == "topology.kubernetes.io/zone" and levels[-1] == "kubernetes.io/hostname"


def test_named_topologies_are_read_widest_first() -> None:
    parsed = parse_topologies("zone,rack", "gb200=zone, nvidia.com/gpu.clique ; tpu=block,host")
    assert parsed == (
        ("default", ("zone", "rack")),
        ("gb200", ("zone", "nvidia.com/gpu.clique")),
        ("tpu", ("block", "host")),
    )


@pytest.mark.parametrize("value", ["gb200", "=zone", "default=zone", "a=zone;a=rack", "a=zone,zone"])
def test_a_malformed_topology_stops_the_controller(value: str) -> None:
    with pytest.raises(InvalidSettings):
        ControllerSettings(topologies=value)
