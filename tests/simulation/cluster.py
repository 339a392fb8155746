"""The simulated cluster: ``nodes`` × ``gpus_per_node`` GPUs, grouped in racks and zones.

``ClusterSpec.core_nodes()`` gives the core's ``Node`` records (named ``node-0000`` ... so that the
core's name order is the index order, labelled with rack and zone). ``FreeGpus`` is the free room
the engine keeps for every policy: per node free GPUs plus buckets by free level, so "which node
has the least room that still fits p GPUs" (best fit) is O(levels).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from controller.core.config import NVLINK_LABEL, RACK_LABEL, ZONE_LABEL
from controller.core.model import Node
from shared.constants import GPU_RESOURCE
from tests.simulation.trace import GangShape

HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    nodes: int = 64
    gpus_per_node: int = 8
    rack_size: int = 8  # nodes per rack (0: no rack labels)
    racks_per_zone: int = 4  # (0: no zone labels)
    nvlink_size: int = 0  # nodes per NVLink domain inside a rack (0: no NVLink labels)

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError("a cluster needs >= 1 node of >= 1 GPU")

    @property
    def total_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    def node_name(self, i: int) -> str:
        return f"node-{i:04d}"

    def core_nodes(self) -> tuple[Node, ...]:
        out = []
        for i in range(self.nodes):
            labels = {HOSTNAME_LABEL: self.node_name(i)}
            if self.rack_size > 0:
                rack = i // self.rack_size
                labels[RACK_LABEL] = f"rack-{rack:03d}"
                if self.racks_per_zone > 0:
                    labels[ZONE_LABEL] = f"zone-{rack // self.racks_per_zone:02d}"
            if self.nvlink_size > 0:
                labels[NVLINK_LABEL] = f"nvl-{i // self.nvlink_size:04d}"
            out.append(
                Node(
                    name=self.node_name(i),
                    allocatable={"pods": 110, GPU_RESOURCE: self.gpus_per_node},
                    labels=labels,
                )
            )
        return tuple(out)

    def narrowest(self, nodes: Sequence[int]) -> str:
        """The narrowest domain holding every one of ``nodes``: node, nvlink, rack, zone or cluster."""
        if len(set(nodes)) <= 1:
            return "node"
        levels = (
            ("nvlink", self.nvlink_size),
            ("rack", self.rack_size),
            ("zone", self.rack_size * self.racks_per_zone if self.rack_size else 0),
        )
        for name, size in levels:
            if size > 0 and len({i // size for i in nodes}) == 1:
                return name
        return "cluster"

    def fits_empty(self, shape: GangShape) -> bool:
        """Could the gang run on the empty cluster?"""
        per_node = self.gpus_per_node // shape.per_pod
        return per_node > 0 and shape.pods <= per_node * self.nodes


class FreeGpus:
    """Free GPUs per node, with nodes bucketed by free level."""

    def __init__(self, nodes: int, gpus_per_node: int) -> None:
        self.capacity = gpus_per_node
        self.free = [gpus_per_node] * nodes
        # buckets[g]: nodes with exactly g free GPUs (dict as an insertion-ordered set)
        self.buckets: list[dict[int, None]] = [{} for _ in range(gpus_per_node + 1)]
        for i in range(nodes):
            self.buckets[gpus_per_node][i] = None
        self.total_free = nodes * gpus_per_node

    def take(self, node: int, gpus: int) -> None:
        old = self.free[node]
        if gpus > old:
            raise AssertionError(f"node {node} overcommitted: {gpus} GPUs asked, {old} free")
        self._move(node, old, old - gpus)

    def give(self, node: int, gpus: int) -> None:
        old = self.free[node]
        if old + gpus > self.capacity:
            raise AssertionError(f"node {node} would have {old + gpus} free GPUs of {self.capacity}")
        self._move(node, old, old + gpus)

    def _move(self, node: int, old: int, new: int) -> None:
        if old != new:
            del self.buckets[old][node]
            self.buckets[new][node] = None
            self.free[node] = new
            self.total_free += new - old

    def max_free(self) -> int:
        for level in range(self.capacity, 0, -1):
            if self.buckets[level]:
                return level
        return 0

    def best_fit(self, gpus: int) -> int | None:
        """The lowest-numbered node among those with the least free room >= `gpus`, or None."""
        for level in range(max(gpus, 1), self.capacity + 1):
            bucket = self.buckets[level]
            if bucket:
                return min(bucket)
        return None

    def upper_bound(self, per_pod: int) -> int:
        """How many pods of `per_pod` GPUs fit at most right now."""
        if per_pod <= 0:
            return 1 << 30
        return sum(
            len(self.buckets[level]) * (level // per_pod) for level in range(per_pod, self.capacity + 1)
        )

    def place_all(self, shape: GangShape) -> list[int] | None:
        """Best-fit every pod of the gang, all or nothing. Booked on success."""
        if self.upper_bound(shape.per_pod) < shape.pods:
            return None
        nodes: list[int] = []
        for _ in range(shape.pods):
            node = self.best_fit(shape.per_pod)
            if node is None:  # pragma: no cover - the bound above is exact for one shape
                for i in nodes:
                    self.give(i, shape.per_pod)
                return None
            self.take(node, shape.per_pod)
            nodes.append(node)
        return nodes

    def used(self) -> int:
        return self.capacity * len(self.free) - self.total_free

    def snapshot(self) -> Sequence[int]:
        return tuple(self.free)
