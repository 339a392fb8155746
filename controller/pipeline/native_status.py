"""The scheduling condition of a native PodGroup (``scheduling.k8s.io``, 1.36+) whose gang Phalanx holds.

The kube-scheduler writes it when it tries the group (``PodGroupInitiallyScheduled``; 1.36's
``PodGroupScheduled``), but it never sees a group whose members wait at Phalanx's gate: so while
Phalanx holds a whole group it says so in upstream's words (``False``, ``Unschedulable``, and why),
and once the group runs, ``True``/``Scheduled``. A condition already ``True`` is terminal upstream and
left alone; nothing else of the native PodGroup is written. Pure but for ``write``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from controller.api.kube import ApiError, Kube
from controller.api.records import PodGroupRecord
from controller.api.resources import NATIVE_PODGROUP_VERSIONS, ResourceType
from controller.core import Reason
from controller.core import messages as msg
from shared.native import (
    REASON_SCHEDULED,
    REASON_UNSCHEDULABLE,
    NativePodGroup,
    scheduled_condition_type,
)
from shared.podgroup import Phase, PodGroupStatus

log = logging.getLogger(__name__)

# Phases in which the group is held at the gate with all its members there, and in which it runs.
_HELD = frozenset({Phase.PENDING, Phase.FAILED})
_PLACED = frozenset({Phase.SCHEDULED, Phase.RUNNING, Phase.FINISHED})


def native_owner(record: PodGroupRecord) -> str | None:
    """The native PodGroup the Phalanx PodGroup was made for (its owner), if any."""
    for owner in record.owner_references:
        if owner.get("kind") == "PodGroup" and str(owner.get("apiVersion", "")).startswith(
            "scheduling.k8s.io/"
        ):
            return str(owner.get("name", "")) or None
    return None


def wanted_condition(status: PodGroupStatus, native: NativePodGroup) -> tuple[str, str, str] | None:
    """(status, reason, message) to write, or None: nothing to say, or already said."""
    if native.scheduled is not None and native.scheduled[0] == "True":
        return None  # terminal upstream: never regress it
    if status.phase in _HELD and status.reason != Reason.WAITING_FOR_MEMBERS and status.message:
        wanted = ("False", REASON_UNSCHEDULABLE, msg.native_held(status.message))
    elif status.phase in _PLACED:
        wanted = ("True", REASON_SCHEDULED, msg.native_placed(status.scheduled + status.succeeded))
    else:
        return None
    return None if native.scheduled == wanted else wanted


def condition_patch(api_version: str, wanted: tuple[str, str, str], now_iso: str) -> Mapping[str, Any]:
    condition = {
        "type": scheduled_condition_type(api_version),
        "status": wanted[0],
        "reason": wanted[1],
        "message": wanted[2][:32768],
        "lastTransitionTime": now_iso,
    }
    # A strategic merge patch merges conditions by type: the scheduler's others are kept.
    return {"status": {"conditions": [condition]}}


def resource_of(api_version: str) -> ResourceType:
    return next(
        (rt for rt in NATIVE_PODGROUP_VERSIONS if rt.api_version == api_version), NATIVE_PODGROUP_VERSIONS[0]
    )


async def write(
    kube: Kube, api_version: str, native: NativePodGroup, wanted: tuple[str, str, str], now_iso: str
) -> bool:
    """Patch the condition; False (logged) when the API refused it, to be tried on a later pass."""
    try:
        await kube.patch(
            resource_of(api_version),
            native.namespace,
            native.name,
            condition_patch(api_version, wanted, now_iso),
            patch_type="strategic",
            subresource="status",
        )
    except ApiError as err:
        if not err.not_found:
            log.warning(
                "native podgroup condition not written", extra={"podgroup": native.name, "error": str(err)}
            )
        return False
    return True
