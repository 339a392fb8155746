"""Shared fixtures: one real local control plane per test session, a namespace per test."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.k8s_versions import (  # noqa: F401 (the k8s_versions marker's hooks)
    pytest_collection_modifyitems,
    pytest_report_header,
    pytest_terminal_summary,
)
from tests.localcluster import LocalCluster, procs
from tests.localcluster.fleet import FleetSpec, node_manifests
from tests.localcluster.operators import Operators
from tests.localcluster.phalanx import Phalanx


@pytest.fixture(scope="session")
def cluster() -> Iterator[LocalCluster]:
    """The real control plane (built on first use). Torn down when the session ends, also on failure."""
    local = LocalCluster()
    started: list[int] = []
    try:
        local.up()
        started = list(local.pids().values())
        yield local
    finally:
        if os.environ.get("PHALANX_KEEP_CLUSTER") != "1":
            local.down()
            # Teardown is part of the contract: nothing the cluster started may outlive the session.
            survivors = [pid for pid in started if procs.alive(pid)]
            assert started and not survivors, f"cluster processes still running after teardown: {survivors}"


def _namespace(cluster: LocalCluster, prefix: str, labels: dict[str, str]) -> Iterator[str]:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    label_args = [f"{k}={v}" for k, v in labels.items()]
    cluster.kubectl("create", "namespace", name)
    if label_args:
        cluster.kubectl("label", "namespace", name, *label_args)
    # Pods are refused until the namespace's default ServiceAccount exists.
    for _ in range(200):
        if cluster.kubectl("get", "sa", "default", "-n", name, check=False).returncode == 0:
            break
        time.sleep(0.1)
    yield name
    cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def namespace(cluster: LocalCluster) -> Iterator[str]:
    """A fresh namespace that is NOT opted in to gang scheduling."""
    yield from _namespace(cluster, "plain", {})


@pytest.fixture(scope="session")
def phalanx(cluster: LocalCluster) -> Iterator[Phalanx]:
    """Phalanx installed from deploy/local, webhook (real TLS) and controller (own SA token) running."""
    running = Phalanx(cluster)
    try:
        running.up()
        yield running
    finally:
        running.down()


@pytest.fixture(scope="session")
def operators(cluster: LocalCluster) -> Iterator[Operators]:
    """The workload operators, each started on first ``operators.ensure(name)`` and stopped (their
    webhook registrations removed) when the session ends. `make test` builds those named so in
    tests/e2e before the run."""
    running = Operators(cluster)
    try:
        yield running
    finally:
        running.down()


@pytest.fixture
def gang_namespace(cluster: LocalCluster, phalanx: Phalanx) -> Iterator[str]:
    """A fresh namespace opted in with phalanx.io/gang-scheduling=enabled."""
    yield from _namespace(cluster, "gang", {"phalanx.io/gang-scheduling": "enabled"})


@pytest.fixture
def other_gang_namespace(cluster: LocalCluster, phalanx: Phalanx) -> Iterator[str]:
    """A second opted-in namespace: another tenant."""
    yield from _namespace(cluster, "tenant", {"phalanx.io/gang-scheduling": "enabled"})


@pytest.fixture
def classes(cluster: LocalCluster) -> Iterator[dict[str, str]]:
    """Three PriorityClasses private to the test: low, high, and high that never preempts."""
    suffix = uuid.uuid4().hex[:6]
    names = {"low": f"low-{suffix}", "high": f"high-{suffix}", "never": f"never-{suffix}"}
    for key, value, policy in (("low", 100, None), ("high", 100000, None), ("never", 100000, "Never")):
        body: dict[str, Any] = {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": names[key]},
            "value": value,
        }
        if policy:
            body["preemptionPolicy"] = policy
        cluster.apply_objects([body])
    yield names
    cluster.kubectl("delete", "priorityclass", *names.values(), "--wait=false", check=False)


class NodePool:
    """Fake GPU nodes that only one test uses, so its capacity arithmetic is exact."""

    LABEL = "e2e.phalanx.io/pool"

    def __init__(self, cluster: LocalCluster, name: str) -> None:
        self.cluster = cluster
        self.name = name
        self.nodes: list[str] = []

    @staticmethod
    def hostname(node: str) -> str:
        """The node's ``kubernetes.io/hostname`` label, deliberately not its name."""
        return f"host-{node}"

    @property
    def selector(self) -> dict[str, str]:
        return {self.LABEL: self.name}

    def add(self, count: int, gpus: int = 8, **levels: Any) -> list[str]:
        """``levels``: FleetSpec's topology fields (four_levels=True: zone, block, rack and NVLink
        domain labels, named for this pool only)."""
        start = len(self.nodes)
        if levels.get("four_levels"):
            levels.setdefault("domain_prefix", f"{self.name}-")
        manifests = node_manifests(FleetSpec(gpu_nodes=count, gpus_per_node=gpus, cpu_nodes=0, **levels))
        for i, node in enumerate(manifests):
            node["metadata"]["name"] = name = f"{self.name}-{start + i}"
            # As on most clouds, the hostname label differs from the node's name.
            node["metadata"]["labels"]["kubernetes.io/hostname"] = self.hostname(name)
            node["metadata"]["labels"][self.LABEL] = self.name
            self.nodes.append(name)
        self.cluster.apply_objects(manifests)
        for name in self.nodes[start:]:
            self.cluster.kubectl("wait", "--for=condition=Ready", f"node/{name}", "--timeout=30s")
        return self.nodes[start:]

    def delete(self) -> None:
        if self.nodes:
            self.cluster.kubectl("delete", "node", *self.nodes, "--wait=false", check=False)


@pytest.fixture
def pool(cluster: LocalCluster) -> Iterator[NodePool]:
    nodes = NodePool(cluster, f"pool-{uuid.uuid4().hex[:6]}")
    yield nodes
    nodes.delete()
