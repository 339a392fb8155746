"""The install tier's session: the release built into its own ``dist/`` (``python -m deploy.release``: the
install manifests and the image's OCI archive), a local control plane with one real node beside two
fake GPU nodes, the archive imported into the node's containerd and the release's manifests applied
with ``kubectl apply --server-side -f`` — the files ``kubectl phalanx preflight`` lists, with only
the Phalanx pods pinned to the real node (the other nodes are KWOK's).

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
import yaml

from tests.install.prereqs import why_not_here
from tests.localcluster import procs
from tests.localcluster.cluster import REPO, ClusterConfig, LocalCluster, pki_dir
from tests.localcluster.fleet import FleetSpec
from tests.localcluster.realnode import RealNode, cluster_options, cluster_patches

NAMESPACE = "phalanx-system"


def _log(message: str) -> None:
    print(f"[install {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Install:
    cluster: LocalCluster
    node: RealNode
    manifest: Path  # what was applied: the release's files, the Phalanx pods pinned to the real node

    def kubectl(self, *args: str, check: bool = True, timeout: float = 60.0) -> str:
        return self.cluster.kubectl(*args, check=check, timeout=timeout).stdout

    def wait(self, what: str, check: object, timeout: float = 120.0) -> None:
        self.cluster._poll(what, check, timeout, 0.5)


def _build_release(workdir: Path) -> Path:
    """``make release`` into ``workdir/dist``: the manifests and the image archive."""
    out = workdir / "dist"
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "deploy.release", "--out", str(out)], check=True, cwd=REPO)
    _log(f"release built in {time.monotonic() - started:.0f}s")
    return out


def _pinned(dist: Path, files: list[str], workdir: Path) -> Path:
    """The release's files as one manifest, with the Phalanx pods pinned to the real node."""
    objects = [doc for name in files for doc in yaml.safe_load_all((dist / name).read_text()) if doc]
    for obj in objects:
        if obj["kind"] == "Deployment":
            obj["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "real-node"}
    path = workdir / "applied.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return path


def _preflight_files(cluster: LocalCluster) -> list[str]:
    """What ``kubectl phalanx preflight`` says to apply on this cluster (it must not block)."""
    result = subprocess.run(
        [sys.executable, "-m", "controller.cli", "preflight", "-o", "json"],
        env={**os.environ, "KUBECONFIG": str(cluster.kubeconfig)},
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    files: list[str] = json.loads(result.stdout)["apply"]
    return files


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
    dist = _build_release(workdir)
    (archive,) = dist.glob("phalanx-*-image.oci.tar")
    timings["release"] = time.monotonic() - t0
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
        manifest = _pinned(dist, _preflight_files(cluster), workdir)
        cluster.kubectl("apply", "--server-side", "-f", str(manifest), timeout=120)
        cluster._poll(
            "the Phalanx Deployments to be Available", lambda: _deployments_available(cluster), 240, 1
        )
        timings["install"] = time.monotonic() - t
        _log("ready: " + ", ".join(f"{k} {v:.0f}s" for k, v in timings.items()))
        (workdir / "setup-timings.json").write_text(json.dumps(timings, indent=2))
        yield Install(cluster, node, manifest)
    finally:
        if os.environ.get("PHALANX_KEEP_CLUSTER") != "1":
            node.down()
            cluster.down()
            survivors = [pid for pid in started if procs.alive(pid)]
            assert not survivors, f"processes still running after teardown: {survivors}"
