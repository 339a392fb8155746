"""What `kubectl kustomize` actually produces for each overlay and component (skipped without kubectl)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from certs.kube import service_dns_names

from .manifests import (
    DEPLOY,
    NAMESPACE,
    Obj,
    can,
    containers,
    kustomize,
    named,
    of_kind,
    pod_specs,
    write_overlay,
)
from .security import container_problems

OVERLAYS = ["default", "local", "with-cert-manager"]
LOCAL_URL = "https://127.0.0.1:9443/mutate"


@pytest.fixture(scope="module")
def built() -> dict[str, list[Obj]]:
    return {overlay: kustomize(DEPLOY / overlay) for overlay in OVERLAYS}


def _pod(objects: list[Obj], name: str) -> dict[str, Any]:
    return dict(named(objects, "Deployment", name)["spec"]["template"]["spec"])


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_builds_and_every_namespaced_object_is_in_phalanx_system(
    built: dict[str, list[Obj]], overlay: str
) -> None:
    cluster_scoped = {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "FlowSchema",
    }
    for obj in built[overlay]:
        if obj["kind"] not in cluster_scoped:
            assert obj["metadata"].get("namespace") == NAMESPACE, (obj["kind"], obj["metadata"]["name"])
        assert obj["metadata"]["labels"]["app.kubernetes.io/name"] == "phalanx"


@pytest.mark.parametrize(
    "component",
    [
        "crds",
        "crds-x-k8s",
        "kai-compat",
        "volcano-compat",
        "workloads",
        "internal-certs",
        "cert-manager",
        "servicemonitor",
        "network-policy",
        "node-name-policy",
    ],
)
def test_every_component_builds_on_base_and_workloads(tmp_path: Path, component: str) -> None:
    components = ["components/workloads"] + ([] if component == "workloads" else [f"components/{component}"])
    objects = kustomize(write_overlay(tmp_path, ["base"], components))
    assert of_kind(objects, "Deployment")


def test_default_is_the_whole_install(built: dict[str, list[Obj]]) -> None:
    kinds = {(o["kind"], o["metadata"]["name"]) for o in built["default"]}
    assert {
        ("Namespace", NAMESPACE),
        ("ServiceAccount", "phalanx-webhook"),
        ("ServiceAccount", "phalanx-controller"),
        ("Deployment", "phalanx-webhook"),
        ("Deployment", "phalanx-controller"),
        ("Service", "phalanx-webhook"),
        ("PodDisruptionBudget", "phalanx-webhook"),
        ("MutatingWebhookConfiguration", "phalanx-webhook"),
        ("CustomResourceDefinition", "podgroups.scheduling.sigs.k8s.io"),
        ("ClusterRole", "phalanx-controller"),
        ("Role", "phalanx-webhook-certs"),
    } <= kinds
    # Optional CRDs stay optional.
    assert ("CustomResourceDefinition", "podgroups.scheduling.run.ai") not in kinds


@pytest.mark.parametrize("overlay", ["default", "with-cert-manager"])
def test_every_built_container_is_hardened(built: dict[str, list[Obj]], overlay: str) -> None:
    names = []
    for owner, spec in pod_specs(built[overlay]):
        for container in containers(spec):
            assert container_problems(spec, container) == [], f"{overlay}: {owner}/{container['name']}"
            names.append(container["name"])
    expected = {
        "default": ["cert-bootstrap", "webhook", "controller"],
        "with-cert-manager": ["webhook", "controller"],
    }
    assert sorted(names) == sorted(expected[overlay])


def test_default_references_resolve(built: dict[str, list[Obj]]) -> None:
    objects = built["default"]
    for _, spec in pod_specs(objects):
        named(objects, "ServiceAccount", spec["serviceAccountName"])
    hook_service = named(objects, "MutatingWebhookConfiguration", "phalanx-webhook")["webhooks"][0][
        "clientConfig"
    ]
    service = named(objects, "Service", hook_service["service"]["name"])
    webhook_pod = named(objects, "Deployment", "phalanx-webhook")["spec"]["template"]
    assert service["spec"]["selector"].items() <= webhook_pod["metadata"]["labels"].items()
    container_ports = {p["name"]: p["containerPort"] for p in webhook_pod["spec"]["containers"][0]["ports"]}
    assert container_ports[service["spec"]["ports"][0]["targetPort"]] == 9443


def test_default_gives_an_api_token_to_the_cert_sidecar_only(built: dict[str, list[Obj]]) -> None:
    pod = _pod(built["default"], "phalanx-webhook")
    assert pod["automountServiceAccountToken"] is False
    token_mounts = {
        c["name"]
        for c in containers(pod)
        for m in c.get("volumeMounts", [])
        if m["name"] == "kube-api-access"
    }
    assert token_mounts == {"cert-bootstrap"}
    certs = {c["name"]: m for c in containers(pod) for m in c["volumeMounts"] if m["name"] == "certs"}
    assert certs["webhook"]["mountPath"] == certs["cert-bootstrap"]["mountPath"] == "/certs"


def test_default_rbac(built: dict[str, list[Obj]]) -> None:
    objects = built["default"]
    for verb in ("get", "list", "patch", "delete"):
        assert not can(objects, "phalanx-webhook", verb, "pods", namespace="default")
        assert not can(objects, "phalanx-controller", verb, "secrets", namespace=NAMESPACE)
    assert can(
        objects, "phalanx-webhook", "update", "secrets", namespace=NAMESPACE, name="phalanx-webhook-tls"
    )
    assert can(objects, "phalanx-controller", "patch", "pods")


def test_local_has_no_workloads_and_points_webhooks_at_localhost(built: dict[str, list[Obj]]) -> None:
    objects = built["local"]
    kinds = {o["kind"] for o in objects}
    assert not kinds & {"Deployment", "Service", "PodDisruptionBudget", "StatefulSet", "DaemonSet", "Pod"}
    config = named(objects, "MutatingWebhookConfiguration", "phalanx-webhook")
    assert len(config["webhooks"]) == 4  # every entry: the namespace opt-in and the object opt-in twins
    for hook in config["webhooks"]:
        assert hook["clientConfig"] == {"url": LOCAL_URL}  # no service; caBundle comes from `certs inject`
    crds = {o["metadata"]["name"] for o in of_kind(objects, "CustomResourceDefinition")}
    assert crds == {
        "podgroups.scheduling.sigs.k8s.io",
        "podgroups.scheduling.x-k8s.io",
        "podgroups.scheduling.run.ai",
        "podgroups.scheduling.volcano.sh",
        "queues.scheduling.phalanx.io",
        "queues.scheduling.run.ai",
    }
    # The e2e controller runs with its own ServiceAccount's token: its RBAC must be here.
    assert can(objects, "phalanx-controller", "patch", "pods")
    assert can(
        objects,
        "phalanx-controller",
        "update",
        "leases",
        "coordination.k8s.io",
        NAMESPACE,
        "phalanx-controller",
    )


def test_cert_manager_variant(built: dict[str, list[Obj]]) -> None:
    objects = built["with-cert-manager"]
    config = named(objects, "MutatingWebhookConfiguration", "phalanx-webhook")
    assert (
        config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/phalanx-webhook"
    )
    pod = _pod(objects, "phalanx-webhook")
    assert "initContainers" not in pod
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["certs"] == {
        "name": "certs",
        "secret": {"secretName": "phalanx-webhook-tls", "defaultMode": 0o440},
    }
    certificate = named(objects, "Certificate", "phalanx-webhook")
    assert certificate["spec"]["secretName"] == "phalanx-webhook-tls"
    assert certificate["spec"]["dnsNames"] == list(service_dns_names("phalanx-webhook", NAMESPACE))
    assert (
        f"{NAMESPACE}/{certificate['metadata']['name']}"
        == config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    )
    # No bootstrap sidecar, so the webhook's ServiceAccount is bound to nothing at all.
    bindings = [*of_kind(objects, "RoleBinding"), *of_kind(objects, "ClusterRoleBinding")]
    assert all(s["name"] != "phalanx-webhook" for b in bindings for s in b["subjects"])


def test_servicemonitor_scrapes_both_processes(tmp_path: Path) -> None:
    objects = kustomize(
        write_overlay(
            tmp_path,
            ["base"],
            ["components/workloads", "components/internal-certs", "components/servicemonitor"],
        )
    )
    monitor = named(objects, "ServiceMonitor", "phalanx")
    selected = []
    for service in of_kind(objects, "Service"):
        labels = service["metadata"]["labels"]
        if all(labels.get(e["key"]) in e["values"] for e in monitor["spec"]["selector"]["matchExpressions"]):
            selected.append(service)
    assert sorted(s["metadata"]["name"] for s in selected) == [
        "phalanx-controller-metrics",
        "phalanx-webhook-metrics",
    ]
    port_name = monitor["spec"]["endpoints"][0]["port"]
    for service in selected:
        (port,) = service["spec"]["ports"]
        assert port["name"] == port_name
        pods = [
            t
            for t in of_kind(objects, "Deployment")
            if service["spec"]["selector"].items() <= t["spec"]["template"]["metadata"]["labels"].items()
        ]
        (deployment,) = pods
        (main,) = deployment["spec"]["template"]["spec"]["containers"]
        assert port["targetPort"] in {p["name"] for p in main["ports"]}


def test_image_is_overridable_with_kustomize_images(tmp_path: Path) -> None:
    extra = "images:\n  - name: localhost/phalanx\n    newName: registry.example/phalanx\n    newTag: v9\n"
    objects = kustomize(
        write_overlay(tmp_path, ["base"], ["components/workloads", "components/internal-certs"], extra)
    )
    images = {c["image"] for _, spec in pod_specs(objects) for c in containers(spec)}
    assert images == {"registry.example/phalanx:v9"}
