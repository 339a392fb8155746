"""The install tier's session: the image built, a local control plane with one real node beside
two fake GPU nodes, and Phalanx installed in-cluster with ``kubectl apply -k tests/install/overlay``.

Skips (saying why) where the machine cannot run a real node or build an image.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.install.prereqs import why_not_here
from tests.localcluster import procs
from tests.localcluster.cluster import REPO, ClusterConfig, LocalCluster, pki_dir
from tests.localcluster.fleet import FleetSpec
from tests.localcluster.realnode import RealNode, cluster_options, cluster_patches

OVERLAY = Path(__file__).with_name("overlay")
IMAGE_SCRIPT = Path(__file__).with_name("image.sh")
NAMESPACE = "phalanx-system"


def _log(message: str) -> None:
    print(f"[install {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Install:
    cluster: LocalCluster
    node: RealNode
    overlay: Path = OVERLAY

    def kubectl(self, *args: str, check: bool = True, timeout: float = 60.0) -> str:
        return self.cluster.kubectl(*args, check=check, timeout=timeout).stdout

    def wait(self, what: str, check: object, timeout: float = 120.0) -> None:
        self.cluster._poll(what, check, timeout, 0.5)


def _build_image(workdir: Path) -> Path:
    archive = workdir / "phalanx-image.tar"
    started = time.monotonic()
    subprocess.run(["bash", str(IMAGE_SCRIPT), "--save", str(archive)], check=True, stdout=subprocess.DEVNULL)
    _log(f"image built and saved in {time.monotonic() - started:.0f}s")
    return archive


def _deployments_available(cluster: LocalCluster) -> bool:
    items = cluster.kubectl_json("get", "deployments", "-n", NAMESPACE)["items"]
    return len(items) == 2 and all(
        d.get("status", {}).get("availableReplicas", 0) == d["spec"]["replicas"]
        and d["status"].get("updatedReplicas", 0) == d["spec"]["replicas"]
        for d in items
    )


def _start(cluster: LocalCluster, attempts: int = 2) -> None:
    # kwokctl picks its ports when it creates the cluster; on a machine where other local
    # clusters start at the same moment, one of them may take a port first (kwok then exits).
    for attempt in range(1, attempts + 1):
        try:
            cluster.up()
            return
        except TimeoutError as err:
            if attempt == attempts:
                raise
            _log(f"cluster start failed ({err}); retrying once")


@pytest.fixture(scope="session")
def install() -> Iterator[Install]:
    reason = why_not_here()
    if reason:
        pytest.skip(f"the install tier needs a real node: {reason}")
    workdir = Path(os.environ.get("PHALANX_INSTALL_DIR", REPO / ".local" / "install"))
    workdir.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    archive = _build_image(workdir)
    timings["image"] = time.monotonic() - t0
    cluster = LocalCluster(
        ClusterConfig(
            name="phalanx-install",
            workdir=workdir,
            fleet=FleetSpec(gpu_nodes=2, gpus_per_node=8, cpu_nodes=0),
            extra_options=cluster_options(),
            extra_component_patches=cluster_patches(pki_dir(workdir, "phalanx-install")),
        )
    )
    node = RealNode(cluster)
    started: list[int] = []
    try:
        t = time.monotonic()
        _start(cluster)
        node.up()
        started = list(cluster.pids().values()) + list(procs.read_pids(node.pid_dir).values())
        node.import_image(archive)
        timings["cluster+node"] = time.monotonic() - t
        t = time.monotonic()
        cluster.kubectl("apply", "-k", str(OVERLAY), timeout=120)
        cluster._poll(
            "the Phalanx Deployments to be Available", lambda: _deployments_available(cluster), 240, 1
        )
        timings["install"] = time.monotonic() - t
        _log("ready: " + ", ".join(f"{k} {v:.0f}s" for k, v in timings.items()))
        (workdir / "setup-timings.json").write_text(json.dumps(timings, indent=2))
        yield Install(cluster, node)
    finally:
        if os.environ.get("PHALANX_KEEP_CLUSTER") != "1":
            node.down()
            cluster.down()
            survivors = [pid for pid in started if procs.alive(pid)]
            assert not survivors, f"processes still running after teardown: {survivors}"
