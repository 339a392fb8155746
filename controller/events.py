"""Kubernetes Events on PodGroups, de-duplicated so a waiting gang does not spam its history."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any

from controller.kube import ApiError, Kube
from controller.resources import EVENTS
from controller.status import iso
from controller.store import PodGroupRecord

log = logging.getLogger(__name__)
COMPONENT = "phalanx-controller"


class EventRecorder:
    def __init__(self, kube: Kube, clock: Callable[[], float], instance: str) -> None:
        self._kube = kube
        self._clock = clock
        self._instance = instance
        # (podgroup uid, reason) -> last message; an Event is sent when the message changes.
        self._last: dict[tuple[str, str], str] = {}

    def seen(self, record: PodGroupRecord, reason: str, message: str) -> bool:
        return self._last.get((record.uid, reason)) == message

    async def emit(
        self,
        record: PodGroupRecord,
        reason: str,
        message: str,
        warning: bool = False,
        dedupe: str | None = None,
    ) -> None:
        """Send an Event unless the last one for (PodGroup, reason) said the same.

        ``dedupe`` replaces the message as the thing compared, e.g. the waiting reason, so that a
        waiting gang whose numbers change does not add an Event on every pass.
        """
        marker = dedupe if dedupe is not None else message
        if self.seen(record, reason, marker):
            return
        self._last[(record.uid, reason)] = marker
        involved = {
            "apiVersion": record.rt.api_version,
            "kind": record.rt.kind,
            "name": record.name,
            "namespace": record.namespace,
            "uid": record.uid,
        }
        body = self._body(involved, reason, message, warning)
        try:
            await self._kube.create(EVENTS, record.namespace, body)
            # Users of the native Workload API look at their Workload: tell them there too.
            for owner in record.owner_references:
                if owner.get("kind") == "Workload" and str(owner.get("apiVersion", "")).startswith(
                    "scheduling.k8s.io/"
                ):
                    mirrored = {
                        **body,
                        "metadata": {
                            "name": f"{owner['name']}.{uuid.uuid4().hex[:12]}",
                            "namespace": record.namespace,
                        },
                        "involvedObject": {
                            "apiVersion": owner["apiVersion"],
                            "kind": "Workload",
                            "name": owner["name"],
                            "namespace": record.namespace,
                            "uid": owner.get("uid", ""),
                        },
                        "message": f"PodGroup {record.name}: {body['message']}"[:1024],
                    }
                    await self._kube.create(EVENTS, record.namespace, mirrored)
        except ApiError as err:  # events are best effort; never fail a reconcile for one
            log.warning(
                "event not recorded",
                extra={"podgroup": f"{record.namespace}/{record.name}", "error": str(err)},
            )

    async def emit_on_pod(self, namespace: str, name: str, uid: str, reason: str, message: str) -> None:
        """A Warning Event on a pod (not de-duplicated: callers report each pod once)."""
        involved = {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": namespace, "uid": uid}
        try:
            await self._kube.create(EVENTS, namespace, self._body(involved, reason, message, True))
        except ApiError as err:
            log.warning("event not recorded", extra={"pod": f"{namespace}/{name}", "error": str(err)})

    def _body(self, involved: dict[str, str], reason: str, message: str, warning: bool) -> dict[str, Any]:
        now = iso(self._clock())
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{involved['name']}.{uuid.uuid4().hex[:12]}",
                "namespace": involved["namespace"],
            },
            "involvedObject": involved,
            "reason": reason,
            "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }

    def retain(self, uids: set[str]) -> None:
        """Drop de-duplication memory of PodGroups that no longer exist."""
        for key in [k for k in self._last if k[0] not in uids]:
            del self._last[key]
