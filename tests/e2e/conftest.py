import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.conftest import NodePool, _namespace
from tests.e2e.side_cluster import side_cluster
from tests.localcluster import LocalCluster
from tests.localcluster.cluster import ClusterConfig
from tests.localcluster.fleet import FleetSpec
from tests.localcluster.phalanx import Phalanx

# The alpha parts of 1.37's Workload API, off on any cluster by default: the Job controller making a
# Job's Workload and PodGroup, a PodGroup's topology constraint, CompositePodGroups (v1alpha3).
ALPHA_GATES = ("WorkloadWithJob", "TopologyAwareWorkloadScheduling", "CompositePodGroup")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Everything under tests/e2e needs the real local control plane.
    for item in items:
        if "/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def alpha_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, Phalanx]]:
    """A second control plane with those gates on (and Phalanx on it), started once for the tests
    that need it; each adds its own NodePool, so their capacity does not mix."""
    config = ClusterConfig(
        name="phalanx-alpha",
        workdir=tmp_path_factory.mktemp("alpha-cluster"),
        fleet=FleetSpec(gpu_nodes=0, cpu_nodes=1),
        feature_gates=ALPHA_GATES,
        runtime_config=("scheduling.k8s.io/v1alpha3",),
    )
    with side_cluster(config) as both:
        yield both


@dataclass(frozen=True)
class AlphaGangs:
    """One test's share of the alpha cluster: an opted-in namespace and a pool of nodes of its own."""

    cluster: LocalCluster
    phalanx: Phalanx
    namespace: str
    pool: NodePool


@pytest.fixture
def alpha(alpha_cluster: tuple[LocalCluster, Phalanx]) -> Iterator[AlphaGangs]:
    cluster, phalanx = alpha_cluster
    pool = NodePool(cluster, f"alpha-{uuid.uuid4().hex[:6]}")
    namespaces = _namespace(cluster, "gang", {"phalanx.io/gang-scheduling": "enabled"})
    yield AlphaGangs(cluster, phalanx, next(namespaces), pool)
    next(namespaces, None)
    pool.delete()
