"""Least privilege, asked of the union of every RBAC object anywhere in deploy/ (so no combination
of components can grant more), and checked to be enough for the controller."""

from __future__ import annotations

import pytest

from .manifests import NAMESPACE, can, of_kind, raw_resources

OBJECTS = raw_resources()
ALL_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
NAMESPACES = [NAMESPACE, "default", None]  # None: cluster-wide


@pytest.mark.parametrize("resource", ["pods", "pods/eviction", "pods/status"])
@pytest.mark.parametrize("namespace", NAMESPACES)
def test_the_webhook_cannot_touch_pods(resource: str, namespace: str | None) -> None:
    for verb in ALL_VERBS:
        assert not can(OBJECTS, "phalanx-webhook", verb, resource, namespace=namespace), verb


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_the_controller_cannot_read_secrets(namespace: str | None) -> None:
    for verb in ALL_VERBS:
        assert not can(OBJECTS, "phalanx-controller", verb, "secrets", namespace=namespace), verb
        assert not can(
            OBJECTS, "phalanx-controller", verb, "secrets", namespace=namespace, name="phalanx-webhook-tls"
        ), verb


def test_the_webhook_touches_only_its_own_secret_and_webhook_config() -> None:
    sa = "phalanx-webhook"
    assert can(OBJECTS, sa, "get", "secrets", namespace=NAMESPACE, name="phalanx-webhook-tls")
    assert can(OBJECTS, sa, "update", "secrets", namespace=NAMESPACE, name="phalanx-webhook-tls")
    assert can(OBJECTS, sa, "create", "secrets", namespace=NAMESPACE)  # create cannot name the object
    assert not can(OBJECTS, sa, "get", "secrets", namespace=NAMESPACE, name="someone-elses")
    assert not can(OBJECTS, sa, "list", "secrets", namespace=NAMESPACE)
    assert not can(OBJECTS, sa, "create", "secrets", namespace="default")
    assert not can(OBJECTS, sa, "get", "secrets", namespace="default", name="phalanx-webhook-tls")
    group = "admissionregistration.k8s.io"
    for verb in ("get", "patch"):
        assert can(OBJECTS, sa, verb, "mutatingwebhookconfigurations", group, name="phalanx-webhook")
    assert not can(OBJECTS, sa, "patch", "mutatingwebhookconfigurations", group, name="other")
    assert not can(OBJECTS, sa, "patch", "validatingwebhookconfigurations", group, name="phalanx-webhook")


CONTROLLER_NEEDS = [
    # (group, resource, verbs), cluster-wide
    ("", "nodes", "get list watch"),
    ("", "namespaces", "get list watch"),
    ("", "pods", "get list watch patch delete"),
    ("", "pods/eviction", "create"),
    ("", "events", "get create patch"),
    ("scheduling.k8s.io", "priorityclasses", "get list watch"),
    ("scheduling.k8s.io", "workloads", "get list watch"),
    ("scheduling.k8s.io", "podgroups", "get list watch"),  # the native ones (1.36+)
    ("scheduling.k8s.io", "podgroups/status", "patch"),  # their scheduling condition
    ("batch", "jobs", "get list watch patch"),
    ("apps", "statefulsets", "get list watch"),
    *[
        (g, res, "get list watch")
        for g, res in (
            ("kubeflow.org", "mpijobs"),
            ("jobset.x-k8s.io", "jobsets"),
            ("leaderworkerset.x-k8s.io", "leaderworkersets"),
            ("ray.io", "rayclusters"),
        )
    ],
    ("policy", "poddisruptionbudgets", "get list watch"),
    ("autoscaling.x-k8s.io", "provisioningrequests", "get list create delete"),  # --provisioning-requests
    ("", "podtemplates", "get create delete"),  # the requests' pod sets
    *[
        (g, "podgroups", "get list watch create patch")
        for g in ("scheduling.sigs.k8s.io", "scheduling.x-k8s.io", "scheduling.run.ai")
    ],
    *[
        (g, "podgroups/status", "patch")
        for g in ("scheduling.sigs.k8s.io", "scheduling.x-k8s.io", "scheduling.run.ai")
    ],
    *[(g, "queues", "get list watch") for g in ("scheduling.phalanx.io", "scheduling.run.ai")],
    *[(g, "queues/status", "patch") for g in ("scheduling.phalanx.io", "scheduling.run.ai")],
]


@pytest.mark.parametrize(("group", "resource", "verbs"), CONTROLLER_NEEDS)
def test_the_controller_has_what_it_needs(group: str, resource: str, verbs: str) -> None:
    for verb in verbs.split():
        assert can(OBJECTS, "phalanx-controller", verb, resource, group), f"{verb} {group}/{resource}"


def test_the_controller_cannot_do_more_than_it_needs() -> None:
    sa = "phalanx-controller"
    assert not can(OBJECTS, sa, "update", "pods")  # gates are lifted by patch only
    assert not can(OBJECTS, sa, "create", "pods")
    assert not can(OBJECTS, sa, "delete", "jobs", "batch")
    # It deletes PodGroups only to retire its own; an admission policy confines it to those.
    assert not can(OBJECTS, sa, "patch", "queues", "scheduling.phalanx.io")  # queues are the admins'
    assert not can(OBJECTS, sa, "create", "queues", "scheduling.run.ai")
    assert not can(OBJECTS, sa, "patch", "nodes")
    assert not can(OBJECTS, sa, "get", "configmaps", namespace=NAMESPACE)
    # Nothing it does not call: every write is a patch, and it reads no other workload kind; the
    # workloads it watches for their size it never writes.
    assert not can(OBJECTS, sa, "update", "podgroups", "scheduling.sigs.k8s.io")
    assert not can(OBJECTS, sa, "update", "podgroups/status", "scheduling.sigs.k8s.io")
    assert not can(OBJECTS, sa, "list", "events")  # it reads back only the Events it names
    assert not can(OBJECTS, sa, "delete", "events")
    assert not can(OBJECTS, sa, "list", "resourcequotas")
    assert not can(OBJECTS, sa, "list", "deployments", "apps")
    assert not can(OBJECTS, sa, "list", "trainjobs", "trainer.kubeflow.org")
    assert not can(OBJECTS, sa, "patch", "statefulsets", "apps")
    assert not can(OBJECTS, sa, "patch", "mpijobs", "kubeflow.org")
    # The native gang API is read, never written but for the scheduling condition of a PodGroup's
    # status: its objects are the user's and the scheduler's.
    for verb in ("create", "patch", "update", "delete"):
        assert not can(OBJECTS, sa, verb, "podgroups", "scheduling.k8s.io")
        assert not can(OBJECTS, sa, verb, "workloads", "scheduling.k8s.io")
    assert not can(OBJECTS, sa, "update", "podgroups/status", "scheduling.k8s.io")
    assert not can(OBJECTS, sa, "patch", "workloads/status", "scheduling.k8s.io")


def test_leader_election_is_one_lease_in_the_own_namespace() -> None:
    sa, group = "phalanx-controller", "coordination.k8s.io"
    for verb in ("get", "update"):
        assert can(OBJECTS, sa, verb, "leases", group, namespace=NAMESPACE, name="phalanx-controller")
        assert not can(OBJECTS, sa, verb, "leases", group, namespace=NAMESPACE, name="kube-scheduler")
    assert can(OBJECTS, sa, "create", "leases", group, namespace=NAMESPACE)
    assert not can(OBJECTS, sa, "create", "leases", group, namespace="kube-system")
    assert not can(OBJECTS, sa, "get", "leases", group, name="phalanx-controller")  # not cluster-wide


def test_no_wildcards_and_no_privilege_escalation_verbs() -> None:
    for role in [*of_kind(OBJECTS, "ClusterRole"), *of_kind(OBJECTS, "Role")]:
        for rule in role["rules"]:
            for key in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[key], (role["metadata"]["name"], rule)
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule


def test_every_binding_targets_a_phalanx_service_account_in_phalanx_system() -> None:
    for binding in [*of_kind(OBJECTS, "ClusterRoleBinding"), *of_kind(OBJECTS, "RoleBinding")]:
        for subject in binding["subjects"]:
            assert subject["kind"] == "ServiceAccount"
            assert subject["namespace"] == NAMESPACE
            assert subject["name"] in {"phalanx-webhook", "phalanx-controller"}
