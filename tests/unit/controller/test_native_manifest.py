"""The PodGroup Phalanx makes for a native PodGroup carries what the gang's planning needs from it."""

from __future__ import annotations

from typing import Any

from controller.api.store import Store
from controller.core.model import GangKey
from controller.pipeline.podgroups import PodGroupFactory, declared_size

KEY = GangKey("team", "train")


def store_with(spec: dict[str, Any]) -> Store:
    store = Store()
    store.upsert_native_podgroup(
        {"metadata": {"name": "train", "namespace": "team", "uid": "u1"}, "spec": spec}
    )
    store.upsert_pod(
        {
            "metadata": {"name": "p0", "namespace": "team", "uid": "p0", "labels": {}},
            "spec": {
                "containers": [{"name": "main"}],
                "schedulingGates": [{"name": "phalanx.io/gang"}],
                "schedulingGroup": {"podGroupName": "train"},
            },
        }
    )
    return store


def manifest(spec: dict[str, Any]) -> dict[str, Any]:
    store = store_with(spec)
    factory = PodGroupFactory(kube=None, store=store)  # type: ignore[arg-type]  # manifest() reads only
    return factory.manifest(KEY, declared_size(KEY, store.members(KEY), store))["spec"]


def test_topology_and_disruption_mode_are_copied_under_phalanx_s_keys() -> None:
    spec = manifest(
        {
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
            "disruptionMode": {"all": {}},
        }
    )
    assert spec == {
        "minMember": 2,
        "topologyRequired": "topology.kubernetes.io/rack",
        "disruptionMode": "All",
    }


def test_single_disruption_is_single() -> None:
    spec = manifest({"schedulingPolicy": {"gang": {"minCount": 2}}, "disruptionMode": {"single": {}}})
    assert spec["disruptionMode"] == "Single"


def test_the_priority_class_is_resolved_by_name_and_a_raw_priority_is_not_trusted() -> None:
    spec = manifest(
        {"schedulingPolicy": {"gang": {"minCount": 2}}, "priorityClassName": "high", "priority": 10**9}
    )
    assert spec == {"minMember": 2, "priorityClassName": "high"}


def test_no_constraints_no_keys() -> None:
    assert manifest({"schedulingPolicy": {"basic": {}}}) == {"minMember": 1}


def test_a_child_of_a_composite_podgroup_names_its_parent_as_its_parent_group() -> None:
    spec = manifest({"schedulingPolicy": {"gang": {"minCount": 2}}, "parentCompositePodGroupName": "job"})
    assert spec == {"minMember": 2, "parentPodGroup": "job"}
