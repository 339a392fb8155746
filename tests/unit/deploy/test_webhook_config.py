"""The MutatingWebhookConfiguration in deploy/base: safe defaults that match the public contract."""

from __future__ import annotations

from typing import Any

import pytest

from shared import constants, kinds
from shared.settings import description, fields
from webhook.config import WebhookSettings

from .manifests import DEPLOY, load, named

# What the registry says the webhook admits: every workload kind with a sizing rule, and pods.
EXPECTED_RULES = {
    "workloads.phalanx.io": {(k.group, k.version, k.plural) for k in kinds.ADMITTED},
    "pods.phalanx.io": {(kinds.POD_KIND.group, kinds.POD_KIND.version, kinds.POD_KIND.plural)},
}


def test_the_registry_admits_the_operators_kinds() -> None:
    """The registry itself, so that the view above cannot lose a kind unnoticed."""
    assert {k.kind for k in kinds.ADMITTED} == {
        "Job",
        "StatefulSet",
        "MPIJob",
        "JobSet",
        "LeaderWorkerSet",
        "RayCluster",
        "TrainJob",
    }


# Each entry has a twin for objects opted in by their own label, in namespaces that are not.
OPTED_IN_TWINS = {
    "opted-in-workloads.phalanx.io": "workloads.phalanx.io",
    "opted-in-pods.phalanx.io": "pods.phalanx.io",
}
# Never kube-system (by name) or Phalanx's own namespace (labelled phalanx.io/skip, whatever it is called).
SYSTEM_NAMESPACES = [
    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]},
    {"key": constants.SKIP, "operator": "NotIn", "values": ["true"]},
]
NOT_SKIPPED = {"key": constants.SKIP, "operator": "NotIn", "values": ["true"]}


def _webhooks() -> dict[str, dict[str, Any]]:
    config = named(
        load(DEPLOY / "base/webhook-config.yaml"), "MutatingWebhookConfiguration", "phalanx-webhook"
    )
    return {hook["name"]: hook for hook in config["webhooks"]}


def test_exactly_the_four_webhooks() -> None:
    assert set(_webhooks()) == set(EXPECTED_RULES) | set(OPTED_IN_TWINS)


@pytest.mark.parametrize(("twin", "name"), sorted(OPTED_IN_TWINS.items()))
def test_each_opted_in_twin_is_its_entry_with_the_object_selecting_instead_of_the_namespace(
    twin: str, name: str
) -> None:
    hooks = _webhooks()
    different = {"name", "namespaceSelector", "objectSelector"}
    assert {k: v for k, v in hooks[twin].items() if k not in different} == {
        k: v for k, v in hooks[name].items() if k not in different
    }
    assert hooks[twin]["namespaceSelector"] == {
        # Not the labelled namespaces (their entry sends everything there), never the system ones.
        "matchExpressions": [
            {"key": constants.OPT_IN_LABEL, "operator": "NotIn", "values": [constants.OPT_IN_VALUE]},
            *SYSTEM_NAMESPACES,
        ]
    }
    assert hooks[twin]["objectSelector"] == {
        "matchLabels": {constants.OPT_IN_LABEL: constants.OPT_IN_VALUE},
        "matchExpressions": [NOT_SKIPPED],
    }


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A label selector as the API server evaluates it (the operators used here)."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        value = labels.get(expression["key"])
        if expression["operator"] == "NotIn" and value in expression["values"]:
            return False
        if expression["operator"] == "In" and value not in expression["values"]:
            return False
    return True


def _called(namespace: dict[str, str], obj: dict[str, str], kind: str) -> list[str]:
    """The entries for ``kind`` (a key of EXPECTED_RULES) the API server would call."""
    entries = [kind, *(twin for twin, name in OPTED_IN_TWINS.items() if name == kind)]
    hooks = _webhooks()
    return [
        entry
        for entry in entries
        if _selects(hooks[entry]["namespaceSelector"], namespace)
        and _selects(hooks[entry]["objectSelector"], obj)
    ]


OPT_IN = {constants.OPT_IN_LABEL: constants.OPT_IN_VALUE}


@pytest.mark.parametrize("kind", sorted(EXPECTED_RULES))
@pytest.mark.parametrize(
    ("namespace", "obj", "called"),
    [
        # An opted-in namespace: everything in it, once, but what skips.
        ({**OPT_IN, "kubernetes.io/metadata.name": "team"}, {}, 1),
        ({**OPT_IN, "kubernetes.io/metadata.name": "team"}, OPT_IN, 1),
        ({**OPT_IN, "kubernetes.io/metadata.name": "team"}, {constants.SKIP: "true"}, 0),
        # Any other namespace: only objects labelled for it themselves.
        ({"kubernetes.io/metadata.name": "team"}, {}, 0),
        ({"kubernetes.io/metadata.name": "team"}, OPT_IN, 1),
        ({"kubernetes.io/metadata.name": "team"}, {constants.OPT_IN_LABEL: "disabled"}, 0),
        ({"kubernetes.io/metadata.name": "team"}, {**OPT_IN, constants.SKIP: "true"}, 0),
        ({constants.OPT_IN_LABEL: "disabled", "kubernetes.io/metadata.name": "team"}, OPT_IN, 1),
        # Never the system namespaces, whatever their labels or the object's say.
        ({**OPT_IN, "kubernetes.io/metadata.name": "kube-system"}, OPT_IN, 0),
        ({"kubernetes.io/metadata.name": "kube-system"}, OPT_IN, 0),
        ({"kubernetes.io/metadata.name": "phalanx-system", constants.SKIP: "true"}, OPT_IN, 0),
        ({"kubernetes.io/metadata.name": "ml-platform", constants.SKIP: "true"}, OPT_IN, 0),
        ({**OPT_IN, "kubernetes.io/metadata.name": "ml-platform", constants.SKIP: "true"}, {}, 0),
    ],
)
def test_what_opted_in_is_sent_once_and_nothing_else_is(
    kind: str, namespace: dict[str, str], obj: dict[str, str], called: int
) -> None:
    assert len(_called(namespace, obj, kind)) == called


@pytest.mark.parametrize("name", sorted(EXPECTED_RULES))
def test_webhook_is_create_only_fail_closed_and_opt_in(name: str) -> None:  # and its twin, above
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
        "matchExpressions": SYSTEM_NAMESPACES,
    }
    assert hook["objectSelector"] == {"matchExpressions": [NOT_SKIPPED]}
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


@pytest.mark.parametrize("name", ["pods.phalanx.io", "opted-in-pods.phalanx.io"])
def test_pods_are_reinvoked_when_later_webhooks_mutate_them(name: str) -> None:
    assert _webhooks()[name]["reinvocationPolicy"] == "IfNeeded"


def test_the_api_servers_timeout_quoted_by_the_webhook_is_the_configured_one() -> None:
    """The shutdown timeout outlasts any request the API server still waits for, and its help (which
    docs/reference.md shows) quotes the timeoutSeconds configured here, not another figure."""
    timeouts = {hook["timeoutSeconds"] for hook in _webhooks().values()}
    assert len(timeouts) == 1
    (timeout,) = timeouts
    field = next(field for field in fields(WebhookSettings) if field.name == "shutdown_timeout_seconds")
    assert field.default >= timeout
    assert f"timeoutSeconds, {timeout} s" in description(field)
