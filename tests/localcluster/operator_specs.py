"""How each workload operator runs beside a local cluster: its command line, its CRDs, its webhooks.

Every operator runs as a local process with the cluster's admin kubeconfig (``KUBECONFIG``); every
port it opens is picked free on loopback, so clusters of several checkouts can run side by side. Webhooks are
registered by URL on loopback with certificates from ``certs/`` (as Phalanx's own are), or left
off where the operator allows it and its webhooks only validate.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Ports:
    health: int
    webhook: int


@dataclass(frozen=True, slots=True)
class Launch:
    """What one operator process needs: argv, extra environment, files to write first."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # name (in the operator's dir) -> content


@dataclass(frozen=True, slots=True)
class OperatorSpec:
    name: str
    # Manifests (file names in the cached manifests/ dir) that are CRDs to install.
    crds: tuple[str, ...]
    # The operator's health endpoint path (on Ports.health); 200 means it serves.
    health_path: str
    launch: Callable[[Path, Ports, Path], Launch]  # (binary, ports, its own directory)
    # The operator's own webhook manifest (service-based), registered by URL when set.
    webhooks: str | None = None
    # Its pod webhooks only see its own pods: the objectSelector its kustomize patches add.
    pod_label: str | None = None
    namespaces: tuple[str, ...] = ()  # that it needs to exist (leases, cert secrets)
    needs: tuple[str, ...] = ()  # other operators it relies on (TrainJob -> JobSet)
    # Extra manifests applied after it is running (a training runtime).
    extras: tuple[str, ...] = ()
    # The webhook configuration's name where the operator looks it up itself (else prefixed).
    webhook_config_name: str | None = None
    # False: registered, but matching no request (the operator needs the configuration to exist).
    webhooks_called: bool = True
    secrets: tuple[tuple[str, str], ...] = ()  # (namespace, name) of empty Secrets it fills itself
    # Where it reads its serving certificate from, fixed (in a Pod, its Secret is mounted there):
    # given ours if that directory holds none, so its webhook server can start.
    fixed_cert_dir: str | None = None


def _controller_runtime_config(api_version: str, ports: Ports, cert_dir: Path) -> str:
    """The Configuration file JobSet and LeaderWorkerSet read: own certificates, loopback only."""
    config = {
        "apiVersion": api_version,
        "kind": "Configuration",
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": ports.webhook, "certDir": str(cert_dir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports.health}"},
        "metrics": {"bindAddress": "0"},
        "leaderElection": {"leaderElect": False},
    }
    return json.dumps(config)


def _mpi_operator(binary: Path, ports: Ports, _: Path) -> Launch:
    return Launch(
        [str(binary), "--lock-namespace", "mpi-operator", "--monitoring-port", "0"],
        # Read by the file build-operators.sh compiles in: the upstream port is a fixed :8080.
        env={"PHALANX_MPI_OPERATOR_HEALTH_PORT": str(ports.health)},
    )


def _kuberay(binary: Path, ports: Ports, _: Path) -> Launch:
    return Launch(
        [
            str(binary),
            "--metrics-addr",
            "0",
            "--health-probe-bind-address",
            f"127.0.0.1:{ports.health}",
            "--enable-leader-election=false",
        ],
        # Its only webhook (RayCluster validation) is served only with ENABLE_WEBHOOKS=true.
        env={"ENABLE_WEBHOOKS": "false"},
    )


def _jobset(binary: Path, ports: Ports, workdir: Path) -> Launch:
    config = _controller_runtime_config("config.jobset.x-k8s.io/v1alpha1", ports, workdir.parent / "certs")
    return Launch(
        [str(binary), "--config", str(workdir / "config.json")],
        files={"config.json": config},
    )


def _lws(binary: Path, ports: Ports, workdir: Path) -> Launch:
    config = _controller_runtime_config("config.lws.x-k8s.io/v1alpha1", ports, workdir.parent / "certs")
    return Launch(
        [str(binary), "--config", str(workdir / "config.json"), "--leader-elect=false"],
        files={"config.json": config},
    )


def _trainer(binary: Path, ports: Ports, _: Path) -> Launch:
    # The Trainer always makes its own certificates, for a Service name (kubeflow-system) that a
    # loopback URL cannot match, and injects its CA into its webhook configuration, without which
    # it never becomes ready. So the configuration exists, but with no rules: never called (its
    # webhooks only validate).
    return Launch(
        [
            str(binary),
            "--health-probe-bind-address",
            f"127.0.0.1:{ports.health}",
            "--webhook-server-port",
            str(ports.webhook),
            "--metrics-bind-address",
            "0",
        ]
    )


SPECS: dict[str, OperatorSpec] = {
    spec.name: spec
    for spec in (
        OperatorSpec(
            "mpi-operator",
            ("manifests_base_kubeflow.org_mpijobs.yaml",),
            "/healthz",
            _mpi_operator,
            namespaces=("mpi-operator",),
        ),
        OperatorSpec(
            "kuberay",
            (
                "config_crd_bases_ray.io_rayclusters.yaml",
                "config_crd_bases_ray.io_rayjobs.yaml",
                "config_crd_bases_ray.io_rayservices.yaml",
            ),
            "/readyz",
            _kuberay,
        ),
        OperatorSpec(
            "jobset",
            ("config_components_crd_bases_jobset.x-k8s.io_jobsets.yaml",),
            "/readyz",
            _jobset,
            webhooks="config_components_webhook_manifests.yaml",
            pod_label="jobset.sigs.k8s.io/jobset-name",
        ),
        OperatorSpec(
            "lws",
            ("config_crd_bases_leaderworkerset.x-k8s.io_leaderworkersets.yaml",),
            "/readyz",
            _lws,
            webhooks="config_webhook_manifests.yaml",
            pod_label="leaderworkerset.sigs.k8s.io/name",
        ),
        OperatorSpec(
            "trainer",
            (
                "manifests_base_crds_trainer.kubeflow.org_trainjobs.yaml",
                "manifests_base_crds_trainer.kubeflow.org_trainingruntimes.yaml",
                "manifests_base_crds_trainer.kubeflow.org_clustertrainingruntimes.yaml",
            ),
            "/readyz",
            _trainer,
            webhooks="manifests_base_webhook_manifests.yaml",
            namespaces=("kubeflow-system",),
            needs=("jobset",),
            extras=("manifests_base_runtimes_torch_distributed.yaml",),
            webhook_config_name="validator.trainer.kubeflow.org",
            webhooks_called=False,
            secrets=(("kubeflow-system", "kubeflow-trainer-webhook-cert"),),
            fixed_cert_dir="/tmp/k8s-webhook-server/serving-certs",
        ),
    )
}
