"""A control plane of its own for the e2e tests that cannot share the suite's cluster (feature gates,
a fleet whose GPUs are DRA devices, a cluster-autoscaler beside it), with Phalanx on it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tests.localcluster import LocalCluster
from tests.localcluster.cluster import ClusterConfig
from tests.localcluster.phalanx import Phalanx, PhalanxOptions

# Something started beside the cluster before Phalanx (e.g. the cluster-autoscaler); returns its stop.
Companion = Callable[[LocalCluster], Callable[[], None]]


@contextmanager
def side_cluster(
    config: ClusterConfig, options: PhalanxOptions | None = None, companion: Companion | None = None
) -> Iterator[tuple[LocalCluster, Phalanx]]:
    cluster = LocalCluster(config)
    phalanx = Phalanx(cluster, options)
    stop_companion: Callable[[], None] | None = None
    try:
        cluster.up()
        if companion is not None:
            stop_companion = companion(cluster)
        phalanx.up()
        yield cluster, phalanx
    finally:
        phalanx.down()
        if stop_companion is not None:
            stop_companion()
        cluster.down()
