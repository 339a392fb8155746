"""The admission Phalanx writes on a PodGroup *before* it lifts any gate (crash-safe admission).

A removed gate cannot be put back, so the record comes first: a controller that restarts in the
middle of lifting a gang's gates finds the record and finishes the job instead of leaving the gang
torn. Stored as JSON in the PodGroup annotation ``phalanx.io/admission``; a large record (a gang of
hundreds of members) as that JSON compressed, so gangs of several thousand members fit in the
256 KiB Kubernetes allows for all of an object's annotations.
"""

from __future__ import annotations

import base64
import binascii
import functools
import uuid
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import orjson

from controller.core import messages as msg
from shared import constants

# Records longer than this are written compressed (below it, the JSON a person can read).
COMPRESS_ABOVE = 16 * 1024
COMPRESSED = "zlib:"  # then the record's JSON, zlib-compressed, in base64
# Kubernetes refuses an object whose annotations, keys and values, exceed 256 KiB in all; the
# rest is left to the PodGroup's other annotations (kubectl's last-applied configuration, ...).
RECORD_LIMIT = 224 * 1024
_INFLATED_LIMIT = 32 * 1024 * 1024  # a record never decompresses beyond this


class RecordTooLarge(Exception):
    """The gang's admission record would not fit on its PodGroup: the gang cannot be admitted."""

    def __init__(self, members: int, size: int) -> None:
        super().__init__(msg.admission_record_too_large(members, size, RECORD_LIMIT))


@dataclass(frozen=True, slots=True)
class AdmissionRecord:
    at: float  # seconds since the epoch
    placement: Mapping[str, str | None]  # pod uid -> pinned node (None: free placement)
    # pod uid -> node the plan booked for it, pinned or not: unpinned members keep their room
    # booked until they bind.
    booked: Mapping[str, str] = field(default_factory=dict)
    # When members were last added (a replacement, an elastic member): the bind timeout of members
    # admitted later counts from here, not from the gang's first admission (``at``).
    last: float | None = None

    @property
    def latest(self) -> float:
        return self.at if self.last is None else self.last

    def encode(self) -> str:
        # A member pinned to a node is booked there too: only the others' booked nodes are written.
        # Annotations hold 256 KiB in all, and writing every pinned node twice halved the largest
        # gang a record can hold.
        text = orjson.dumps(
            {
                "at": round(self.at, 3),
                "last": round(self.latest, 3),
                "placement": dict(sorted(self.placement.items())),
                "booked": {
                    uid: node for uid, node in sorted(self.booked.items()) if self.placement.get(uid) != node
                },
            }
        )
        if len(text) <= COMPRESS_ABOVE:
            return text.decode()
        return COMPRESSED + base64.b64encode(zlib.compress(text, 6)).decode("ascii")

    def union(self, other: AdmissionRecord) -> AdmissionRecord:
        """Both records' members; the earliest first admission and the latest addition."""
        merged = self.merged(other.placement, other.booked)
        return AdmissionRecord(
            min(self.at, other.at), merged.placement, merged.booked, max(self.latest, other.latest)
        )

    def covers(self, uids: Iterable[str]) -> bool:
        """Does this record hold every one of ``uids`` (is it at least as new as a write of them)?"""
        return all(uid in self.placement for uid in uids)

    def merged(
        self,
        more: Mapping[str, str | None],
        booked: Mapping[str, str],
        keep: set[str] | None = None,
        at: float | None = None,
    ) -> AdmissionRecord:
        """This record plus ``more`` (admitted at ``at``), dropping uids not in ``keep`` (gone pods)."""

        def kept(mapping: Mapping[str, str | None]) -> dict[str, str | None]:
            return {uid: node for uid, node in mapping.items() if keep is None or uid in keep}

        placement = kept(self.placement) | dict(more)
        booked_nodes = {uid: node for uid, node in kept(self.booked).items() if node} | dict(booked)
        added = at is not None and any(uid not in self.placement for uid in more)
        return AdmissionRecord(self.at, placement, booked_nodes, at if added else self.last)


def size_for(placement: Mapping[str, str | None], booked: Mapping[str, str]) -> int:
    """The length of the record of an admission with this placement, its members' uids as the API
    server assigns them (random, so they do not compress): would it fit, before the pods exist?"""
    fresh = {uid: str(uuid.uuid4()) for uid in placement}
    record = AdmissionRecord(
        0.0,
        {fresh[uid]: node for uid, node in placement.items()},
        {fresh[uid]: node for uid, node in booked.items() if uid in fresh},
    )
    return len(record.encode())


def decode(annotations: Mapping[str, str]) -> AdmissionRecord | None:
    raw = annotations.get(constants.ADMISSION_ANNOTATION)
    return _decoded(raw) if raw else None


@functools.lru_cache(maxsize=256)
def _decoded(raw: str) -> AdmissionRecord | None:
    # Cached: every pass asks for the admissions of the gangs it looks at, and a large record
    # is an inflate and a parse of a few hundred kilobytes; records are never changed in place.
    try:
        data = orjson.loads(_inflated(raw[len(COMPRESSED) :]) if raw.startswith(COMPRESSED) else raw)
        placement = {str(uid): (str(node) if node else None) for uid, node in dict(data["placement"]).items()}
        pinned = {uid: node for uid, node in placement.items() if node}
        booked = pinned | {
            str(uid): str(node) for uid, node in dict(data.get("booked") or {}).items() if node
        }
        last = data.get("last")
        return AdmissionRecord(float(data["at"]), placement, booked, None if last is None else float(last))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, zlib.error, binascii.Error):
        return None


def _inflated(text: str) -> bytes:
    inflater = zlib.decompressobj()
    data = inflater.decompress(base64.b64decode(text, validate=True), _INFLATED_LIMIT)
    if inflater.unconsumed_tail:
        raise ValueError(_INFLATED_LIMIT)  # read as no record
    return data
