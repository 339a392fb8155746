"""The admission record as written on a PodGroup: what it says survives a round trip, a pinned
member's node is written once and a large record is compressed (annotations hold 256 KiB in all),
and records written with every booked node spelled out still read the same."""

from __future__ import annotations

import base64
import uuid
import zlib

import orjson
import pytest

from controller.api.admission_record import COMPRESS_ABOVE, COMPRESSED, RECORD_LIMIT, AdmissionRecord, decode
from shared import constants

ANNOTATIONS_LIMIT = 256 * 1024  # the API server's limit on all of an object's annotations


def record(members: int) -> AdmissionRecord:
    # Random uids, as the API server assigns them: they do not compress like counted ones do.
    uids = [str(uuid.UUID(int=i + 1) if i == 0 else uuid.uuid4()) for i in range(members)]
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


def test_a_small_record_is_json_a_person_can_read() -> None:
    written = record(5).encode()
    assert not written.startswith(COMPRESSED)
    assert orjson.loads(written)["at"] == 1_000.0


@pytest.mark.parametrize("members", [600, 5_000, 6_500])
def test_a_large_record_is_compressed_reads_back_as_written_and_fits(members: int) -> None:
    written = record(members)
    text = written.encode()
    assert len(orjson.dumps(written.placement)) > COMPRESS_ABOVE
    assert text.startswith(COMPRESSED)
    assert decode({constants.ADMISSION_ANNOTATION: text}) == written
    assert len(text) <= RECORD_LIMIT < ANNOTATIONS_LIMIT


def test_a_10000_member_record_is_past_the_limit() -> None:
    # The executor refuses to write it (and the gang says why): see the component tests.
    assert len(record(10_000).encode()) > RECORD_LIMIT


def _compressed(raw: bytes) -> str:
    return COMPRESSED + base64.b64encode(zlib.compress(raw)).decode()


@pytest.mark.parametrize(
    "value",
    [
        COMPRESSED + "not base64!",
        COMPRESSED + base64.b64encode(b"not zlib").decode(),
        _compressed(b"[1, 2]"),
        _compressed(b" " * (40 * 1024 * 1024)),  # inflates past any record: not read at all
    ],
    ids=["base64", "zlib", "shape", "bomb"],
)
def test_a_damaged_compressed_record_reads_as_none(value: str) -> None:
    assert decode({constants.ADMISSION_ANNOTATION: value}) is None
