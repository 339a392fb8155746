"""The admission Phalanx writes on a PodGroup *before* it lifts any gate (crash-safe admission).

A removed gate cannot be put back, so the record comes first: a controller that restarts in the
middle of lifting a gang's gates finds the record and finishes the job instead of leaving the gang
torn. Stored as JSON in the PodGroup annotation ``phalanx.io/admission``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import orjson

from shared import constants as c


@dataclass(frozen=True, slots=True)
class AdmissionRecord:
    at: float  # seconds since the epoch
    placement: Mapping[str, str | None]  # pod uid -> pinned node (None: free placement)
    # pod uid -> node the plan booked for it, pinned or not: unpinned members keep their room
    # booked until they bind.
    booked: Mapping[str, str] = field(default_factory=dict)

    def encode(self) -> str:
        return orjson.dumps(
            {
                "at": round(self.at, 3),
                "placement": dict(sorted(self.placement.items())),
                "booked": dict(sorted(self.booked.items())),
            }
        ).decode()

    def merged(
        self, more: Mapping[str, str | None], booked: Mapping[str, str], keep: set[str] | None = None
    ) -> AdmissionRecord:
        """This record plus ``more``, dropping uids not in ``keep`` (pods that are gone)."""

        def kept(mapping: Mapping[str, str | None]) -> dict[str, str | None]:
            return {uid: node for uid, node in mapping.items() if keep is None or uid in keep}

        placement = kept(self.placement) | dict(more)
        booked_nodes = {uid: node for uid, node in kept(self.booked).items() if node} | dict(booked)
        return AdmissionRecord(self.at, placement, booked_nodes)


def decode(annotations: Mapping[str, str]) -> AdmissionRecord | None:
    raw = annotations.get(c.ADMISSION_ANNOTATION)
    if not raw:
        return None
    try:
        data = orjson.loads(raw)
        placement = {str(uid): (str(node) if node else None) for uid, node in dict(data["placement"]).items()}
        booked = {str(uid): str(node) for uid, node in dict(data.get("booked") or {}).items() if node}
        return AdmissionRecord(float(data["at"]), placement, booked)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return None
