"""Kubernetes Events on PodGroups (their Workloads, member pods), one per (object, reason), counted.

As client-go's recorder does, a repeat updates the Event instead of adding one: ``count`` goes up,
``message`` and ``lastTimestamp`` follow, ``firstTimestamp`` stays. The Event's name is derived from
(object uid, reason), so a new leader finds the Event its predecessor wrote and goes on counting
from it. What was last said is kept on the Event (``phalanx.io/event-key``): a new leader that
finds its predecessor's Event saying the same does not count it again.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Callable
from typing import Any

from controller.api.kube import ApiError, Kube
from controller.api.records import PodGroupRecord
from controller.api.resources import EVENTS, NATIVE_PODGROUPS, WORKLOADS
from controller.core import EventReason, Pod
from controller.core import messages as msg
from controller.pipeline.status import iso

log = logging.getLogger(__name__)
# The native objects a PodGroup Phalanx made may be owned by: its Events are mirrored there.
NATIVE_KINDS = frozenset({WORKLOADS.kind, NATIVE_PODGROUPS.kind})
# Who reports: reportingComponent is domain-qualified (as kubernetes.io/kubelet is); source is what
# `kubectl describe` shows under "From".
REPORTING_COMPONENT = "phalanx.io/controller"
SOURCE_COMPONENT = "phalanx-controller"
# On each Event: a digest of what it last said (its de-duplication key), read back after a failover.
EVENT_KEY_ANNOTATION = "phalanx.io/event-key"
# Event names are DNS subdomains (253 characters): the object's name is cut to leave room for the digest.
_NAME_ROOM = 253 - 1 - 16

# Events waiting to be posted; beyond this many the oldest are dropped (they are best effort).
BACKLOG = 10_000


def event_name(involved_name: str, uid: str, reason: str) -> str:
    """The one Event of (object, reason): stable across repeats and across controller restarts."""
    digest = hashlib.sha256(f"{uid}/{reason}".encode()).hexdigest()[:16]
    return f"{involved_name[:_NAME_ROOM]}.{digest}"


def _key_digest(marker: str) -> str:
    return hashlib.sha256(marker.encode()).hexdigest()[:16]


class EventRecorder:
    """Events are best effort: with ``background`` they are queued and posted by ``run()`` (a task
    of the controller's TaskGroup), so a reconcile pass never waits on them; without it (tests, one-
    shot tools) they are posted at once."""

    def __init__(
        self, kube: Kube, clock: Callable[[], float], instance: str, background: bool = False
    ) -> None:
        self._kube = kube
        self._clock = clock
        self._instance = instance  # reportingInstance: this replica (its pod's name)
        # (object uid, reason) -> last de-duplication key; an Event is sent when the key changes.
        self._last: dict[tuple[str, str], str] = {}
        # Event name -> (object uid, count) as this process last wrote or read it.
        self._counts: dict[str, tuple[str, int]] = {}
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

    def seen(self, record: PodGroupRecord, reason: EventReason, message: str) -> bool:
        return self._last.get((record.uid, str(reason))) == message

    async def emit(
        self,
        record: PodGroupRecord,
        reason: EventReason,
        message: str,
        warning: bool = False,
        dedupe: str | None = None,
    ) -> None:
        """Count an Event unless the last one for (PodGroup, reason) said the same.

        ``dedupe`` replaces the message as the thing compared, e.g. the waiting reason, so that a
        waiting gang whose numbers change does not count an Event on every pass.
        """
        involved = {"apiVersion": record.rt.api_version, "kind": record.rt.kind, "name": record.name}
        body = self._claim(record.uid, record.namespace, involved, reason, message, warning, dedupe)
        if body is None:
            return
        mirrors = []
        for owner in record.owner_references:
            # Users of the native Workload API look at their Workload or PodGroup: tell them there too.
            if owner.get("kind") not in NATIVE_KINDS or not str(owner.get("apiVersion", "")).startswith(
                f"{NATIVE_PODGROUPS.group}/"
            ):
                continue
            uid = str(owner.get("uid", "")) or f"{record.namespace}/{owner['name']}"
            mirrors.append(
                {
                    **body,
                    "metadata": {
                        **body["metadata"],
                        "name": event_name(owner["name"], uid, str(reason)),
                    },
                    "involvedObject": {
                        "apiVersion": owner["apiVersion"],
                        "kind": owner["kind"],
                        "name": owner["name"],
                        "namespace": record.namespace,
                        "uid": owner.get("uid", ""),
                    },
                    "message": msg.on_podgroup(record.name, body["message"])[:1024],
                }
            )
        await self._post(record.namespace, body, *mirrors)

    async def emit_on_pod(self, pod: Pod, reason: EventReason, message: str, warning: bool = False) -> None:
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
        reason: EventReason,
        message: str,
        warning: bool,
        dedupe: str | None,
    ) -> dict[str, Any] | None:
        """The Event to record, or None when the last one for (object, reason) said the same."""
        marker = dedupe if dedupe is not None else message
        if self._last.get((uid, str(reason))) == marker:
            return None
        self._last[(uid, str(reason))] = marker
        now = iso(self._clock())
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": event_name(involved["name"], uid, str(reason)),
                "namespace": namespace,
                "annotations": {EVENT_KEY_ANNOTATION: _key_digest(marker)},
            },
            "involvedObject": {**involved, "namespace": namespace, "uid": uid},
            "reason": str(reason),
            "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": SOURCE_COMPONENT},
            "reportingComponent": REPORTING_COMPONENT,
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

    async def _send(self, namespace: str, body: dict[str, Any]) -> None:
        try:
            await self._record(namespace, body)
        except ApiError as err:  # events are best effort; never fail a reconcile for one
            log.warning("event not recorded", extra={"namespace": namespace, "error": str(err)})

    async def _record(self, namespace: str, body: dict[str, Any]) -> None:
        """Create the Event, or count one more on it: what this process wrote last, else what the
        API server has (a predecessor's, after a failover or restart: the create is refused)."""
        name = body["metadata"]["name"]
        uid = body["involvedObject"]["uid"]
        known = self._counts.get(name)
        if known is None:
            try:
                await self._kube.create(EVENTS, namespace, body)
                self._counts[name] = (uid, 1)
                return
            except ApiError as err:
                if not err.conflict:
                    raise
            existing = await self._kube.get(EVENTS, namespace, name)
            known = (uid, int(existing.get("count") or 1))
            said = (existing.get("metadata", {}).get("annotations") or {}).get(EVENT_KEY_ANNOTATION)
            if said == body["metadata"]["annotations"][EVENT_KEY_ANNOTATION]:
                self._counts[name] = known  # the predecessor said this already: not a repeat
                return
        count = known[1] + 1
        patch = {
            "metadata": {"annotations": body["metadata"]["annotations"]},
            "message": body["message"],
            "type": body["type"],
            "lastTimestamp": body["lastTimestamp"],
            "count": count,
            "reportingInstance": body["reportingInstance"],
        }
        try:
            await self._kube.patch(EVENTS, namespace, name, patch)
        except ApiError as err:
            if not err.not_found:
                raise
            # Expired (the API server keeps Events for an hour by default): this one starts anew.
            await self._kube.create(EVENTS, namespace, body)
            count = 1
        self._counts[name] = (uid, count)

    def retain(self, uids: set[str]) -> None:
        """Drop de-duplication memory of objects that no longer exist."""
        for key in [k for k in self._last if k[0] not in uids]:
            del self._last[key]
        for name in [n for n, (uid, _) in self._counts.items() if uid not in uids]:
            del self._counts[name]
