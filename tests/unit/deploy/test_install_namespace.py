"""Installing elsewhere than phalanx-system is `namespace:` in an overlay and nothing more
(docs/operations.md "Installing elsewhere than phalanx-system"): rendered with another namespace,
no object, flag, CEL string or selector still names phalanx-system."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from shared import constants as c

from .manifests import DEPLOY, NAMESPACE, Obj, kustomize, named, of_kind, write_overlay

ELSEWHERE = "ml-platform"
CONTROLLER_USER_EXPRESSION = (
    "'system:serviceaccount:' + params.metadata.namespace + ':' + params.metadata.name"
)
EVERY_COMPONENT = [
    "components/crds",
    "components/workloads",
    "components/internal-certs",
    "components/servicemonitor",
    "components/monitoring",
    "components/network-policy",
]


def _nothing_names_phalanx_system(objects: list[Obj]) -> None:
    for obj in objects:
        text = yaml.safe_dump(obj)
        assert NAMESPACE not in text, (obj["kind"], obj["metadata"]["name"])


def _points_at_the_install_namespace(objects: list[Obj]) -> None:
    namespace = named(objects, "Namespace", ELSEWHERE)
    # The webhook is never called for Phalanx's own namespace, whatever it is called.
    assert namespace["metadata"]["labels"][c.SKIP] == "true"
    assert named(objects, "ServiceAccount", "phalanx-controller")["metadata"]["namespace"] == ELSEWHERE
    for binding in of_kind(objects, "ValidatingAdmissionPolicyBinding"):
        assert binding["spec"]["paramRef"] == {
            "name": "phalanx-controller",
            "namespace": ELSEWHERE,
            "parameterNotFoundAction": "Allow",
        }
    for binding in of_kind(objects, "ClusterRoleBinding"):
        for subject in binding["subjects"]:
            assert subject["namespace"] == ELSEWHERE, binding["metadata"]["name"]
    for hook in named(objects, "MutatingWebhookConfiguration", "phalanx-webhook")["webhooks"]:
        assert hook["clientConfig"]["service"]["namespace"] == ELSEWHERE


def test_a_namespace_in_an_overlay_moves_the_whole_install(tmp_path: Path) -> None:
    objects = kustomize(write_overlay(tmp_path, ["base"], EVERY_COMPONENT, extra=f"namespace: {ELSEWHERE}\n"))
    _nothing_names_phalanx_system(objects)
    _points_at_the_install_namespace(objects)


def test_a_namespace_on_top_of_deploy_default_is_enough(tmp_path: Path) -> None:
    objects = kustomize(write_overlay(tmp_path, ["default"], [], extra=f"namespace: {ELSEWHERE}\n"))
    _nothing_names_phalanx_system(objects)
    _points_at_the_install_namespace(objects)


def test_with_cert_manager_the_namespace_is_set_in_that_overlay(tmp_path: Path) -> None:
    """cert-manager names the namespace inside strings; with-cert-manager's replacements follow it
    when the namespace is set there (`kustomize edit set namespace`, here on a copy)."""
    copy = tmp_path / "deploy"
    shutil.copytree(DEPLOY, copy)
    kustomization = copy / "with-cert-manager/kustomization.yaml"
    kustomization.write_text(kustomization.read_text() + f"namespace: {ELSEWHERE}\n")
    objects = kustomize(copy / "with-cert-manager")
    _nothing_names_phalanx_system(objects)
    _points_at_the_install_namespace(objects)
    certificate = named(objects, "Certificate", "phalanx-webhook")
    assert f"phalanx-webhook.{ELSEWHERE}.svc" in certificate["spec"]["dnsNames"]
    config = named(objects, "MutatingWebhookConfiguration", "phalanx-webhook")
    inject = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    assert inject == f"{ELSEWHERE}/phalanx-webhook"


def test_the_policies_find_the_controller_through_their_parameter_only() -> None:
    """No CEL string spells a namespace: each compares the user with the ServiceAccount its binding names."""
    objects = kustomize(DEPLOY / "default")
    for policy in of_kind(objects, "ValidatingAdmissionPolicy"):
        spec = policy["spec"]
        assert spec["paramKind"] == {"apiVersion": "v1", "kind": "ServiceAccount"}
        text = " ".join(str(spec).split())
        assert text.count("system:serviceaccount:") == text.count(CONTROLLER_USER_EXPRESSION) >= 1, policy
        assert NAMESPACE not in text
    for binding in of_kind(objects, "ValidatingAdmissionPolicyBinding"):
        assert binding["spec"]["paramRef"]["name"] == "phalanx-controller"
        assert binding["spec"]["paramRef"]["namespace"] == NAMESPACE


def test_the_webhook_excludes_its_own_namespace_by_the_downward_api() -> None:
    objects = kustomize(DEPLOY / "default")
    container = named(objects, "Deployment", "phalanx-webhook")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    excluded = env["PHALANX_WEBHOOK_EXCLUDED_NAMESPACES"]["value"].split(",")
    assert "$(POD_NAMESPACE)" in excluded and "kube-system" in excluded
    # The variable is declared before it is used, or the kubelet leaves $(POD_NAMESPACE) as it is.
    names = [e["name"] for e in container["env"]]
    assert names.index("POD_NAMESPACE") < names.index("PHALANX_WEBHOOK_EXCLUDED_NAMESPACES")
