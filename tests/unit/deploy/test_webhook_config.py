"""The MutatingWebhookConfiguration in deploy/base: safe defaults that match the public contract."""

from __future__ import annotations

from typing import Any

import pytest

from shared import constants
from webhook.config import WebhookSettings

from .manifests import DEPLOY, load, named

EXPECTED_RULES = {
    "workloads.phalanx.io": {
        ("batch", "v1", "jobs"),
        ("apps", "v1", "statefulsets"),
        ("kubeflow.org", "v2beta1", "mpijobs"),
        ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
        ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),
        ("ray.io", "v1", "rayclusters"),
        ("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
    },
    "pods.phalanx.io": {("", "v1", "pods")},
}


def _webhooks() -> dict[str, dict[str, Any]]:
    config = named(
        load(DEPLOY / "base/webhook-config.yaml"), "MutatingWebhookConfiguration", "phalanx-webhook"
    )
    return {hook["name"]: hook for hook in config["webhooks"]}


def test_exactly_the_two_webhooks() -> None:
    assert set(_webhooks()) == set(EXPECTED_RULES)


@pytest.mark.parametrize("name", sorted(EXPECTED_RULES))
def test_webhook_is_create_only_fail_closed_and_opt_in(name: str) -> None:
    """CREATE only -- but for StatefulSet UPDATEs, which keep the podManagementPolicy set at creation."""
    hook = _webhooks()[name]
    assert hook["failurePolicy"] == "Fail"
    assert hook["sideEffects"] == "None"
    assert hook["timeoutSeconds"] <= 5
    assert hook["admissionReviewVersions"] == ["v1"]
    operations = {
        (rule["resources"][0], op) for rule in hook["rules"] for op in rule["operations"] if op != "CREATE"
    }
    assert operations == ({("statefulsets", "UPDATE")} if name == "workloads.phalanx.io" else set())
    assert all("CREATE" in rule["operations"] for rule in hook["rules"])
    assert hook["namespaceSelector"] == {
        "matchLabels": {constants.OPT_IN_LABEL: constants.OPT_IN_VALUE},
        # An opt-in label on kube-system (by name) or on Phalanx's own namespace (labelled
        # phalanx.io/skip, whatever it is called) must not gate their pods.
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]},
            {"key": constants.SKIP, "operator": "NotIn", "values": ["true"]},
        ],
    }
    assert hook["objectSelector"] == {
        "matchExpressions": [{"key": constants.SKIP, "operator": "NotIn", "values": ["true"]}]
    }
    assert hook["clientConfig"]["service"] == {
        "name": "phalanx-webhook",
        "namespace": "phalanx-system",
        "path": "/mutate",
        "port": 443,
    }
    assert "caBundle" not in hook["clientConfig"]  # injected at install time, never committed


@pytest.mark.parametrize("name", sorted(EXPECTED_RULES))
def test_webhook_rules(name: str) -> None:
    rules = {
        (group, version, resource)
        for rule in _webhooks()[name]["rules"]
        for group in rule["apiGroups"]
        for version in rule["apiVersions"]
        for resource in rule["resources"]
    }
    assert rules == EXPECTED_RULES[name]


def test_pods_are_reinvoked_when_later_webhooks_mutate_them() -> None:
    assert _webhooks()["pods.phalanx.io"]["reinvocationPolicy"] == "IfNeeded"


def test_the_api_servers_timeout_quoted_by_the_webhook_is_the_configured_one() -> None:
    """The shutdown timeout outlasts any request the API server still waits for, and its help (which
    docs/reference.md shows) quotes the timeoutSeconds configured here, not another figure."""
    timeouts = {hook["timeoutSeconds"] for hook in _webhooks().values()}
    assert len(timeouts) == 1
    (timeout,) = timeouts
    field = WebhookSettings.model_fields["shutdown_timeout_seconds"]
    assert field.default >= timeout
    assert f"timeoutSeconds, {timeout} s" in str(field.description)
