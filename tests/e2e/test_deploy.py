"""The install manifests and the certificate tooling against a real API server: schemas, defaulting,
admission (server-side dry-run), Pod Security, CEL rules, printer columns, and `python -m certs`."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.localcluster import LocalCluster
from tests.localcluster.phalanx import Phalanx

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
SYSTEM_NAMESPACE = "phalanx-system"
PRIMARY_CRD = "podgroups.scheduling.sigs.k8s.io"


@pytest.fixture
def system_namespace(phalanx: Phalanx) -> None:
    """phalanx-system and the CRDs exist: the session's Phalanx installed deploy/local."""


@pytest.fixture
def podgroup_crd(phalanx: Phalanx) -> None:
    """The primary CRD, installed by the session's Phalanx (deploy/local)."""


def _dry_run(cluster: LocalCluster, manifest: str) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl(
        "apply", "--server-side", "--dry-run=server", "-f", "-", input=manifest, check=False
    )


def test_default_install_is_accepted_by_the_api_server(cluster: LocalCluster, system_namespace: None) -> None:
    result = cluster.kubectl(
        "apply", "--server-side", "--dry-run=server", "-k", str(DEPLOY / "default"), check=False
    )
    assert result.returncode == 0, result.stderr


def test_local_overlay_is_accepted_by_the_api_server(cluster: LocalCluster, system_namespace: None) -> None:
    built = cluster.kubectl("kustomize", str(DEPLOY / "local")).stdout
    result = _dry_run(cluster, built)
    assert result.returncode == 0, result.stderr


CERT_MANAGER_STAND_INS = Path(__file__).parent / "manifests" / "cert-manager-standin-crds.yaml"


def test_cert_manager_install_is_accepted_by_the_api_server(
    cluster: LocalCluster, system_namespace: None
) -> None:
    """cert-manager is not installed here: its Issuers and Certificates are checked against stand-in
    CRDs that declare its v1 fields and enums, with strict field validation; everything else in
    deploy/with-cert-manager against the real API server, in one server-side dry run."""
    stand_ins = [d for d in yaml.safe_load_all(CERT_MANAGER_STAND_INS.read_text()) if d]
    cluster.apply_objects(stand_ins)
    try:
        for crd in stand_ins:
            name = crd["metadata"]["name"]
            cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=30s")
        overlay = str(DEPLOY / "with-cert-manager")
        result = cluster.kubectl(
            "apply", "--server-side", "--dry-run=server", "--validate=strict", "-k", overlay, check=False
        )
        assert result.returncode == 0, result.stderr
        kinds = {line.split("/")[0] for line in result.stdout.split()}
        assert {"issuer.cert-manager.io", "certificate.cert-manager.io"} <= kinds, result.stdout
        # The stand-ins are not a rubber stamp: a misspelt field is refused.
        built = yaml.safe_load_all(cluster.kubectl("kustomize", overlay).stdout)
        certificate = next(d for d in built if d and d["kind"] == "Certificate")
        certificate["spec"]["secretNmae"] = certificate["spec"].pop("secretName")
        refused = cluster.kubectl(
            "apply",
            "--server-side",
            "--dry-run=server",
            "--validate=strict",
            "-f",
            "-",
            input=json.dumps(certificate),
            check=False,
        )
        assert refused.returncode != 0 and "secretNmae" in refused.stderr, refused.stderr
    finally:
        cluster.kubectl(
            "delete", "crd", "-l", "e2e.phalanx.io/stand-in=cert-manager", "--wait=false", check=False
        )


def test_phalanx_pods_meet_the_restricted_pod_security_standard(
    cluster: LocalCluster, namespace: str
) -> None:
    """deploy/base labels phalanx-system enforce=restricted: the pods must pass it (and the native
    sidecar, the preStop sleep and the projected token must be valid pod specs)."""
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
    built = cluster.kubectl("kustomize", str(DEPLOY / "default")).stdout
    deployments = [d for d in yaml.safe_load_all(built) if d and d["kind"] == "Deployment"]
    assert len(deployments) == 2
    for deployment in deployments:
        template = deployment["spec"]["template"]
        spec = {**template["spec"]}
        spec.pop("serviceAccountName")  # the ServiceAccount lives in phalanx-system, not here
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": deployment["metadata"]["name"], "namespace": namespace},
            "spec": spec,
        }
        result = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(pod), check=False)
        assert result.returncode == 0, result.stderr
        assert "violate" not in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ({"minMember": 2, "maxMember": 4, "minResources": {"cpu": "4", "nvidia.com/gpu": 8}}, None),
        ({"minMember": 4, "maxMember": 2}, "maxMember must be greater than or equal to minMember"),
        ({"minMember": 0}, "minMember"),
        ({"maxMember": 2}, "minMember"),
        ({"minMember": 2, "scheduleTimeoutSeconds": 0}, "scheduleTimeoutSeconds"),
    ],
)
def test_podgroup_validation(
    cluster: LocalCluster, podgroup_crd: None, namespace: str, spec: dict[str, Any], error: str | None
) -> None:
    podgroup = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "pg", "namespace": namespace},
        "spec": spec,
    }
    result = _dry_run(cluster, json.dumps(podgroup))
    if error is None:
        assert result.returncode == 0, result.stderr
    else:
        assert result.returncode != 0 and error in result.stderr, result.stderr


def test_kubectl_get_pg_shows_the_gang_columns(
    cluster: LocalCluster, podgroup_crd: None, namespace: str
) -> None:
    podgroup = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "train", "namespace": namespace},
        "spec": {"minMember": 8},
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(podgroup))
    header, row = cluster.kubectl("get", "pg", "train", "-n", namespace).stdout.splitlines()
    assert header.split() == ["NAME", "PHASE", "MIN", "SCHEDULED", "RUNNING", "REASON", "AGE"]
    assert row.split()[:2] == ["train", "8"]  # empty status columns are blank


# ---- python -m certs against the API server ---------------------------------------------------


def _certs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "certs", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _inert_webhook_config(name: str) -> dict[str, Any]:
    """Two webhooks that can never be called: no namespace carries the selector's label."""
    hooks = [
        {
            "name": f"{which}.certs-e2e.phalanx.io",
            "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://127.0.0.1:1/never"},
            "rules": [
                {
                    "operations": ["CREATE"],
                    "apiGroups": [""],
                    "apiVersions": ["v1"],
                    "resources": ["configmaps"],
                }
            ],
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "namespaceSelector": {"matchLabels": {"phalanx.io/certs-e2e": "never"}},
        }
        for which in ("a", "b")
    ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": hooks,
    }


def _ca_bundles(cluster: LocalCluster, name: str) -> list[bytes]:
    config = json.loads(cluster.kubectl("get", "mutatingwebhookconfiguration", name, "-o", "json").stdout)
    return [base64.b64decode(w["clientConfig"].get("caBundle", "")) for w in config["webhooks"]]


def _secret(cluster: LocalCluster, namespace: str, name: str) -> dict[str, Any]:
    secret: dict[str, Any] = json.loads(
        cluster.kubectl("get", "secret", name, "-n", namespace, "-o", "json").stdout
    )
    return secret


def test_certs_bootstrap_and_inject(cluster: LocalCluster, namespace: str, tmp_path: Path) -> None:
    kubeconfig = cluster.kubeconfig
    config_name = f"phalanx-certs-e2e-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "-f", "-", input=json.dumps(_inert_webhook_config(config_name)))
    boot = [
        "bootstrap", "--once", "--kubeconfig", str(kubeconfig), "--namespace", namespace,
        "--secret", "webhook-tls", "--webhook-config", config_name, "--service", "phalanx-webhook",
    ]  # fmt: skip
    try:
        # First replica: creates the Secret, injects the CA, writes the files.
        first = _certs(*boot, "--cert-dir", str(tmp_path / "replica-1"))
        assert first.returncode == 0, first.stderr
        secret = _secret(cluster, namespace, "webhook-tls")
        assert secret["type"] == "kubernetes.io/tls"
        assert set(secret["data"]) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
        ca = base64.b64decode(secret["data"]["ca.crt"])
        assert _ca_bundles(cluster, config_name) == [ca, ca]
        tls_crt = base64.b64decode(secret["data"]["tls.crt"])
        assert (tmp_path / "replica-1" / "tls.crt").read_bytes() == tls_crt

        # Second replica: adopts the same certificate, changes nothing.
        second = _certs(*boot, "--cert-dir", str(tmp_path / "replica-2"))
        assert second.returncode == 0, second.stderr
        assert (tmp_path / "replica-2" / "tls.crt").read_bytes() == tls_crt
        unchanged = _secret(cluster, namespace, "webhook-tls")
        assert unchanged["metadata"]["resourceVersion"] == secret["metadata"]["resourceVersion"]

        # A broken serving cert is replaced (update with resourceVersion), the CA is kept.
        junk = base64.b64encode(b"junk").decode()
        cluster.kubectl(
            "patch", "secret", "webhook-tls", "-n", namespace, "--type=merge",
            "-p", json.dumps({"data": {"tls.crt": junk}}),
        )  # fmt: skip
        third = _certs(*boot, "--cert-dir", str(tmp_path / "replica-1"))
        assert third.returncode == 0, third.stderr
        renewed = _secret(cluster, namespace, "webhook-tls")
        assert base64.b64decode(renewed["data"]["ca.crt"]) == ca
        assert base64.b64decode(renewed["data"]["tls.crt"]) not in (tls_crt, b"junk")

        # `inject` (the local overlay's path) swaps in another CA, then finds nothing to do.
        local = tmp_path / "local"
        assert _certs("generate", "--out", str(local)).returncode == 0
        inject = ["inject", "--kubeconfig", str(kubeconfig), "--webhook-config", config_name]
        injected = _certs(*inject, "--ca-file", str(local / "ca.crt"))
        assert injected.returncode == 0 and "on 2 webhook" in injected.stdout, injected.stderr
        assert _ca_bundles(cluster, config_name) == [(local / "ca.crt").read_bytes()] * 2
        again = _certs(*inject, "--ca-file", str(local / "ca.crt"))
        assert again.returncode == 0 and "is current" in again.stdout, again.stderr

        missing = _certs("inject", "--kubeconfig", str(kubeconfig), "--webhook-config", "nope", "--ca-file",
                         str(local / "ca.crt"))  # fmt: skip
        assert missing.returncode == 1 and "not found" in missing.stderr
        assert missing.stderr.count("\n") == 1
    finally:
        cluster.kubectl("delete", "mutatingwebhookconfiguration", config_name, check=False)
