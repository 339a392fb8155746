"""The native gang API read the same at every version Phalanx knows (shared/native.py)."""

from __future__ import annotations

from typing import Any

import pytest

from shared import constants, kinds, native


def podgroup_v1beta1(**spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "train", "namespace": "team", "uid": "u1"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}, **spec},
    }


def test_a_v1beta1_podgroup_reads_its_policy_template_and_constraints() -> None:
    group = native.native_podgroup(
        podgroup_v1beta1(
            workloadRef={"workloadName": "job", "templateName": "workers"},
            schedulingConstraints={"topology": [{"key": "topology.kubernetes.io/rack"}]},
            disruptionMode={"all": {}},
            priorityClassName="high",
            priority=1_000_000,
            parentCompositePodGroupName="root",
        )
    )
    assert group == native.NativePodGroup(
        "team", "train", "u1", 4, "job", "workers", "topology.kubernetes.io/rack", "All", "high", "root", None
    )


def test_the_basic_policy_is_no_gang() -> None:
    group = native.native_podgroup({"metadata": {"name": "p"}, "spec": {"schedulingPolicy": {"basic": {}}}})
    assert group.min_count is None


@pytest.mark.parametrize(("mode", "read"), [({"single": {}}, "Single"), ({"all": {}}, "All"), ({}, None)])
def test_disruption_modes_are_spelled_as_phalanx_spells_them(mode: Any, read: str | None) -> None:
    assert native.native_podgroup(podgroup_v1beta1(disruptionMode=mode)).disruption_mode == read


def test_a_workload_of_either_version_gives_its_gang_sizes() -> None:
    v1alpha1 = {"spec": {"podGroups": [{"name": "w", "policy": {"gang": {"minCount": 3}}}]}}
    v1beta1 = {
        "spec": {
            "podGroupTemplates": [
                {"name": "w", "schedulingPolicy": {"gang": {"minCount": 5}}},
                {"name": "b", "schedulingPolicy": {"basic": {}}},
            ]
        }
    }
    assert native.workload_min_counts(v1alpha1) == {"w": 3}
    assert native.workload_min_counts(v1beta1) == {"w": 5}


def test_every_native_version_in_the_registry_has_its_rule() -> None:
    """Adding a version to the registry without saying how it is spelled would read it wrong."""
    assert set(kinds.NATIVE_PODGROUP_KIND.versions) <= set(native.PODGROUP_RULES)
    assert set(kinds.NATIVE_WORKLOAD_KIND.versions) <= set(native.WORKLOAD_RULES)


def test_a_v1alpha2_podgroup_reads_the_same_from_its_own_spelling() -> None:
    group = native.native_podgroup(
        {
            "metadata": {"name": "train", "namespace": "team", "uid": "u1"},
            "spec": {
                "podGroupTemplateRef": {
                    "workload": {"workloadName": "job", "podGroupTemplateName": "workers"}
                },
                "schedulingPolicy": {"gang": {"minCount": 4}},
                "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]},
                "disruptionMode": "PodGroup",
                "priorityClassName": "high",
            },
        }
    )
    assert group == native.NativePodGroup(
        "team", "train", "u1", 4, "job", "workers", "topology.kubernetes.io/rack", "All", "high", None, None
    )
    assert native.native_podgroup({"spec": {"disruptionMode": "Pod"}}).disruption_mode == "Single"


@pytest.mark.parametrize(
    ("written", "read"), [("600", 600), ("0", None), ("²", None), ("٣", None), ("9" * 40, None)]
)
def test_a_timeout_a_tenant_writes_oddly_is_no_timeout_never_an_error(written: str, read: int | None) -> None:
    raw = {"metadata": {"name": "p", "annotations": {constants.SCHEDULE_TIMEOUT_ANNOTATION: written}}}
    assert native.timeout_annotation(raw) == read
