"""The typed Queue wire model: read tolerantly, written by wire name, and the CRD generated from it."""

from __future__ import annotations

from deploy import crdgen
from shared.queue import QueueResourceSpec, QueueSpec, QueueStatus, queue_spec_fields, queue_status_fields


def test_a_stored_queue_spec_is_read_into_typed_fields() -> None:
    spec = QueueSpec.from_json(
        {
            "parent": "research",
            "resources": {
                "nvidia.com/gpu": {"quota": 8, "limit": "16", "overQuotaWeight": 2},
                "cpu": {"quota": "500m"},
            },
        }
    )
    assert spec == QueueSpec(
        "research",
        {
            "nvidia.com/gpu": QueueResourceSpec("8", "16", 2.0),
            "cpu": QueueResourceSpec("500m", None, None),
        },
    )


def test_queue_values_of_the_wrong_type_read_as_absent() -> None:
    spec = QueueSpec.from_json({"parent": 3, "resources": {"cpu": {"quota": True, "overQuotaWeight": "x"}}})
    assert spec == QueueSpec(None, {"cpu": QueueResourceSpec()})
    assert QueueSpec.from_json(None) == QueueSpec()


def test_a_queue_status_is_written_by_wire_name_with_none_to_remove_a_stale_message() -> None:
    status = QueueStatus({"nvidia.com/gpu": "4"}, {"nvidia.com/gpu": "8"}, {}, {}, 1, 1, "4/4/4", None)
    assert status.to_json() == {
        "allocated": {"nvidia.com/gpu": "4"},
        "requested": {"nvidia.com/gpu": "8"},
        "fairShare": {},
        "outsidePhalanx": {},
        "admittedGangs": 1,
        "waitingGangs": 1,
        "summary": "4/4/4",
        "message": None,
    }


def test_the_queue_crd_schemas_are_the_typed_models() -> None:
    phalanx = crdgen.queue_crd(crdgen.QUEUE_VARIANTS[0])["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec, status = phalanx["properties"]["spec"], phalanx["properties"]["status"]
    assert list(spec["properties"]) == [about.wire for about, _ in queue_spec_fields()]
    assert list(status["properties"]) == [about.wire for about, _ in queue_status_fields()]
    resource = spec["properties"]["resources"]["additionalProperties"]["properties"]
    assert resource["quota"]["x-kubernetes-int-or-string"] is True
    assert resource["overQuotaWeight"] == {
        "type": "number",
        "minimum": 0,
        "description": "Share of the room beyond the quotas, relative to other queues (default 1).",
    }
