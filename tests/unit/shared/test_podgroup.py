"""The typed PodGroup spec: read tolerantly from what the API stores, written by wire name."""

from __future__ import annotations

from shared.podgroup import (
    ConditionType,
    Phase,
    PodGroupSpec,
    PodGroupStatus,
    status_fields,
    subgroup_minimums,
)


def test_a_stored_spec_is_read_into_typed_fields() -> None:
    spec = PodGroupSpec.from_json(
        {
            "minMember": 4,
            "maxMember": 8,
            "minResources": {"nvidia.com/gpu": "8", "cpu": 16},
            "scheduleTimeoutSeconds": 600,
            "priorityClassName": "high",
            "priority": 100,
            "queue": "team-a",
            "parentPodGroup": "parent",
            "topologyRequired": "topology.kubernetes.io/rack",
            "topology": "gb200",
            "topologyPreferred": "topology.kubernetes.io/block",
            "topologySliceRequired": "nvidia.com/gpu.clique",
            "topologySliceSize": 8,
            "disruptionMode": "Single",
        }
    )
    assert spec == PodGroupSpec(
        4,
        8,
        {"nvidia.com/gpu": "8", "cpu": "16"},
        600,
        "high",
        100,
        "team-a",
        "parent",
        "topology.kubernetes.io/rack",
        "gb200",
        "topology.kubernetes.io/block",
        "nvidia.com/gpu.clique",
        8,
        "Single",
    )


def test_values_of_the_wrong_type_read_as_absent() -> None:
    spec = PodGroupSpec.from_json(
        {"minMember": True, "maxMember": "x", "queue": 3, "minResources": [], "disruptionMode": "Pod"}
    )
    assert spec == PodGroupSpec()
    assert PodGroupSpec.from_json("not an object") == PodGroupSpec()
    # A whole float (YAML "3.0") and a digit string are integers, as the API server would coerce them.
    assert PodGroupSpec.from_json({"minMember": 3.0, "maxMember": "5"}).min_member == 3
    assert PodGroupSpec.from_json({"maxMember": "5"}).max_member == 5


def test_written_by_wire_name_with_unset_fields_left_out() -> None:
    spec = PodGroupSpec(min_member=3, schedule_timeout_seconds=60)
    assert spec.to_json() == {"minMember": 3, "scheduleTimeoutSeconds": 60}
    assert PodGroupSpec.from_json(spec.to_json()) == spec
    held = PodGroupSpec(min_member=2, topology_required="nvidia.com/gpu.clique", disruption_mode="All")
    assert held.to_json() == {
        "minMember": 2,
        "topologyRequired": "nvidia.com/gpu.clique",
        "disruptionMode": "All",
    }
    assert PodGroupSpec.from_json(held.to_json()) == held


def test_kai_subgroup_minimums_are_those_of_the_leaves() -> None:
    spec = {
        "minMember": 5,
        "subGroups": [
            {"name": "decode", "minMember": 4},  # only groups the two below: its minimum is not a leaf's
            {"name": "leader", "minMember": 1, "parent": "decode"},
            {"name": "workers", "minMember": 3, "parent": "decode"},
            {"name": "prefill", "minMember": 2},
            {"name": "optional"},  # no minMember: asks for nothing
            "not a subgroup",
        ],
    }
    assert subgroup_minimums(spec) == {"leader": 1, "workers": 3, "prefill": 2}
    assert subgroup_minimums({"minMember": 2}) == {}
    assert subgroup_minimums(None) == {}


# ---- status ----------------------------------------------------------------------------------------


def test_a_stored_status_is_read_into_typed_fields_and_written_back_by_wire_name() -> None:
    stored = {
        "phase": "Running",
        "members": 4,
        "gated": 0,
        "scheduled": 4,
        "running": 4,
        "succeeded": 0,
        "failed": 0,
        "scheduleStartTime": "2026-01-01T00:00:00Z",
        "admittedTime": "2026-01-01T00:01:00Z",
        "reason": "Admitted",
        "message": "4 members running",
        "conditions": [{"type": "Admitted", "status": "True"}, {"type": "Theirs", "status": "False"}],
    }
    status = PodGroupStatus.from_json(stored)
    assert status.phase is Phase.RUNNING and status.running == 4
    assert status.condition(ConditionType.ADMITTED) == {"type": "Admitted", "status": "True"}
    assert status.to_json() == stored


def test_a_status_field_of_the_wrong_type_reads_as_absent_and_one_phalanx_does_not_write_stays() -> None:
    status = PodGroupStatus.from_json({"phase": "Dancing", "members": "many", "occupiedBy": "ns/job"})
    assert (status.phase, status.members, status.occupied_by) == (None, 0, "ns/job")
    # occupiedBy is a Coscheduling field Phalanx never writes: its status patch leaves it as it is.
    assert "occupiedBy" not in status.to_json()
    # Fields written as None are removed by the merge patch (a stale admittedTime after a rollback).
    assert status.to_json()["admittedTime"] is None


def test_the_crd_status_schema_is_the_typed_model() -> None:
    from deploy import crdgen

    properties = crdgen.STATUS["properties"]
    assert [about.wire for about, _ in status_fields()] == list(properties)
    assert properties["phase"]["enum"] == [p.value for p in Phase]
    assert properties["admittedTime"]["format"] == "date-time"
