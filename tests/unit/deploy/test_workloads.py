"""The Deployments, Service and PDB of components/workloads and the sidecar patch, as written."""

from __future__ import annotations

from typing import Any

import pytest

from .manifests import DEPLOY, containers, load, named, pod_specs, raw_patches, raw_resources
from .security import container_problems

WORKLOADS = [doc for path in (DEPLOY / "components/workloads").glob("*.yaml") for doc in load(path)]


def _pod(name: str) -> dict[str, Any]:
    return dict(named(WORKLOADS, "Deployment", name)["spec"]["template"]["spec"])


def _all_pod_specs() -> list[tuple[str, dict[str, Any]]]:
    return [*pod_specs(raw_resources()), *pod_specs(raw_patches())]


def test_every_container_everywhere_is_hardened() -> None:
    checked = 0
    for owner, spec in _all_pod_specs():
        for container in containers(spec):
            # A patch's containers are merged into a pod whose pod-level context the base sets.
            pod = spec if "securityContext" in spec else _pod(owner)
            assert container_problems(pod, container) == [], f"{owner}/{container['name']}"
            checked += 1
    assert checked == 3  # webhook, controller, cert-bootstrap sidecar


def test_pods_run_as_the_image_numeric_non_root_user() -> None:
    for name in ("phalanx-webhook", "phalanx-controller"):
        sc = _pod(name)["securityContext"]
        assert sc["runAsUser"] == sc["runAsGroup"] == 65532 and sc["runAsNonRoot"] is True


def test_webhook_deployment() -> None:
    deployment = named(WORKLOADS, "Deployment", "phalanx-webhook")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pod = _pod("phalanx-webhook")
    assert pod["serviceAccountName"] == "phalanx-webhook"
    assert pod["automountServiceAccountToken"] is False
    (term,) = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert (
        term["podAffinityTerm"]["labelSelector"]["matchLabels"]
        == deployment["spec"]["selector"]["matchLabels"]
    )
    (webhook,) = pod["containers"]
    assert "--cert-dir=/certs" in webhook["args"] and "--port=9443" in webhook["args"]
    assert {p["name"]: p["containerPort"] for p in webhook["ports"]} == {"https": 9443, "metrics": 8080}
    assert webhook["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert webhook["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    mounts = {m["mountPath"]: m for m in webhook["volumeMounts"]}
    assert mounts["/certs"]["readOnly"] is True and "/tmp" in mounts
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes["certs"] and "emptyDir" in volumes["tmp"]


def test_controller_deployment() -> None:
    deployment = named(WORKLOADS, "Deployment", "phalanx-controller")
    assert deployment["spec"]["replicas"] == 2  # leader election picks one
    pod = _pod("phalanx-controller")
    assert pod["serviceAccountName"] == "phalanx-controller"
    (controller,) = pod["containers"]
    assert controller["command"] == ["phalanx-controller"]
    assert {p["name"]: p["containerPort"] for p in controller["ports"]} == {"metrics": 8081}
    assert controller["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert controller["readinessProbe"]["httpGet"]["path"] == "/readyz"
    env = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in controller["env"]}
    # The Lease's namespace, and the replica's name in it (kept across container restarts).
    assert env == {"PHALANX_CONTROLLER_NAMESPACE": "metadata.namespace", "POD_NAME": "metadata.name"}


def test_service_routes_443_to_the_webhook_https_port() -> None:
    service = named(WORKLOADS, "Service", "phalanx-webhook")
    (port,) = service["spec"]["ports"]
    assert (port["port"], port["targetPort"]) == (443, "https")
    webhook_labels = named(WORKLOADS, "Deployment", "phalanx-webhook")["spec"]["template"]["metadata"][
        "labels"
    ]
    assert service["spec"]["selector"].items() <= webhook_labels.items()


def test_pdb_keeps_one_webhook_replica() -> None:
    pdb = named(WORKLOADS, "PodDisruptionBudget", "phalanx-webhook")
    assert pdb["spec"]["minAvailable"] == 1
    labels = named(WORKLOADS, "Deployment", "phalanx-webhook")["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_cert_bootstrap_sidecar() -> None:
    (patch,) = load(DEPLOY / "components/internal-certs/webhook-sidecar.yaml")
    pod = patch["spec"]["template"]["spec"]
    (sidecar,) = pod["initContainers"]
    assert sidecar["restartPolicy"] == "Always"  # native sidecar
    assert sidecar["command"] == ["python", "-m", "certs", "bootstrap"]
    args = dict(arg.removeprefix("--").split("=", 1) for arg in sidecar["args"])
    assert args["secret"] == "phalanx-webhook-tls" and args["webhook-config"] == "phalanx-webhook"
    assert args["service"] == "phalanx-webhook" and args["cert-dir"] == "/certs"
    mounts = {m["name"]: m for m in sidecar["volumeMounts"]}
    assert not mounts["certs"].get("readOnly")  # it writes what the webhook reads
    assert mounts["kube-api-access"]["mountPath"] == "/var/run/secrets/kubernetes.io/serviceaccount"


@pytest.mark.parametrize("path", sorted(str(p.relative_to(DEPLOY)) for p in DEPLOY.rglob("*.yaml")))
def test_every_yaml_file_parses(path: str) -> None:
    assert load(DEPLOY / path)
