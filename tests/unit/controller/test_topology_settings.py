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
    assert config.levels() == DEFAULT_LEVELS


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
