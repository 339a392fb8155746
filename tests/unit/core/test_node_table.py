"""The node table a pass derives from the nodes is built once per set of Node objects and shared."""

from __future__ import annotations

from dataclasses import replace

from controller.core import PlannerConfig, plan
from controller.core.model import Admit, Snapshot, Wait
from controller.core.state import PassState, node_table

from .builders import gang, node, snapshot

CONFIG = PlannerConfig()


def cluster(gpus: int = 8) -> Snapshot:
    return snapshot(
        [node("a").gpus(gpus).label("disk", "ssd"), node("b").gpus(gpus)],
        [gang("g").min(2).gated_members(2, gpus=8, node_selector={"disk": "ssd"})],
    )


def test_the_same_node_objects_share_one_table() -> None:
    first = cluster()
    again = replace(first, nodes=tuple(first.nodes))  # another tuple, the very same Node objects
    assert node_table(again.nodes, CONFIG) is node_table(first.nodes, CONFIG)
    assert PassState(again, CONFIG).eligibility is PassState(first, CONFIG).eligibility


def test_new_or_reordered_nodes_build_a_new_table() -> None:
    first = cluster()
    table = node_table(first.nodes, CONFIG)
    assert node_table(first.nodes[::-1], CONFIG) is not table
    equal = tuple(replace(n) for n in first.nodes)  # equal, but other objects
    assert node_table(equal, CONFIG) is not table
    assert node_table(first.nodes, replace(CONFIG, topologies=(("default", ("rack",)),))) is not table


def test_a_shared_table_gives_the_plan_a_fresh_one_gives() -> None:
    small = cluster(gpus=8)
    big = cluster(gpus=16)  # as many nodes, other objects: no table of `small` may serve it
    for snap in (small, big, small, big):
        decisions = plan(snap, CONFIG).decisions
        assert decisions == plan(replace(snap, nodes=tuple(replace(n) for n in snap.nodes)), CONFIG).decisions
    # Only node a may take the gang (nodeSelector): 2 × 8 GPUs fit there with 16 GPUs, not with 8.
    assert isinstance(plan(small, CONFIG).decisions[0], Wait)
    assert isinstance(plan(big, CONFIG).decisions[0], Admit)
