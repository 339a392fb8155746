"""Run the real cluster-autoscaler beside a local cluster, with its kwok cloud provider.

The kwok provider grows a node group by creating Nodes from the group's template (a Node kept in a
ConfigMap); the cluster's kwok controller then makes them Ready, as it does the fleet's own fake
nodes. ``Autoscaler(cluster).ensure(groups)`` builds the binary if it is not cached
(``build-autoscaler.sh``), installs the ProvisioningRequest CRD from the autoscaler's apis module
archive, writes the provider's ConfigMaps in kube-system, starts the autoscaler with
``--enable-provisioning-requests`` and short scale-down timings, and returns once it serves its
health check. ``down()`` stops it and deletes the nodes it created.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tests.localcluster import procs
from tests.localcluster.cluster import LocalCluster
from tests.localcluster.fleet import GPU_PRODUCT, KWOK_NODE_ANNOTATION

BUILD_SCRIPT = Path(__file__).with_name("build-autoscaler.sh")
NAMESPACE = "kube-system"
PROVIDER_CONFIG = "phalanx-kwok-provider-config"
TEMPLATES = "phalanx-kwok-node-templates"
# The template label that names a node's group (the provider groups template nodes by it).
NODE_GROUP_LABEL = "autoscaling.phalanx.test/node-group"
# Annotations the kwok provider reads on a template node (its kwok_constants.go).
MIN_COUNT = "cluster-autoscaler.kwok.nodegroup/min-count"
MAX_COUNT = "cluster-autoscaler.kwok.nodegroup/max-count"
NODE_GROUP_ANNOTATION = "cluster-autoscaler.kwok.nodegroup/name"
CRD_NAME = "provisioningrequests.autoscaling.x-k8s.io"


def _log(message: str) -> None:
    print(f"[autoscaler {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class NodeGroup:
    """A group of identical GPU nodes the autoscaler may grow from ``min_size`` to ``max_size``."""

    name: str = "gpu-pool"
    min_size: int = 0
    max_size: int = 4
    gpus: int = 8
    cpu: str = "64"
    memory: str = "512Gi"
    labels: tuple[tuple[str, str], ...] = ()

    def template(self) -> dict[str, Any]:
        capacity = {"cpu": self.cpu, "memory": self.memory, "pods": "110", "nvidia.com/gpu": str(self.gpus)}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "annotations": {
                    KWOK_NODE_ANNOTATION: "fake",
                    "node.alpha.kubernetes.io/ttl": "0",
                    MIN_COUNT: str(self.min_size),
                    MAX_COUNT: str(self.max_size),
                },
                "labels": {
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.product": GPU_PRODUCT,
                    "nvidia.com/gpu.count": str(self.gpus),
                    "topology.kubernetes.io/zone": "zone-auto",
                    NODE_GROUP_LABEL: self.name,
                    **dict(self.labels),
                },
            },
            "spec": {},
            "status": {
                "allocatable": capacity,
                "capacity": capacity,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            },
        }


@dataclass(frozen=True)
class AutoscalerSettings:
    scan_interval: str = "2s"
    # Short, so a test sees nodes come and go within it.
    scale_down_unneeded_time: str = "20s"
    scale_down_delay_after_add: str = "20s"
    # The autoscaler's own retry of a ProvisioningRequest it could not serve.
    provisioning_request_initial_backoff: str = "10s"
    max_node_provision_time: str = "2m"


def build() -> Path:
    """Build (or find cached) the autoscaler; the directory with the binary and manifests/."""
    result = subprocess.run(
        ["nice", "-n", "10", "bash", str(BUILD_SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=sys.stderr,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"building the cluster-autoscaler failed (exit {result.returncode})")
    return Path(result.stdout.strip().splitlines()[-1])


def provider_config(groups: tuple[NodeGroup, ...]) -> dict[str, Any]:
    """The kwok provider's own configuration (its kwok_types.go KwokProviderConfig)."""
    return {
        "apiVersion": "v1alpha1",
        "readNodesFrom": "configmap",
        "nodegroups": {"fromNodeLabelKey": NODE_GROUP_LABEL},
        # skipTaint: without it every template gets a kwok-provider NoSchedule taint no pod tolerates.
        "nodes": {
            "skipTaint": True,
            "gpuConfig": {"gpuLabelKey": "nvidia.com/gpu.product", "availableGPUTypes": {GPU_PRODUCT: {}}},
        },
        "configmap": {"name": TEMPLATES},
    }


class Autoscaler:
    def __init__(self, cluster: LocalCluster, settings: AutoscalerSettings | None = None) -> None:
        self.cluster = cluster
        self.settings = settings or AutoscalerSettings()
        self.dir = cluster.config.workdir / "autoscaler"
        self.process: subprocess.Popen[bytes] | None = None
        self.log: IO[bytes] | None = None
        self.port = 0
        self.groups: tuple[NodeGroup, ...] = ()

    @property
    def log_path(self) -> Path:
        return self.dir / "cluster-autoscaler.log"

    def ensure(self, *groups: NodeGroup) -> Autoscaler:
        """The autoscaler, running with these node groups (default: one of 0..4 nodes x 8 GPUs)."""
        if self.process is not None and self.process.poll() is None:
            return self
        self.groups = groups or (NodeGroup(),)
        t0 = time.monotonic()
        home = build()
        self.dir.mkdir(parents=True, exist_ok=True)
        self._install_crd(home / "manifests" / "provisioningrequests.yaml")
        self._write_config()
        self._start(home / "cluster-autoscaler")
        self._wait_serving()
        _log(
            f"cluster-autoscaler running in {time.monotonic() - t0:.1f}s with node groups "
            f"{', '.join(f'{g.name} ({g.min_size}..{g.max_size} x {g.gpus} GPUs)' for g in self.groups)} "
            f"(log {self.log_path})"
        )
        return self

    def _install_crd(self, path: Path) -> None:
        self.cluster.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path), timeout=120)
        self.cluster.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")

    def _write_config(self) -> None:
        templates = {"apiVersion": "v1", "kind": "List", "items": [g.template() for g in self.groups]}
        config_maps = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": PROVIDER_CONFIG, "namespace": NAMESPACE},
                "data": {"config": json.dumps(provider_config(self.groups))},
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": TEMPLATES, "namespace": NAMESPACE},
                "data": {"templates": json.dumps(templates)},
            },
        ]
        self.cluster.apply_objects(config_maps, "--force-conflicts")

    def _start(self, binary: Path) -> None:
        self.port = procs.free_port()
        s = self.settings
        argv = [
            str(binary),
            "--cloud-provider=kwok",
            f"--kubeconfig={self.cluster.kubeconfig}",
            f"--address=127.0.0.1:{self.port}",
            "--leader-elect=false",
            "--enable-provisioning-requests",
            # Its ProvisioningRequest client shares this setting; protobuf cannot encode a CRD's objects.
            "--kube-api-content-type=application/json",
            f"--provisioning-request-initial-backoff-time={s.provisioning_request_initial_backoff}",
            f"--scan-interval={s.scan_interval}",
            f"--scale-down-unneeded-time={s.scale_down_unneeded_time}",
            f"--scale-down-delay-after-add={s.scale_down_delay_after_add}",
            f"--max-node-provision-time={s.max_node_provision_time}",
            "--skip-nodes-with-local-storage=false",
            "--v=2",
        ]
        env = {
            **os.environ,
            # The provider reads its ConfigMaps from POD_NAMESPACE, with the kubeconfig in local mode.
            "KWOK_PROVIDER_MODE": "local",
            "KUBECONFIG": str(self.cluster.kubeconfig),
            "POD_NAMESPACE": NAMESPACE,
            "KWOK_PROVIDER_CONFIGMAP": PROVIDER_CONFIG,
        }
        self.log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            argv, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=self.dir
        )
        (self.dir / "cluster-autoscaler.pid").write_text(str(self.process.pid))

    def _wait_serving(self, timeout: float = 90.0) -> None:
        assert self.process is not None
        url = f"http://127.0.0.1:{self.port}/health-check"
        procs.wait_serving(url, self.process, "the cluster-autoscaler", self.log_path, timeout, interval=0.5)

    def nodes(self, group: str | None = None) -> list[str]:
        """The names of the nodes the autoscaler created (of one group, or of all)."""
        items = self.cluster.kubectl_json("get", "nodes")["items"]
        names = []
        for node in items:
            owner = node["metadata"].get("annotations", {}).get(NODE_GROUP_ANNOTATION)
            if owner is not None and (group is None or owner == group):
                names.append(node["metadata"]["name"])
        return sorted(names)

    def down(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
            self.process = None
            (self.dir / "cluster-autoscaler.pid").unlink(missing_ok=True)
        if self.log is not None:
            self.log.close()
            self.log = None
        # Nodes it made stay otherwise (its own cleanup on exit is best effort).
        for name in self.nodes():
            self.cluster.kubectl("delete", "node", name, "--wait=false", check=False)

    def __enter__(self) -> Autoscaler:
        return self

    def __exit__(self, *_: Any) -> None:
        self.down()


def stop_leftover_autoscaler(workdir: Path) -> list[int]:
    """Stop an autoscaler that `up --autoscaler` or a crashed session left running; its pid."""
    pid_file = workdir / "autoscaler" / "cluster-autoscaler.pid"
    try:
        pid = int(pid_file.read_text().strip())
        program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except (OSError, ValueError):
        pid_file.unlink(missing_ok=True)
        return []
    pid_file.unlink(missing_ok=True)
    # Only a process that is still ours (pids are reused): the cached autoscaler binary.
    if program.endswith(b"/cluster-autoscaler") and b"/autoscaler/" in program:
        procs.terminate([pid])
        return [pid]
    return []
