"""Start, check and stop a local control plane with fake GPU nodes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.localcluster import procs
from tests.localcluster.binaries import ensure_binaries
from tests.localcluster.fleet import KWOK_NODE_ANNOTATION, FleetSpec, dra_manifests, node_manifests
from tests.localcluster.stages import stage_documents
from tests.localcluster.versions import KubeRelease, release

REPO = Path(__file__).resolve().parents[2]

NODES_PER_APPLY = 500


def _log(message: str) -> None:
    print(f"[localcluster {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def pki_dir(workdir: Path, name: str) -> Path:
    """Where kwokctl keeps a cluster's CA and admin certificate."""
    return workdir / "kwok" / "clusters" / name / "pki"


@dataclass
class ClusterConfig:
    name: str = "phalanx"
    # Everything the cluster writes (kwokctl workdir, kubeconfig, component logs) lives here.
    workdir: Path = field(
        default_factory=lambda: Path(os.environ.get("PHALANX_CLUSTER_DIR", REPO / ".local"))
    )
    fleet: FleetSpec = field(default_factory=FleetSpec)
    # The Kubernetes release (PHALANX_K8S_VERSION, else the default); its Workload API is served.
    release: KubeRelease = field(default_factory=release)
    # The scheduler's own gang plugin (GangScheduling); None: as the release runs it with the Workload
    # API on (on from 1.37, where it comes with GenericWorkload), so Phalanx is tested beside it.
    gang_plugin: bool | None = None
    # Further feature gates to turn on in every component (e.g. WorkloadWithJob).
    feature_gates: tuple[str, ...] = ()
    # Further API versions to serve (e.g. scheduling.k8s.io/v1alpha3 for CompositePodGroups).
    runtime_config: tuple[str, ...] = ()
    scheduler_qps: int = 50  # kube-scheduler's own default; raise for throughput benchmarks
    scheduler_burst: int = 100
    # The Job controller's client rate (kube-controller-manager's --kube-api-qps); None: its default.
    controller_manager_qps: int | None = None
    ready_timeout: float = 120.0
    # kwokctl componentsPatches added by callers (the real node moves the apiserver's advertise
    # address and certificate SANs so pods can reach it).
    extra_component_patches: list[dict[str, Any]] = field(default_factory=list)
    extra_options: dict[str, Any] = field(default_factory=dict)

    @property
    def runs_gang_plugin(self) -> bool:
        return self.release.gang_plugin_default if self.gang_plugin is None else self.gang_plugin


class LocalCluster:
    """A kwokctl-managed control plane. ``up()`` returns only when it is usable end to end."""

    def __init__(self, config: ClusterConfig | None = None) -> None:
        self.config = config or ClusterConfig()
        self.bin_dir: Path | None = None
        self.timings: dict[str, float] = {}

    # ---- paths ---------------------------------------------------------------------------------
    @property
    def kwok_workdir(self) -> Path:
        return self.config.workdir / "kwok"

    @property
    def cluster_dir(self) -> Path:
        return self.kwok_workdir / "clusters" / self.config.name

    @property
    def kubeconfig(self) -> Path:
        return self.config.workdir / "kubeconfig"

    @property
    def logs_dir(self) -> Path:
        return self.cluster_dir / "logs"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["KWOK_WORKDIR"] = str(self.kwok_workdir)
        env["KUBECONFIG"] = str(self.kubeconfig)
        assert self.bin_dir is not None
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{env.get('PATH', '')}"
        return env

    # ---- commands ------------------------------------------------------------------------------
    def _bin(self, name: str) -> str:
        if self.bin_dir is None:
            self.bin_dir = ensure_binaries(self.config.release, quiet=True)
        return str(self.bin_dir / name)

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        cmd = [self._bin("kubectl"), "--kubeconfig", str(self.kubeconfig), *args]
        result = subprocess.run(
            cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}"
            )
        return result

    def kubectl_stream(self, *args: str) -> subprocess.Popen[str]:
        """kubectl left running (``get --watch``), its output read when the caller stops it."""
        cmd = [self._bin("kubectl"), "--kubeconfig", str(self.kubeconfig), *args]
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def kubectl_json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def apply_objects(self, objects: list[dict[str, Any]], *extra: str, timeout: float = 60.0) -> None:
        self.kubectl(
            "apply",
            "--server-side",
            *extra,
            "-f",
            "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
            timeout=timeout,
        )

    def _kwokctl(
        self, *args: str, check: bool = True, timeout: float = 300.0
    ) -> subprocess.CompletedProcess[str]:
        cmd = [self._bin("kwokctl"), "--name", self.config.name, *args]
        result = subprocess.run(
            cmd, env=self._env(), capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"kwokctl {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-3000:]}"
            )
        return result

    # ---- lifecycle -----------------------------------------------------------------------------
    def _scheduler_config(self) -> dict[str, Any]:
        """The cluster's kube-scheduler configuration (kwokctl adds the kubeconfig)."""
        plugins = self.config.release.disabled_scheduler_plugins(self.config.runs_gang_plugin)
        profile: dict[str, Any] = {"schedulerName": "default-scheduler"}
        if plugins:
            profile["plugins"] = {"multiPoint": {"disabled": [{"name": p} for p in plugins]}}
        return {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            # With a configuration file, kube-scheduler ignores its --kube-api-qps/--kube-api-burst.
            "clientConnection": {"qps": self.config.scheduler_qps, "burst": self.config.scheduler_burst},
            "profiles": [profile],
        }

    def _config_yaml(self) -> str:
        assert self.bin_dir is not None
        b = self.bin_dir
        k8s = self.config.release
        scheduler_config = self.config.workdir / "kube-scheduler.yaml"
        scheduler_config.write_text(json.dumps(self._scheduler_config(), indent=2))
        options = {
            "runtime": "binary",
            "kubeVersion": k8s.version,
            "kubeApiserverBinary": str(b / "kube-apiserver"),
            "kubeControllerManagerBinary": str(b / "kube-controller-manager"),
            "kubeSchedulerBinary": str(b / "kube-scheduler"),
            "kubectlBinary": str(b / "kubectl"),
            "etcdBinary": str(b / "etcd"),
            "kwokControllerBinary": str(b / "kwok"),
            "bindAddress": "127.0.0.1",
            "securePort": True,
            "kubeAuthorization": True,
            "kubeAdmission": True,
            "kubeFeatureGates": k8s.feature_gates(self.config.runs_gang_plugin, self.config.feature_gates),
            "kubeRuntimeConfig": ",".join(
                [k8s.runtime_config, *(f"{api}=true" for api in self.config.runtime_config)]
            ),
            "kubeSchedulerConfig": str(scheduler_config),
            "nodeLeaseDurationSeconds": 40,
            **self.config.extra_options,
        }
        patches: list[dict[str, Any]] = [
            {
                "name": "etcd",
                "extraArgs": [{"key": "unsafe-no-fsync", "value": "true"}],
            },
            {
                # kwokctl's binary runtime lets kwok manage every node; a real kubelet's node
                # (tests/localcluster/realnode.py) must not get faked pod statuses.
                "name": "kwok-controller",
                "extraArgs": [
                    {"key": "manage-all-nodes", "value": "false", "override": True},
                    {
                        "key": "manage-nodes-with-annotation-selector",
                        "value": f"{KWOK_NODE_ANNOTATION}=fake",
                    },
                ],
            },
        ]
        if self.config.controller_manager_qps:
            qps = self.config.controller_manager_qps
            patches.append(
                {
                    "name": "kube-controller-manager",
                    "extraArgs": [
                        {"key": "kube-api-qps", "value": str(qps)},
                        {"key": "kube-api-burst", "value": str(2 * qps)},
                    ],
                }
            )
        config = {
            "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
            "kind": "KwokctlConfiguration",
            "options": options,
            "componentsPatches": [*patches, *self.config.extra_component_patches],
        }
        docs = [json.dumps(config), *stage_documents(b)]
        return "\n---\n".join(docs)

    def up(self) -> LocalCluster:
        """Start the cluster (replacing a stale one of the same name) and wait until it is usable.

        kwokctl picks its components' ports itself: beside other local clusters, one may be taken
        between its pick and its use, so a failed start is tried once more."""
        try:
            return self._start()
        except (RuntimeError, TimeoutError) as err:
            _log(f"the control plane did not start ({err}); once more")
            return self._start()

    def _start(self) -> LocalCluster:
        started = time.monotonic()
        self.bin_dir = ensure_binaries(self.config.release)
        self.timings["binaries"] = time.monotonic() - started
        self.config.workdir.mkdir(parents=True, exist_ok=True)
        self.down(quiet=True)
        config_path = self.config.workdir / "kwokctl.yaml"
        config_path.write_text(self._config_yaml())
        _log(f"starting control plane {self.config.release.version} (logs: {self.logs_dir})")
        t0 = time.monotonic()
        try:
            self._kwokctl(
                "create",
                "cluster",
                "--runtime",
                "binary",
                "--config",
                str(config_path),
                "--kubeconfig",
                str(self.kubeconfig),
                "--wait",
                f"{int(self.config.ready_timeout)}s",
            )
            self.timings["control_plane"] = time.monotonic() - t0
            self._wait_ready()
        except BaseException:
            _log(f"cluster failed to start; component logs are in {self.logs_dir}")
            self.down(quiet=True)
            raise
        self.timings["total"] = time.monotonic() - started
        _log(
            f"cluster ready in {self.timings['total'] - self.timings['binaries']:.1f}s "
            f"({self.config.fleet.gpu_nodes} GPU nodes × {self.config.fleet.gpus_per_node} GPUs "
            f"as {self.config.fleet.gpus_as}, "
            f"{self.config.fleet.cpu_nodes} CPU nodes); kubeconfig: {self.kubeconfig}"
        )
        return self

    def _poll(self, what: str, check: Any, timeout: float, interval: float = 0.25) -> None:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                if check():
                    return
            except Exception as err:  # keep polling; report the last error on timeout
                last = err
            time.sleep(interval)
        raise TimeoutError(
            f"timed out after {timeout:.0f}s waiting for {what}" + (f": {last}" if last else "")
        )

    def _wait_ready(self) -> None:
        t0 = time.monotonic()
        self._poll(
            "the apiserver's /readyz",
            lambda: self.kubectl("get", "--raw", "/readyz", check=False).returncode == 0,
            60,
        )
        # In slices: one apply of 5,000 nodes outlasts any sensible timeout on a small machine.
        nodes = node_manifests(self.config.fleet)
        for start in range(0, len(nodes), NODES_PER_APPLY):
            self.apply_objects(nodes[start : start + NODES_PER_APPLY], timeout=180.0)
        expected = self.config.fleet.gpu_nodes + self.config.fleet.cpu_nodes

        def nodes_ready() -> bool:
            items = self.kubectl_json("get", "nodes")["items"]
            ready = [
                n
                for n in items
                if any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in n.get("status", {}).get("conditions", [])
                )
            ]
            return len(ready) >= expected

        self._poll(f"{expected} nodes to be Ready", nodes_ready, self.config.ready_timeout, 0.5)
        if self.config.fleet.dra:
            self.apply_objects(dra_manifests(self.config.fleet))
        self.timings["nodes"] = time.monotonic() - t0
        # Pods in a new namespace are refused until its default ServiceAccount exists.
        probe = f"phalanx-probe-{uuid.uuid4().hex[:6]}"
        self.kubectl("create", "namespace", probe)
        self._poll(
            "the default ServiceAccount",
            lambda: self.kubectl("get", "sa", "default", "-n", probe, check=False).returncode == 0,
            60,
        )
        self.kubectl("delete", "namespace", probe, "--wait=false")
        self.timings["ready"] = time.monotonic() - t0

    def pids(self) -> dict[str, int]:
        return procs.read_pids(self.cluster_dir / "pids")

    def _started_bin_dir(self) -> Path | None:
        """The binaries the running cluster was started from (maybe another release than the
        one configured now): stopping it never builds anything."""
        try:
            config = json.loads((self.config.workdir / "kwokctl.yaml").read_text().split("\n---\n")[0])
            bin_dir = Path(config["options"]["kubeApiserverBinary"]).parent
        except (OSError, ValueError, KeyError):
            return None
        return bin_dir if (bin_dir / "kwokctl").is_file() else None

    def down(self, quiet: bool = False) -> None:
        """Stop every process of the cluster; logs stay in ``logs_dir`` (copied aside if deleted)."""
        pids = list(self.pids().values())
        if not pids and not self.cluster_dir.exists():
            return
        if self.logs_dir.is_dir():
            keep = self.config.workdir / "last-logs"
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(self.logs_dir, keep, dirs_exist_ok=True)
        if self.bin_dir is None:
            self.bin_dir = self._started_bin_dir()
        if self.bin_dir is None:
            try:
                self.bin_dir = ensure_binaries(self.config.release, quiet=True)
            except RuntimeError:
                self.bin_dir = None
        if self.bin_dir is not None:
            result = self._kwokctl(
                "delete", "cluster", "--kubeconfig", str(self.kubeconfig), check=False, timeout=120
            )
            if result.returncode != 0 and not quiet:
                _log(f"kwokctl delete cluster: {result.stderr.strip()[-500:]}")
        procs.terminate(pids)
        if not quiet:
            _log(f"cluster stopped; component logs kept in {self.config.workdir / 'last-logs'}")

    def status(self) -> dict[str, Any]:
        pids = self.pids()
        return {
            "name": self.config.name,
            "kubeconfig": str(self.kubeconfig),
            "logs": str(self.logs_dir),
            "components": {
                name: {"pid": pid, "alive": procs.alive(pid)} for name, pid in sorted(pids.items())
            },
        }
