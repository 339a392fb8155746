"""Topology requests from every system's words merge into one; two systems that disagree conflict."""

from __future__ import annotations

from shared import constants as c
from shared.topology import (
    KUEUE_ANNOTATIONS,
    KUEUE_PREFERRED,
    KUEUE_REQUIRED,
    PHALANX_ANNOTATIONS,
    Conflict,
    TopologyAsk,
    from_annotations,
    from_kai,
    from_volcano,
    merge,
    subgroup_levels,
)

RACK = "topology.kubernetes.io/rack"
BLOCK = "topology.kubernetes.io/block"


def test_kai_topology_constraint_is_read() -> None:
    spec = {
        "topologyConstraint": {
            "topology": "gb200",
            "requiredTopologyLevel": RACK,
            "preferredTopologyLevel": "",
        }
    }
    assert from_kai(spec) == TopologyAsk(name="gb200", required=RACK)
    assert from_kai({}) == TopologyAsk()


def test_annotations_are_read_per_system() -> None:
    annotations = {KUEUE_PREFERRED: RACK, c.TOPOLOGY_REQUIRED_ANNOTATION: BLOCK}
    assert from_annotations(annotations, KUEUE_ANNOTATIONS) == TopologyAsk(preferred=RACK)
    assert from_annotations(annotations, PHALANX_ANNOTATIONS) == TopologyAsk(required=BLOCK)


def test_systems_that_agree_merge_and_those_that_disagree_conflict() -> None:
    merged, conflict = merge(
        (("Phalanx", TopologyAsk(required=RACK)), ("Kueue", TopologyAsk(required=RACK, slice_key=BLOCK)))
    )
    assert conflict is None and merged == TopologyAsk(required=RACK, slice_key=BLOCK)
    _, conflict = merge(
        (
            ("Phalanx", TopologyAsk(required=RACK)),
            ("Kueue", from_annotations({KUEUE_REQUIRED: BLOCK}, KUEUE_ANNOTATIONS)),
        )
    )
    assert conflict == Conflict("required", RACK, "Phalanx", BLOCK, "Kueue")


def test_volcano_network_topology_is_read_as_a_tier_with_volcano_s_defaults() -> None:
    hard = {"networkTopology": {"mode": "hard", "highestTierAllowed": 2}}
    assert from_volcano(hard) == TopologyAsk(required_tier="2")
    assert from_volcano({"networkTopology": {"mode": "soft", "highestTierAllowed": 3}}) == TopologyAsk(
        preferred_tier="3"
    )
    assert from_volcano({"networkTopology": {}}) == TopologyAsk(required_tier="1")  # hard, tier 1
    assert from_volcano({"networkTopology": {"highestTierAllowed": "x"}}) == TopologyAsk(required_tier="x")
    assert from_volcano({}) == TopologyAsk()


def test_kai_leaf_subgroups_own_required_levels_are_read() -> None:
    spec = {
        "subGroups": [
            {"name": "decode", "topologyConstraint": {"requiredTopologyLevel": BLOCK}},
            {"name": "decode-0", "parent": "decode", "topologyConstraint": {"requiredTopologyLevel": RACK}},
            {"name": "decode-1", "parent": "decode", "minMember": 2},
            {"name": "prefill", "topologyConstraint": {"preferredTopologyLevel": RACK}},
        ]
    }
    # A parent's constraint (its leaves together) and a preferred level are not read.
    assert subgroup_levels(spec) == {"decode-0": RACK}
    assert subgroup_levels({}) == {}
