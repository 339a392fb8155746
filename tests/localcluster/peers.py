"""The gang schedulers Phalanx is compared with, run against the local cluster as local processes.

Each ``System`` installs itself on a fresh ``LocalCluster`` the way its own documentation sets it
up for gang scheduling, starts its processes (peers with the cluster's admin kubeconfig; webhooks
registered by URL on loopback with certificates from ``certs/``), and says how its users express a
gang: a ``batch/v1`` Job of ``size`` pods plus whatever the system needs beside it.

- ``phalanx``: plain Jobs in a namespace labelled ``phalanx.io/gang-scheduling=enabled``.
- ``coscheduling`` (scheduler-plugins): a second kube-scheduler with the Coscheduling profile of
  ``manifests/coscheduling/scheduler-config.yaml`` plus the PodGroup controller; a
  ``scheduling.x-k8s.io`` PodGroup and the pod label ``scheduling.x-k8s.io/pod-group``.
- ``kueue``: ``cmd/kueue`` with the ``batch/job`` integration and ``waitForPodsReady``
  (``blockAdmission``), its CRDs with the conversion webhooks its own install adds (v1beta2 served,
  v1beta1 stored), one ClusterQueue whose quota is the whole fleet and a LocalQueue per
  namespace; Jobs carry ``kueue.x-k8s.io/queue-name``. Pods are placed by the stock scheduler.
- ``volcano``: ``vc-scheduler`` with the chart's default configuration and
  ``vc-controller-manager``; a ``scheduling.volcano.sh`` PodGroup in the default queue, pods with
  the annotation ``scheduling.k8s.io/group-name`` and ``schedulerName: volcano``.
- ``kai`` (NVIDIA KAI-scheduler): its scheduler (the configuration KAI's operator writes for the
  chart's default SchedulingShard), binder, podgroupcontroller, queuecontroller and admission
  webhook; a parent and a leaf Queue whose quota is the whole fleet; a ``scheduling.run.ai/v2alpha2``
  PodGroup (``minMember``) in the leaf queue, pods with the annotation ``pod-group-name``, the
  label ``kai.scheduler/queue`` and ``schedulerName: kai-scheduler``. KAI's podgrouper is not run:
  it would give every pod of a ``batch/v1`` Job a PodGroup of its own (see ``KaiSystem``).
- ``native``: the stock kube-scheduler's own gang scheduling (Kubernetes 1.36 and later: the
  ``GenericWorkload`` gate and its ``GangScheduling`` plugin, nothing installed beside them); a
  native ``scheduling.k8s.io`` PodGroup (``schedulingPolicy.gang.minCount``) and the Job's pod
  template linked to it with ``spec.schedulingGroup.podGroupName``.

A gang that must run inside one domain of a node label (the ``topology`` scenario) is written as
each system's users write it (``System.topology_gang``): Phalanx's annotation
``phalanx.io/topology-required``; Kueue's Topology Aware Scheduling (a ``Topology`` of the fleet's
zone, rack and hostname labels, the flavor naming it, and the pod-template annotation
``kueue.x-k8s.io/podset-required-topology``); KAI's topology-aware scheduling (a ``kai.scheduler``
``Topology`` of the same labels, the Job's annotations ``kai.scheduler/topology`` and
``kai.scheduler/topology-required-placement``, and the PodGroup's ``topologyConstraint`` its
podgrouper would write from them); Volcano's network-topology-aware scheduling (a newer Volcano
than the other scenarios', ``TOPOLOGY_BUILDS``: HyperNodes of the fleet, tier 1 a rack's nodes and
tier 2 a zone's racks, the scheduler's ``network-topology-aware`` plugin, and the PodGroup's
``networkTopology`` of mode ``hard`` with ``highestTierAllowed: 1``). Systems that cannot say it
at the pinned version say why (``topology_unsupported``) and are not run.

Binaries come from ``build-peers.sh`` (cache outside the repo, keyed by version).
"""

from __future__ import annotations

import base64
import copy
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar

import yaml

from shared.jsonread import JsonObject
from tests import builders
from tests.localcluster import procs
from tests.localcluster.cluster import REPO, LocalCluster
from tests.localcluster.fleet import FleetSpec, node_manifests
from tests.localcluster.phalanx import Phalanx, PhalanxOptions

BUILD_SCRIPT = Path(__file__).with_name("build-peers.sh")
GANG_LABEL = "bench.phalanx.io/gang"
PEER_NAMES = ("phalanx", "coscheduling", "kueue", "volcano", "kai", "native")
# Systems that are part of the control plane itself: nothing to build. ``floor`` is no gang
# scheduler at all, the reference the others are measured against, not a peer.
BUILT_IN = ("native", "floor")
FLOOR = "floor"
# The build a system runs the topology scenario with, where it is not the one of the other
# scenarios (``build-peers.sh`` names both): Volcano says "one rack" from v1.12 on.
TOPOLOGY_BUILDS = {"volcano": "volcano-topology"}
# Every scheduler that binds pods talks to the apiserver at the same rate in every run.
SCHEDULER_QPS = 100
SCHEDULER_BURST = 200
KUEUE_METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")


def _log(message: str) -> None:
    print(f"[peers {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def build_peers(
    names: tuple[str, ...] = ("coscheduling", "kueue", "volcano", "kai"),
) -> dict[str, Path | None]:
    """Build what is missing; name -> binary directory, or None where it cannot be built here."""
    found: dict[str, Path | None] = {}
    for name in names:
        result = subprocess.run(
            ["bash", str(BUILD_SCRIPT), name],
            stdout=subprocess.PIPE,
            stderr=sys.stderr,
            text=True,
            check=False,
        )
        for line in result.stdout.splitlines():
            peer, _, where = line.partition("\t")
            found[peer] = None if where == "BLOCKED" else Path(where)
        found.setdefault(name, None)
    return found


def blocker(name: str) -> str:
    """The recorded reason a peer could not be built (empty when there is none)."""
    cache = Path(os.environ.get("PHALANX_CACHE", Path.home() / ".cache" / "phalanx")) / "bin" / "peers"
    texts = [p.read_text().strip() for p in sorted(cache.glob(f"{name}-v*.blocked"))]
    return "\n".join(texts)


def gang_job(namespace: str, name: str, size: int, gpus: int, run_for: str) -> JsonObject:
    """The Job every system runs: ``size`` pods of ``gpus`` GPUs each, completing after ``run_for``."""
    return (
        builders.job(name)
        .namespace(namespace)
        .label(GANG_LABEL, name)
        .template_label(GANG_LABEL, name)
        .parallelism(size)
        .backoff_limit(0)
        .run_for(run_for)
        .image("pause")
        .gpus(gpus)
        .requests(**{"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)})
        .build()
    )


def _bytes(quantity: str) -> int:
    """A Kubernetes memory quantity with a binary suffix (or none) in bytes."""
    for suffix, power in (("Ki", 1), ("Mi", 2), ("Gi", 3), ("Ti", 4)):
        if quantity.endswith(suffix):
            return int(quantity[: -len(suffix)]) * 1024**power
    return int(quantity)


def _read_yaml_docs(path: Path) -> list[JsonObject]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@dataclass
class System:
    """One gang scheduler: install, start, express a gang, stop."""

    # Settings of the cluster this system needs (ClusterConfig fields), e.g. the scheduler's gang plugin.
    cluster_settings: ClassVar[dict[str, Any]] = {}
    # Why this system cannot require a gang inside one domain of a node label here, or None.
    topology_unsupported: ClassVar[str | None] = "the harness writes no topology request for it"

    name: str
    cluster: LocalCluster
    bin_dir: Path | None = None
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _logs: list[IO[bytes]] = field(default_factory=list)
    # The node label every gang must run inside one domain of (set before ``up``), or None.
    topology: str | None = None

    @property
    def dir(self) -> Path:
        return self.cluster.config.workdir / "peers" / self.name

    # ---- to override ---------------------------------------------------------------------------
    def up(self) -> None:
        raise NotImplementedError

    def prepare_namespace(self, namespace: str) -> None:
        """Whatever a namespace needs before users submit gangs to it."""

    def gang(self, namespace: str, name: str, size: int, gpus: int, run_for: str) -> list[JsonObject]:
        raise NotImplementedError

    def topology_gang(
        self, namespace: str, name: str, size: int, gpus: int, run_for: str, key: str
    ) -> list[JsonObject]:
        """The gang, every member required inside one domain of node label ``key``."""
        raise NotImplementedError(self.topology_unsupported)

    def own_figures(self) -> dict[str, float]:
        """What the system itself reports about the run (its own metrics), where it has any."""
        return {}

    # ---- shared --------------------------------------------------------------------------------
    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.processes.items() if p.poll() is None}

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        self.dir.mkdir(parents=True, exist_ok=True)
        log = (self.dir / f"{name}.log").open("ab")
        self._logs.append(log)
        process = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig), **(env or {})},
            cwd=self.dir,
        )
        self.processes[name] = process
        return process

    def wait_http(self, url: str, process: subprocess.Popen[bytes], timeout: float = 120) -> None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        procs.wait_serving(url, process, self.name, self.dir, timeout, context=context)

    def apply_files(self, paths: list[Path]) -> None:
        self.apply_objects([doc for p in paths for doc in _read_yaml_docs(p)])

    def apply_objects(self, objects: list[JsonObject]) -> None:
        """Apply, then wait for the CustomResourceDefinitions among them to be served."""
        self.cluster.apply_objects(objects, "--force-conflicts")
        for obj in objects:
            if obj.get("kind") == "CustomResourceDefinition":
                self.cluster.kubectl(
                    "wait", "--for=condition=Established", f"crd/{obj['metadata']['name']}", "--timeout=60s"
                )

    def down(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        self.processes.clear()
        for log in self._logs:
            log.close()
        self._logs.clear()


class PhalanxSystem(System):
    # Controller settings beyond the e2e defaults (none: Phalanx as installed).
    controller_env: ClassVar[dict[str, str]] = {}

    def up(self) -> None:
        options = PhalanxOptions()
        options.controller_env.update(self.controller_env)
        self.phalanx = Phalanx(self.cluster, options)
        self.phalanx.up()
        assert self.phalanx.webhook is not None and self.phalanx.controller is not None
        self.processes = {"webhook": self.phalanx.webhook, "controller": self.phalanx.controller}

    def prepare_namespace(self, namespace: str) -> None:
        self.cluster.kubectl(
            "label", "namespace", namespace, "phalanx.io/gang-scheduling=enabled", "--overwrite"
        )

    def gang(self, namespace: str, name: str, size: int, gpus: int, run_for: str) -> list[JsonObject]:
        return [gang_job(namespace, name, size, gpus, run_for)]

    topology_unsupported: ClassVar[str | None] = None

    def topology_gang(
        self, namespace: str, name: str, size: int, gpus: int, run_for: str, key: str
    ) -> list[JsonObject]:
        body = gang_job(namespace, name, size, gpus, run_for)
        body["metadata"].setdefault("annotations", {})["phalanx.io/topology-required"] = key
        return [body]

    # Where the controller's time went: its passes, its gate lifts and its status writes.
    OWN_METRICS: ClassVar[dict[str, str]] = {
        "planning_passes": "phalanx_planning_pass_seconds_count",
        "planning_s": "phalanx_planning_pass_seconds_sum",
        "admissions": "phalanx_gang_admission_latency_seconds_count",
        "gate_lifting_s": "phalanx_gang_admission_latency_seconds_sum",
        "status_writes": "phalanx_status_writes_total",
    }

    def own_figures(self) -> dict[str, float]:
        samples: dict[str, float] = {}
        for line in self.phalanx.metrics().splitlines():
            name, _, value = line.partition(" ")
            if name in self.OWN_METRICS.values():
                samples[name] = float(value)
        return {key: round(samples[name], 3) for key, name in self.OWN_METRICS.items() if name in samples}

    def down(self) -> None:
        self.phalanx.down()
        self.processes.clear()


class PhalanxReservingSystem(PhalanxSystem):
    """Phalanx with its opt-in starvation protection (a gang waiting 10 s gets a reservation)."""

    controller_env: ClassVar[dict[str, str]] = {"PHALANX_CONTROLLER_STARVATION_AGE_SECONDS": "10"}


class CoschedulingSystem(System):
    SCHEDULER_NAME = "scheduler-plugins-scheduler"

    def up(self) -> None:
        assert self.bin_dir is not None
        manifests = self.bin_dir / "manifests" / "manifests"
        self.apply_files(
            [manifests / "coscheduling" / "crd.yaml", manifests / "capacityscheduling" / "crd.yaml"]
        )
        stock = _read_yaml_docs(manifests / "coscheduling" / "scheduler-config.yaml")[0]
        config = copy.deepcopy(stock)
        config["clientConnection"] = {
            "kubeconfig": str(self.cluster.kubeconfig),
            "qps": SCHEDULER_QPS,
            "burst": SCHEDULER_BURST,
        }
        # A second scheduler beside the cluster's own, as scheduler-plugins installs it.
        config["profiles"][0]["schedulerName"] = self.SCHEDULER_NAME
        self.dir.mkdir(parents=True, exist_ok=True)
        config_path = self.dir / "scheduler-config.yaml"
        config_path.write_text(yaml.safe_dump(config))
        port = procs.free_port()
        kubeconfig = str(self.cluster.kubeconfig)
        scheduler = self.spawn(
            "scheduler",
            [
                str(self.bin_dir / "kube-scheduler"),
                f"--config={config_path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                "--v=1",
            ],
        )
        self.spawn(
            "controller",
            [
                str(self.bin_dir / "controller"),
                f"--metricsAddr=127.0.0.1:{procs.free_port()}",
                f"--probeAddr=127.0.0.1:{procs.free_port()}",
                f"--qps={SCHEDULER_QPS}",
                f"--burst={SCHEDULER_BURST}",
            ],
        )
        self.wait_http(f"https://127.0.0.1:{port}/healthz", scheduler)

    def gang(self, namespace: str, name: str, size: int, gpus: int, run_for: str) -> list[JsonObject]:
        body = gang_job(namespace, name, size, gpus, run_for)
        template = body["spec"]["template"]
        template["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = name
        template["spec"]["schedulerName"] = self.SCHEDULER_NAME
        group = {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": size},
        }
        return [group, body]


def kustomized_conversions(crd_dir: Path) -> list[JsonObject]:
    """The conversion-webhook patches Kueue's own install applies to its CRDs (the patches its
    ``crd/kustomization.yaml`` lists; commented-out ones are not YAML, so not listed)."""
    kustomization = _read_yaml_docs(crd_dir / "kustomization.yaml")[0]
    paths = [entry["path"] for entry in kustomization.get("patches") or [] if "webhook_in_" in entry["path"]]
    return [doc for path in paths for doc in _read_yaml_docs(crd_dir / path)]


def with_conversion_webhooks(
    crds: list[JsonObject], patches: list[JsonObject], base_url: str, ca_bundle: str
) -> list[JsonObject]:
    """``crds`` with each patch's conversion webhook pointed at ``base_url`` (loopback) instead of
    the in-cluster Service. Kueue v0.15 stores Workloads, ClusterQueues, LocalQueues and Cohorts as
    v1beta1 and talks v1beta2: without the webhook the apiserver renames the version only and
    drops every v1beta2-only field, among them a Workload's topology assignment (``slices``)."""
    by_name = {patch["metadata"]["name"]: patch["spec"]["conversion"] for patch in patches}
    patched = []
    for original in crds:
        crd = copy.deepcopy(original)
        conversion = by_name.get(crd["metadata"]["name"])
        if conversion is not None:
            webhook = copy.deepcopy(conversion["webhook"])
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": f"{base_url}{path}", "caBundle": ca_bundle}
            crd["spec"]["conversion"] = {"strategy": conversion["strategy"], "webhook": webhook}
        patched.append(crd)
    return patched


class KueueSystem(System):
    QUEUE = "bench"

    def up(self) -> None:
        assert self.bin_dir is not None
        manifests = self.bin_dir / "manifests" / "config" / "components"
        cert_dir = self.dir / "certs"
        self.dir.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "certs", "generate", "--out", str(cert_dir), "--ip", "127.0.0.1"],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        self._install_metrics_certificate(cert_dir)
        webhook_port = procs.free_port()
        health_port = procs.free_port()
        ca = base64.b64encode((cert_dir / "ca.crt").read_bytes()).decode()
        crds = with_conversion_webhooks(
            [doc for p in sorted((manifests / "crd" / "bases").glob("*.yaml")) for doc in _read_yaml_docs(p)],
            kustomized_conversions(manifests / "crd"),
            f"https://127.0.0.1:{webhook_port}",
            ca,
        )
        self.apply_objects(crds)
        self._register_webhooks(manifests / "webhook" / "manifests.yaml", webhook_port, cert_dir / "ca.crt")
        config = {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "clientConnection": {"qps": 50, "burst": 100},
            # Kueue's all-or-nothing mode: admit one workload at a time until its pods are ready.
            "waitForPodsReady": {"timeout": "5m", "blockAdmission": True},
            "integrations": {"frameworks": ["batch/job"]},
        }
        config_path = self.dir / "config.yaml"
        config_path.write_text(yaml.safe_dump(config))
        kueue = self.spawn(
            "kueue",
            [
                str(self.bin_dir / "kueue"),
                f"--config={config_path}",
                "--feature-gates=VisibilityOnDemand=false",
                f"--kubeconfig={self.cluster.kubeconfig}",
            ],
        )
        self.wait_http(f"http://127.0.0.1:{health_port}/readyz", kueue)
        self.cluster.apply_objects(self.queue_objects(self.cluster.config.fleet, self.topology))

    @staticmethod
    def queue_objects(fleet: FleetSpec, topology: str | None) -> list[JsonObject]:
        """The ResourceFlavor and the ClusterQueue whose quota is the whole fleet; with ``topology``
        (Topology Aware Scheduling) first a Topology of the fleet's labels, widest first, down to
        the hostname as Kueue's guide has it, and a flavor that names it and selects every fake node."""
        nodes = fleet.gpu_nodes + fleet.cpu_nodes
        objects: list[JsonObject] = []
        flavor: JsonObject = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "default"},
        }
        if topology is not None:
            levels = ("topology.kubernetes.io/zone", topology, "kubernetes.io/hostname")
            objects.append(
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "Topology",
                    "metadata": {"name": "fleet"},
                    "spec": {"levels": [{"nodeLabel": label} for label in levels]},
                }
            )
            flavor["spec"] = {"nodeLabels": {"type": "kwok"}, "topologyName": "fleet"}
        quota = [
            {"name": "cpu", "nominalQuota": str(nodes * 64)},
            {"name": "memory", "nominalQuota": f"{nodes * 512}Gi"},
            {"name": "nvidia.com/gpu", "nominalQuota": str(fleet.total_gpus)},
        ]
        queue = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "fleet"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                        "flavors": [{"name": "default", "resources": quota}],
                    }
                ],
            },
        }
        return [*objects, flavor, queue]

    @staticmethod
    def _install_metrics_certificate(cert_dir: Path) -> None:
        """Kueue v0.15 without its internal certificate management reads its metrics certificate
        from a fixed path (cmd/kueue/main.go) and exits without one: put ours there."""
        target = KUEUE_METRICS_CERT_DIR
        try:
            target.mkdir(parents=True, exist_ok=True)
            for name in ("tls.crt", "tls.key"):
                shutil.copyfile(cert_dir / name, target / name)
        except OSError as err:
            raise RuntimeError(
                f"kueue needs its metrics certificate in {target} (it is not configurable): {err}"
            ) from err

    def _register_webhooks(self, path: Path, port: int, ca_file: Path) -> None:
        """Kueue's own webhook configurations, for Jobs and Kueue's objects, pointed at loopback."""
        ca = base64.b64encode(ca_file.read_bytes()).decode()
        wanted = ("batch-v1-job", "kueue-x-k8s-io")
        configs = []
        for doc in _read_yaml_docs(path):
            hooks = []
            for hook in doc.get("webhooks", []):
                service = hook["clientConfig"].get("service", {})
                if not any(w in service.get("path", "") for w in wanted):
                    continue
                local = copy.deepcopy(hook)
                local["clientConfig"] = {"url": f"https://127.0.0.1:{port}{service['path']}", "caBundle": ca}
                hooks.append(local)
            doc["webhooks"] = hooks
            doc["metadata"]["name"] = f"kueue-{doc['metadata']['name']}"
            configs.append(doc)
        self.cluster.apply_objects(configs, "--force-conflicts")

    def prepare_namespace(self, namespace: str) -> None:
        self.cluster.apply_objects(
            [
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta2",
                    "kind": "LocalQueue",
                    "metadata": {"name": self.QUEUE, "namespace": namespace},
                    "spec": {"clusterQueue": "fleet"},
                }
            ]
        )

    def gang(self, namespace: str, name: str, size: int, gpus: int, run_for: str) -> list[JsonObject]:
        body = gang_job(namespace, name, size, gpus, run_for)
        body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = self.QUEUE
        return [body]

    topology_unsupported: ClassVar[str | None] = None

    def topology_gang(
        self, namespace: str, name: str, size: int, gpus: int, run_for: str, key: str
    ) -> list[JsonObject]:
        [body] = self.gang(namespace, name, size, gpus, run_for)
        body["spec"]["template"]["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = key
        return [body]


class VolcanoSystem(System):
    """The topology scenario runs on the ``volcano-topology`` build (``TOPOLOGY_BUILDS``), whose
    CRDs include ``topology.volcano.sh`` HyperNode and whose PodGroup has ``networkTopology``."""

    SCHEDULER_NAME = "volcano"
    TOPOLOGY_PLUGIN = "network-topology-aware"
    topology_unsupported: ClassVar[str | None] = None

    def up(self) -> None:
        assert self.bin_dir is not None
        manifests = self.bin_dir / "manifests"
        self.apply_files(
            sorted((manifests / "config" / "crd" / "volcano" / "bases").glob("*.yaml"))
            + sorted((manifests / "config" / "crd" / "jobflow" / "bases").glob("*.yaml"))
        )
        self.cluster.kubectl("create", "namespace", "volcano-system", check=False)
        conf = manifests / "installer" / "helm" / "chart" / "volcano" / "config" / "volcano-scheduler.conf"
        if self.topology is not None:
            self.apply_objects(self.hypernodes(node_manifests(self.cluster.config.fleet), self.topology))
            conf = self.topology_conf(conf)
        health = procs.free_port()
        kubeconfig = f"--kubeconfig={self.cluster.kubeconfig}"
        common = [kubeconfig, f"--kube-api-qps={SCHEDULER_QPS}", f"--kube-api-burst={SCHEDULER_BURST}"]
        scheduler = self.spawn(
            "scheduler",
            [
                str(self.bin_dir / "vc-scheduler"),
                *common,
                f"--scheduler-conf={conf}",
                f"--scheduler-name={self.SCHEDULER_NAME}",
                "--leader-elect=false",
                "--enable-healthz=true",
                f"--healthz-address=127.0.0.1:{health}",
                f"--listen-address=127.0.0.1:{procs.free_port()}",
                # The chart turns metrics on; v1.12's scheduler needs it (only then does it make
                # the kube-scheduler metric its predicates use, and panics on the first gang).
                # The other scenarios' v1.10.0 runs stay as they were measured.
                *(["--enable-metrics=true"] if self.topology is not None else []),
                f"--cache-dump-dir={self.dir}",
                "--logtostderr",
                "-v=1",
            ],
        )
        controller_health = procs.free_port()
        controller = self.spawn(
            "controller-manager",
            [
                str(self.bin_dir / "vc-controller-manager"),
                *common,
                "--leader-elect=false",
                f"--scheduler-name={self.SCHEDULER_NAME}",
                "--enable-healthz=true",
                f"--healthz-address=127.0.0.1:{controller_health}",
                "--logtostderr",
                "-v=1",
            ],
        )
        self.wait_http(f"http://127.0.0.1:{health}/healthz", scheduler)
        self.wait_http(f"http://127.0.0.1:{controller_health}/healthz", controller)
        # vc-scheduler creates the default queue itself; wait for it.
        deadline = time.monotonic() + 60
        while self.cluster.kubectl("get", "queues.scheduling.volcano.sh", "default", check=False).returncode:
            if time.monotonic() > deadline:
                raise TimeoutError("volcano: the default queue was not created")
            time.sleep(0.5)

    def gang(self, namespace: str, name: str, size: int, gpus: int, run_for: str) -> list[JsonObject]:
        body = gang_job(namespace, name, size, gpus, run_for)
        template = body["spec"]["template"]
        template["metadata"]["annotations"]["scheduling.k8s.io/group-name"] = name
        template["spec"]["schedulerName"] = self.SCHEDULER_NAME
        group = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "minMember": size,
                "queue": "default",
                "minResources": {"nvidia.com/gpu": str(size * gpus), "cpu": str(size), "memory": f"{size}Gi"},
            },
        }
        return [group, body]

    def topology_conf(self, stock: Path) -> Path:
        """The chart's scheduler configuration with the ``network-topology-aware`` plugin beside
        the node-scoring ones, as Volcano's network topology guide enables it."""
        conf = yaml.safe_load(stock.read_text())
        conf["tiers"][-1]["plugins"].append({"name": self.TOPOLOGY_PLUGIN})
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / "volcano-scheduler-topology.conf"
        path.write_text(yaml.safe_dump(conf, sort_keys=False))
        return path

    @staticmethod
    def hypernodes(nodes: list[JsonObject], key: str) -> list[JsonObject]:
        """What a platform engineer writes for Volcano: a tier-1 HyperNode per domain of ``key``
        (its nodes by name) and a tier-2 HyperNode per zone (its tier-1 HyperNodes by name)."""
        domains: dict[str, list[str]] = {}
        zones: dict[str, list[str]] = {}
        for node in nodes:
            labels = node["metadata"]["labels"]
            domain = labels[key]
            if domain not in domains:
                zones.setdefault(labels["topology.kubernetes.io/zone"], []).append(domain)
            domains.setdefault(domain, []).append(node["metadata"]["name"])

        def hypernode(name: str, tier: int, kind: str, members: list[str]) -> JsonObject:
            return {
                "apiVersion": "topology.volcano.sh/v1alpha1",
                "kind": "HyperNode",
                "metadata": {"name": name},
                "spec": {
                    "tier": tier,
                    "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
                },
            }

        return [hypernode(d, 1, "Node", names) for d, names in domains.items()] + [
            hypernode(z, 2, "HyperNode", racks) for z, racks in zones.items()
        ]

    def topology_gang(
        self, namespace: str, name: str, size: int, gpus: int, run_for: str, key: str
    ) -> list[JsonObject]:
        """The PodGroup may not cross a tier-1 HyperNode (one domain of ``key``): hard mode waits
        rather than spread."""
        group, body = self.gang(namespace, name, size, gpus, run_for)
        group["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": 1}
        return [group, body]


class KaiSystem(System):
    """KAI-scheduler v0.12.0 without its operator, each component a local process.

    KAI installs through its operator, which turns the chart's ``Config`` and ``SchedulingShard``
    into one Deployment per component. Here each component runs as a process with the flags the
    operator would give it (``pkg/operator/operands/*/resources.go``) except for addresses and the
    scheduler's and binder's client rates (those of every binder here), and the scheduler reads
    the configuration the operator writes for the default shard (binpack).

    Left out: the operator itself; the podgrouper (v0.12.0 gives each pod of a ``batch/v1`` Job its
    own PodGroup of ``minMember`` 1 -- "native k8s batch jobs usually do not require gang
    scheduling" -- and would rewrite the ``pod-group-name`` annotation of pods that name a
    PodGroup of their own); node-scale-adjuster, resource reservation and Prometheus (off in the
    chart's defaults, or only for fractional GPUs); the validating webhooks of the podgroup and
    queue controllers (both listen on the fixed port 9443 and check only PodGroup subgroups and
    that a Queue has resources; KAI's ``webhooks.enableValidation: false`` turns them off).
    """

    SCHEDULER_NAME = "kai-scheduler"
    NAMESPACE = "kai-scheduler"
    QUEUE_LABEL = "kai.scheduler/queue"
    PARENT_QUEUE = "bench-parent"
    QUEUE = "bench"
    PRIORITY_CLASS = "train"  # what KAI's podgrouper gives Jobs and bare pods
    # The podgroupcontroller serves its metrics here whatever its flags say (it does not pass
    # --metrics-bind-address to its manager, so controller-runtime's default applies).
    PODGROUPCONTROLLER_METRICS_PORT = 8080

    # What KAI v0.12.0's operator writes to the scheduler's ConfigMap for a shard with the chart's
    # placementStrategy binpack (pkg/operator/operands/scheduler/resources_for_shard.go).
    @staticmethod
    def scheduler_config() -> JsonObject:
        names = [
            "predicates",
            "proportion",
            "priority",
            "nodeavailability",
            "resourcetype",
            "podaffinity",
            "elastic",
            "kubeflow",
            "ray",
            "subgrouporder",
            "taskorder",
            "nominatednode",
            "dynamicresources",
            "minruntime",
            "topology",
            "snapshot",
            "gpupack",
        ]
        plugins: list[JsonObject] = [{"name": n} for n in names]
        plugins.append({"name": "nodeplacement", "arguments": {"gpu": "binpack", "cpu": "binpack"}})
        plugins.append({"name": "gpusharingorder"})
        return {
            "actions": "allocate, consolidation, reclaim, preempt, stalegangeviction",
            "tiers": [{"plugins": plugins}],
        }

    def up(self) -> None:
        assert self.bin_dir is not None
        chart = self.bin_dir / "manifests" / "deployments" / "kai-scheduler"
        self.apply_files(sorted((chart / "crds").glob("*.yaml")))
        # The chart's PriorityClasses (train, build, inference...), its namespaces, and the
        # RuntimeClass that NVIDIA's GPU operator (KAI's prerequisite for GPU pods) creates: KAI's
        # admission webhook gives every GPU pod runtimeClassName "nvidia".
        self.apply_files(sorted((chart / "templates" / "priorityclasses").glob("*.yaml")))
        self.cluster.apply_objects(
            [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                for n in (self.NAMESPACE, "kai-resource-reservation")
            ]
            + [
                {
                    "apiVersion": "node.k8s.io/v1",
                    "kind": "RuntimeClass",
                    "metadata": {"name": "nvidia"},
                    "handler": "nvidia",
                }
            ]
        )
        self.dir.mkdir(parents=True, exist_ok=True)
        self._check_fixed_port()
        tmp = self._certificates()
        admission_health = self._start_admission(tmp)
        config_path = self.dir / "scheduler-config.yaml"
        config_path.write_text(yaml.safe_dump(self.scheduler_config()))
        scheduler_metrics = procs.free_port()
        common = [f"--scheduler-name={self.SCHEDULER_NAME}"]
        scheduler = self.spawn(
            "scheduler",
            [
                str(self.bin_dir / "scheduler"),
                *common,
                f"--scheduler-conf={config_path}",
                f"--namespace={self.NAMESPACE}",
                "--nodepool-label-key=kai.scheduler/node-pool",
                "--partition-label-value=",
                "--resource-reservation-app-label=kai-resource-reservation",
                f"--listen-address=127.0.0.1:{scheduler_metrics}",
                # Only a port can be given: it listens on every interface.
                f"--plugin-server-port={procs.free_port()}",
                f"--qps={SCHEDULER_QPS}",
                f"--burst={SCHEDULER_BURST}",
            ],
            env={"GOGC": "400"},  # as the operator sets it
        )
        binder_metrics = procs.free_port()  # it registers no health checks: its metrics tell it serves
        binder = self.spawn(
            "binder",
            [
                str(self.bin_dir / "binder"),
                *common,
                "--resource-reservation-namespace=kai-resource-reservation",
                "--resource-reservation-service-account=kai-resource-reservation",
                "--resource-reservation-app-label=kai-resource-reservation",
                "--scale-adjust-namespace=kai-scale-adjust",
                f"--health-probe-bind-address=127.0.0.1:{procs.free_port()}",
                f"--metrics-bind-address=127.0.0.1:{binder_metrics}",
                "--cdi-enabled=false",
                # The binder is what binds pods: at the rate every scheduler binds at here.
                f"--qps={SCHEDULER_QPS}",
                f"--burst={SCHEDULER_BURST}",
            ],
        )
        podgroups_health = procs.free_port()
        podgroups = self.spawn(
            "podgroupcontroller",
            [
                str(self.bin_dir / "podgroupcontroller"),
                *common,
                f"--health-probe-bind-address=127.0.0.1:{podgroups_health}",
                "--enable-podgroup-webhook=false",
            ],
        )
        self.spawn(
            "queuecontroller",
            [
                str(self.bin_dir / "queuecontroller"),
                f"--queue-label-key={self.QUEUE_LABEL}",
                f"--metrics-listen-address=127.0.0.1:{procs.free_port()}",
                "--enable-webhook=false",
            ],
        )
        self.wait_http(f"http://127.0.0.1:{admission_health}/readyz", self.processes["admission"])
        self.wait_http(f"http://127.0.0.1:{binder_metrics}/metrics", binder)
        self.wait_http(f"http://127.0.0.1:{podgroups_health}/readyz", podgroups)
        self.wait_http(f"http://127.0.0.1:{scheduler_metrics}/metrics", scheduler)
        self.cluster.apply_objects(self.queues(self.cluster.config.fleet))
        if self.topology is not None:
            self.cluster.apply_objects([self.topology_object(self.topology)])

    def _check_fixed_port(self) -> None:
        with socket.socket() as sock:
            try:
                sock.bind(("0.0.0.0", self.PODGROUPCONTROLLER_METRICS_PORT))
            except OSError as err:
                raise RuntimeError(
                    f"kai: the podgroupcontroller needs port {self.PODGROUPCONTROLLER_METRICS_PORT} "
                    f"(fixed in v0.12.0), which is taken: {err}"
                ) from err

    def _certificates(self) -> Path:
        """Loopback certificates from ``certs/`` where controller-runtime looks for them by default
        (``$TMPDIR/k8s-webhook-server/serving-certs``; the operator mounts its Secret there)."""
        cert_dir = self.dir / "certs"
        subprocess.run(
            [sys.executable, "-m", "certs", "generate", "--out", str(cert_dir), "--ip", "127.0.0.1"],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        tmp = self.dir / "tmp"
        serving = tmp / "k8s-webhook-server" / "serving-certs"
        serving.mkdir(parents=True, exist_ok=True)
        for name in ("tls.crt", "tls.key"):
            shutil.copyfile(cert_dir / name, serving / name)
        return tmp

    def _start_admission(self, tmp: Path) -> int:
        """KAI's pod admission webhook, registered by URL on loopback as the operator registers it
        by Service (pkg/operator/operands/admission/resources.go): returns its health port."""
        assert self.bin_dir is not None
        port, health = procs.free_port(), procs.free_port()
        self.spawn(
            "admission",
            [
                str(self.bin_dir / "admission"),
                f"--scheduler-name={self.SCHEDULER_NAME}",
                # Only a port can be given: the webhook listens on every interface.
                f"--webhook-addr={port}",
                f"--health-probe-bind-address=127.0.0.1:{health}",
                f"--metrics-bind-address=127.0.0.1:{procs.free_port()}",
                "--gpu-pod-runtime-class-name=nvidia",
            ],
            env={"TMPDIR": str(tmp)},
        )
        ca = base64.b64encode((self.dir / "certs" / "ca.crt").read_bytes()).decode()
        selector = {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["kube-system", self.NAMESPACE],
                }
            ]
        }

        def hook(path: str, operations: list[str]) -> JsonObject:
            return {
                "name": f"admission.{self.NAMESPACE}.svc",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "namespaceSelector": selector,
                "failurePolicy": "Fail",
                "clientConfig": {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca},
                "rules": [
                    {
                        "operations": operations,
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    }
                ],
            }

        mutating = hook("/mutate--v1-pod", ["CREATE"])
        mutating["reinvocationPolicy"] = "IfNeeded"
        self.cluster.apply_objects(
            [
                {
                    "apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": "MutatingWebhookConfiguration",
                    "metadata": {"name": "kai-admission"},
                    "webhooks": [mutating],
                },
                {
                    "apiVersion": "admissionregistration.k8s.io/v1",
                    "kind": "ValidatingWebhookConfiguration",
                    "metadata": {"name": "kai-admission"},
                    "webhooks": [hook("/validate--v1-pod", ["CREATE", "UPDATE"])],
                },
            ]
        )
        return health

    @classmethod
    def queues(cls, fleet: FleetSpec) -> list[JsonObject]:
        """KAI's two-level queues (only leaf queues take workloads): a parent and a leaf whose
        quota is the whole fleet, no limit (-1), over-quota weight 1. Units: CPU millicores,
        memory MB (10^6 bytes), GPUs."""
        cpu = fleet.gpu_nodes * int(fleet.gpu_node_cpu) + fleet.cpu_nodes * int(fleet.cpu_node_cpu)
        memory = fleet.gpu_nodes * _bytes(fleet.gpu_node_memory) + fleet.cpu_nodes * _bytes(
            fleet.cpu_node_memory
        )
        resources = {
            "cpu": {"quota": cpu * 1000, "limit": -1, "overQuotaWeight": 1},
            "memory": {"quota": memory // 10**6, "limit": -1, "overQuotaWeight": 1},
            "gpu": {"quota": fleet.total_gpus, "limit": -1, "overQuotaWeight": 1},
        }
        return [
            {
                "apiVersion": "scheduling.run.ai/v2",
                "kind": "Queue",
                "metadata": {"name": cls.PARENT_QUEUE},
                "spec": {"resources": resources},
            },
            {
                "apiVersion": "scheduling.run.ai/v2",
                "kind": "Queue",
                "metadata": {"name": cls.QUEUE},
                "spec": {"parentQueue": cls.PARENT_QUEUE, "resources": resources},
            },
        ]

    def gang(self, namespace: str, name: str, size: int, gpus: int, run_for: str) -> list[JsonObject]:
        body = gang_job(namespace, name, size, gpus, run_for)
        # KAI's consolidation (and reclaim, preempt) evicts running pods by design: it deletes them
        # and places the pods their controller makes again where it planned. With the template's
        # backoffLimit 0 each such eviction would fail the Job; KAI's Jobs keep Kubernetes' default
        # (6), as KAI's own batch example (docs/batch/batch-job.yaml) does.
        del body["spec"]["backoffLimit"]
        template = body["spec"]["template"]
        template["metadata"]["labels"][self.QUEUE_LABEL] = self.QUEUE
        template["metadata"]["annotations"]["pod-group-name"] = name
        template["spec"]["schedulerName"] = self.SCHEDULER_NAME
        group = {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "labels": {self.QUEUE_LABEL: self.QUEUE}},
            "spec": {"minMember": size, "queue": self.QUEUE, "priorityClassName": self.PRIORITY_CLASS},
        }
        return [group, body]

    TOPOLOGY = "fleet"
    topology_unsupported: ClassVar[str | None] = None

    @classmethod
    def topology_object(cls, key: str) -> JsonObject:
        """KAI's Topology of the fleet's labels, widest first, down to the hostname (its CRD at
        v0.12.0 serves ``v1alpha1`` only)."""
        levels = ("topology.kubernetes.io/zone", key, "kubernetes.io/hostname")
        return {
            "apiVersion": "kai.scheduler/v1alpha1",
            "kind": "Topology",
            "metadata": {"name": cls.TOPOLOGY},
            "spec": {"levels": [{"nodeLabel": label} for label in levels]},
        }

    def topology_gang(
        self, namespace: str, name: str, size: int, gpus: int, run_for: str, key: str
    ) -> list[JsonObject]:
        """KAI's users annotate the Job (``kai.scheduler/topology`` and
        ``kai.scheduler/topology-required-placement``) and its podgrouper copies both into the
        PodGroup's ``topologyConstraint``; the podgrouper is not run here, so the harness writes
        the PodGroup's constraint as it would, beside the annotations."""
        group, body = self.gang(namespace, name, size, gpus, run_for)
        body["metadata"].setdefault("annotations", {}).update(
            {"kai.scheduler/topology": self.TOPOLOGY, "kai.scheduler/topology-required-placement": key}
        )
        group["spec"]["topologyConstraint"] = {"topology": self.TOPOLOGY, "requiredTopologyLevel": key}
        return [group, body]


class NativeGangSystem(System):
    """The stock kube-scheduler's own gang scheduling: no process of its own, only the API."""

    cluster_settings: ClassVar[dict[str, Any]] = {"gang_plugin": True}

    def up(self) -> None:
        release = self.cluster.config.release
        if release.workload_api == "scheduling.k8s.io/v1alpha1":
            raise RuntimeError(f"the native system needs Kubernetes 1.36 or later, not {release.version}")

    def gang(self, namespace: str, name: str, size: int, gpus: int, run_for: str) -> list[JsonObject]:
        body = gang_job(namespace, name, size, gpus, run_for)
        body["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": name}
        group = {
            "apiVersion": self.cluster.config.release.workload_api,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"schedulingPolicy": {"gang": {"minCount": size}}},
        }
        return [group, body]


class FloorSystem(System):
    """No gang scheduling: the same Job, its pods created and bound as fast as the control plane
    allows. What every gang scheduler's time to start a gang is measured against."""

    cluster_settings: ClassVar[dict[str, Any]] = {"gang_plugin": False}

    def up(self) -> None:
        """Nothing to start: the stock kube-scheduler places the pods one by one."""

    def gang(self, namespace: str, name: str, size: int, gpus: int, run_for: str) -> list[JsonObject]:
        return [gang_job(namespace, name, size, gpus, run_for)]

    # The reference for the topology scenario too: the same gangs, placed with no topology at all.
    topology_unsupported: ClassVar[str | None] = None

    def topology_gang(
        self, namespace: str, name: str, size: int, gpus: int, run_for: str, key: str
    ) -> list[JsonObject]:
        return self.gang(namespace, name, size, gpus, run_for)


SYSTEMS: dict[str, type[System]] = {
    "phalanx": PhalanxSystem,
    "phalanx-reserve": PhalanxReservingSystem,
    "coscheduling": CoschedulingSystem,
    "kueue": KueueSystem,
    "volcano": VolcanoSystem,
    "kai": KaiSystem,
    "native": NativeGangSystem,
    FLOOR: FloorSystem,
}


def make_system(name: str, cluster: LocalCluster, bin_dir: Path | None) -> System:
    return SYSTEMS[name](name=name, cluster=cluster, bin_dir=bin_dir)
