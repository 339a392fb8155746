"""Kubernetes Events on PodGroups (and member pods), de-duplicated so a waiting gang does not spam its
history."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from controller.api.kube import ApiError, Kube
from controller.api.records import PodGroupRecord
from controller.api.resources import EVENTS
from controller.core.model import Pod
from controller.pipeline.status import iso

log = logging.getLogger(__name__)
COMPONENT = "phalanx-controller"


# Events waiting to be posted; beyond this many the oldest are dropped (they are best effort).
BACKLOG = 10_000


class EventRecorder:
    """Events are best effort: with ``background`` they are queued and posted by ``run()`` (a task
    of the controller's TaskGroup), so a reconcile pass never waits on them; without it (tests, one-
    shot tools) they are posted at once."""

    def __init__(
        self, kube: Kube, clock: Callable[[], float], instance: str, background: bool = False
    ) -> None:
        self._kube = kube
        self._clock = clock
        self._instance = instance
        # (podgroup uid, reason) -> last message; an Event is sent when the message changes.
        self._last: dict[tuple[str, str], str] = {}
        self._background = background
        self._backlog: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue(BACKLOG)
        self.dropped = 0

    async def run(self) -> None:
        """Post queued Events, one at a time, for ever."""
        while True:
            namespace, body = await self._backlog.get()
            try:
                await self._send(namespace, body)
            except Exception as err:  # a transport error must not end the controller
                log.warning("event not recorded", extra={"namespace": namespace, "error": repr(err)})

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
        involved = {"apiVersion": record.rt.api_version, "kind": record.rt.kind, "name": record.name}
        body = self._claim(record.uid, record.namespace, involved, reason, message, warning, dedupe)
        if body is None:
            return
        mirrors = [
            # Users of the native Workload API look at their Workload: tell them there too.
            {
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
            for owner in record.owner_references
            if owner.get("kind") == "Workload"
            and str(owner.get("apiVersion", "")).startswith("scheduling.k8s.io/")
        ]
        await self._post(record.namespace, body, *mirrors)

    async def emit_on_pod(self, pod: Pod, reason: str, message: str, warning: bool = False) -> None:
        """An Event on a member pod (where ``kubectl describe pod`` shows it), once per message."""
        involved = {"apiVersion": "v1", "kind": "Pod", "name": pod.name}
        body = self._claim(pod.uid, pod.namespace, involved, reason, message, warning, None)
        if body is not None:
            await self._post(pod.namespace, body)

    def _claim(
        self,
        uid: str,
        namespace: str,
        involved: dict[str, str],
        reason: str,
        message: str,
        warning: bool,
        dedupe: str | None,
    ) -> dict[str, Any] | None:
        """The Event to send, or None when the last one for (object, reason) said the same."""
        marker = dedupe if dedupe is not None else message
        if self._last.get((uid, reason)) == marker:
            return None
        self._last[(uid, reason)] = marker
        now = iso(self._clock())
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{involved['name']}.{uuid.uuid4().hex[:12]}", "namespace": namespace},
            "involvedObject": {**involved, "namespace": namespace, "uid": uid},
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

    async def _post(self, namespace: str, *bodies: dict[str, Any]) -> None:
        if not self._background:
            for body in bodies:
                await self._send(namespace, body)
            return
        for body in bodies:
            if self._backlog.full():
                self._backlog.get_nowait()  # the oldest goes: a newer Event says more
                self.dropped += 1
            self._backlog.put_nowait((namespace, body))

    async def _send(self, namespace: str, *bodies: dict[str, Any]) -> None:
        try:
            for body in bodies:
                await self._kube.create(EVENTS, namespace, body)
        except ApiError as err:  # events are best effort; never fail a reconcile for one
            log.warning("event not recorded", extra={"namespace": namespace, "error": str(err)})

    def retain(self, uids: set[str]) -> None:
        """Drop de-duplication memory of objects that no longer exist."""
        for key in [k for k in self._last if k[0] not in uids]:
            del self._last[key]
