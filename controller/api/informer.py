"""List-then-watch informers, done the way client-go does them.

LIST (paginated), hand the full set to the sink (which drops what vanished), mark synced, then
WATCH from the list's resourceVersion with bookmarks so a reconnect resumes cheaply. A 410 Gone --
as an HTTP status or as an ERROR event -- means the resourceVersion fell out of etcd's window:
relist. A stream that stays silent longer than the inactivity timeout is presumed dead (bookmarks
arrive about once a minute on a healthy one) and is reopened.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Mapping
from typing import Any, Protocol

from controller.api.kube import ApiError, Kube
from controller.api.resources import ResourceType
from shared.jsonread import JsonObject

log = logging.getLogger(__name__)


class Sink(Protocol):
    def replace(self, items: list[JsonObject]) -> None: ...

    def upsert(self, obj: JsonObject) -> None: ...

    def delete(self, obj: JsonObject) -> None: ...


class Informer:
    def __init__(
        self,
        kube: Kube,
        rt: ResourceType,
        sink: Sink,
        watch_timeout_seconds: int = 300,
        inactivity_timeout_seconds: float = 150.0,
    ) -> None:
        self.kube = kube
        self.rt = rt
        self.sink = sink
        self.watch_timeout = watch_timeout_seconds
        self.inactivity_timeout = inactivity_timeout_seconds
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.relists = 0

    async def run(self) -> None:
        backoff = 0.5
        while True:
            try:
                if not self.resource_version:
                    await self._list()
                await self._watch()
                backoff = 0.5
                continue  # a watch that ended normally is reopened at once
            except asyncio.CancelledError:
                raise
            except ApiError as err:
                if err.gone:
                    log.info("watch expired, relisting", extra={"resource": str(self.rt)})
                    self.resource_version = ""
                    continue
                log.warning("informer error", extra={"resource": str(self.rt), "error": str(err)})
            except (TimeoutError, OSError, ValueError) as err:
                log.warning("informer stream failed", extra={"resource": str(self.rt), "error": repr(err)})
            except Exception as err:  # the aiohttp client raises a zoo of transport errors
                log.warning("informer stream failed", extra={"resource": str(self.rt), "error": repr(err)})
            await asyncio.sleep(backoff * (1 + random.random()))
            backoff = min(backoff * 2, 30.0)

    async def _list(self) -> None:
        items, self.resource_version = await self.kube.list(self.rt)
        self.relists += 1
        try:
            self.sink.replace(items)
        except Exception:  # one object no reader understands must not keep the rest out
            self.sink.replace(self._readable(items))
        self.synced.set()

    def _readable(self, items: list[JsonObject]) -> list[JsonObject]:
        """The listed objects the sink can read (each one tried alone); the others are logged and
        left out, so one object a tenant wrote oddly never keeps a kind from syncing."""
        readable = []
        for item in items:
            try:
                self.sink.upsert(item)
            except Exception as err:  # see _list
                self._skipped(item, err)
            else:
                readable.append(item)
        return readable

    def _skipped(self, obj: Mapping[str, Any], err: Exception) -> None:
        meta = obj.get("metadata") or {}
        log.warning(
            "object not readable, skipped",
            extra={
                "resource": str(self.rt),
                "object": f"{meta.get('namespace', '')}/{meta.get('name', '')}",
                "error": repr(err),
            },
        )

    async def _watch(self) -> None:
        stream = self.kube.watch(self.rt, self.resource_version, self.watch_timeout)
        iterator = stream.__aiter__()
        while True:
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns an event that
                # arrives in the tick the task is cancelled and drops the cancellation, so a busy
                # stream could keep a stopping process alive.
                async with asyncio.timeout(self.inactivity_timeout):
                    event = await iterator.__anext__()
            except StopAsyncIteration:
                return  # server-side timeout: resume from the last resourceVersion
            except TimeoutError:
                log.info("watch inactive, reopening", extra={"resource": str(self.rt)})
                return
            self._dispatch(event)

    def _dispatch(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        obj = event.get("object") or {}
        if kind == "ERROR":
            code = int(obj.get("code") or 0)
            raise ApiError(code, str(obj.get("reason", "")), str(obj.get("message", "")))
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            self.resource_version = str(rv)
        try:
            if kind in ("ADDED", "MODIFIED"):
                self.sink.upsert(obj)
            elif kind == "DELETED":
                self.sink.delete(obj)
        except Exception as err:  # see _list: the stream goes on
            self._skipped(obj, err)
        # BOOKMARK: only the resourceVersion advances.
