"""The read-only roles shipped for kubectl phalanx users: enough for what the plugin reads, nothing a
tenant should not learn, and bound by nobody until a platform engineer decides who."""

from __future__ import annotations

import pytest

from controller.api.resources import ResourceType
from controller.cli.cluster import DEPLOYMENTS, WORKLOAD_TYPES
from controller.runtime.wiring import WATCHED

from .manifests import _matches, named, of_kind, raw_resources

OBJECTS = raw_resources()
TENANT = named(OBJECTS, "ClusterRole", "phalanx-plugin-reader")
CLUSTER = named(OBJECTS, "ClusterRole", "phalanx-plugin-cluster-reader")
READ = ("get", "list")
WRITES = (
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "watch",
    "escalate",
    "bind",
    "impersonate",
)
PLUGIN_LISTS = list(dict.fromkeys([*WATCHED, *WORKLOAD_TYPES]))  # exactly what cluster.load lists


def allows(role: dict[str, object], verb: str, rt: ResourceType, name: str | None = None) -> bool:
    return any(_matches(rule, verb, rt.group, rt.plural, name) for rule in role["rules"])  # type: ignore[attr-defined]


@pytest.mark.parametrize("rt", PLUGIN_LISTS, ids=str)
def test_the_cluster_reader_reads_everything_the_plugin_lists(rt: ResourceType) -> None:
    assert all(allows(CLUSTER, verb, rt) for verb in READ)


def test_the_cluster_reader_reads_the_controller_s_settings_and_no_other_deployment() -> None:
    assert allows(CLUSTER, "get", DEPLOYMENTS, "phalanx-controller")
    assert not allows(CLUSTER, "get", DEPLOYMENTS, "someone-else")
    assert not allows(CLUSTER, "list", DEPLOYMENTS)


@pytest.mark.parametrize("rt", PLUGIN_LISTS, ids=str)
def test_a_tenant_reads_cluster_scoped_facts_and_no_other_namespace_s_objects(rt: ResourceType) -> None:
    # Bound cluster-wide, a namespaced rule would show every namespace's objects of that kind.
    assert allows(TENANT, "list", rt) == (not rt.namespaced and rt.plural != "namespaces")


@pytest.mark.parametrize("role", [TENANT, CLUSTER], ids=lambda role: role["metadata"]["name"])
def test_both_only_read(role: dict[str, object]) -> None:
    for rule in role["rules"]:  # type: ignore[attr-defined]
        assert set(rule["verbs"]) <= set(READ), rule
        assert not set(rule["verbs"]) & set(WRITES)
        assert "secrets" not in rule["resources"] and "*" not in rule["resources"]


def test_nobody_is_bound_to_them_by_the_install() -> None:
    for binding in [*of_kind(OBJECTS, "ClusterRoleBinding"), *of_kind(OBJECTS, "RoleBinding")]:
        assert binding["roleRef"]["name"] not in {"phalanx-plugin-reader", "phalanx-plugin-cluster-reader"}
