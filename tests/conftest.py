"""Shared fixtures: one real local control plane per test session, a namespace per test."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.localcluster import LocalCluster, procs


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
