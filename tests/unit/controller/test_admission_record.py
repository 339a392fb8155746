"""The admission record as written on a PodGroup: what it says survives a round trip, a pinned
member's node is written once (annotations hold 256 KiB in all), and records written with every
booked node spelled out still read the same."""

from __future__ import annotations

import uuid

import orjson

from controller.api.admission_record import AdmissionRecord, decode
from shared import constants

ANNOTATIONS_LIMIT = 256 * 1024  # the API server's limit on all of an object's annotations


def record(members: int) -> AdmissionRecord:
    uids = [str(uuid.UUID(int=i + 1)) for i in range(members)]
    placement: dict[str, str | None] = {uid: f"gpu-node-{i:04d}" for i, uid in enumerate(uids)}
    placement[uids[0]] = None  # placed freely: the scheduler chooses, its room stays booked
    booked = {uid: f"gpu-node-{i:04d}" for i, uid in enumerate(uids)}
    return AdmissionRecord(1_000.0, placement, booked, 1_010.0)


def test_a_record_reads_back_as_written() -> None:
    written = record(5)
    read = decode({constants.ADMISSION_ANNOTATION: written.encode()})
    assert read == written


def test_a_pinned_member_s_node_is_written_once() -> None:
    data = orjson.loads(record(5).encode())
    assert list(data["booked"]) == [str(uuid.UUID(int=1))]  # only the freely placed member


def test_a_record_of_every_booked_node_reads_the_same() -> None:
    written = record(5)
    spelled_out = {
        "at": 1_000.0,
        "last": 1_010.0,
        "placement": dict(written.placement),
        "booked": dict(written.booked),
    }
    assert decode({constants.ADMISSION_ANNOTATION: orjson.dumps(spelled_out).decode()}) == written


def test_a_4000_member_gang_s_record_fits_the_annotations_limit() -> None:
    assert len(record(4_000).encode().encode()) < ANNOTATIONS_LIMIT
