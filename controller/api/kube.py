"""The one module that talks to the API server.

A thin, typed adapter over an authenticated transport (controller/api/transport.py) that sends and
returns plain JsonObject dicts (parsed with orjson), so the rest of the controller never sees generated
model classes -- they are slow to build and hide fields. Everything else depends on the ``Kube``
Protocol, so tests can swap in a fake.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal, Protocol

import aiohttp
import orjson

from controller.api import transport
from controller.api.resources import ResourceType
from shared.jsonread import JsonObject

log = logging.getLogger(__name__)

PatchType = Literal["merge", "json", "strategic"]
_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
}


class ApiError(Exception):
    """A non-2xx answer from the API server, with its Status message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def gone(self) -> bool:
        return self.status == 410


class Kube(Protocol):
    async def list(
        self, rt: ResourceType, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[list[JsonObject], str]: ...

    def watch(
        self, rt: ResourceType, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[JsonObject]: ...

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> JsonObject: ...

    async def create(
        self, rt: ResourceType, namespace: str | None, body: Mapping[str, Any]
    ) -> JsonObject: ...

    async def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> JsonObject: ...

    async def replace(
        self, rt: ResourceType, namespace: str | None, name: str, body: Mapping[str, Any]
    ) -> JsonObject: ...

    async def delete(
        self, rt: ResourceType, namespace: str | None, name: str, uid: str | None = None
    ) -> None: ...

    async def evict(
        self, namespace: str, name: str, grace_seconds: int | None = None, dry_run: bool = False
    ) -> None: ...

    async def served(self, rt: ResourceType) -> bool: ...


def _error(status: int, body: bytes) -> ApiError:
    try:
        parsed = orjson.loads(body)
        return ApiError(status, str(parsed.get("reason", "")), str(parsed.get("message", "")))
    except orjson.JSONDecodeError:
        return ApiError(status, "", body[:300].decode(errors="replace"))


# Connections kept for long-running watches, beyond those for concurrent requests.
WATCH_CONNECTIONS = 32


class KubeClient:
    """``Kube`` over a ``transport.Transport`` (kubeconfig or in-cluster service account)."""

    def __init__(
        self,
        sender: transport.Transport,
        list_page_size: int = 1000,
        headers: tuple[tuple[str, str], ...] = (),
        request_timeout: float | None = None,
    ) -> None:
        self._transport = sender
        self._page = list_page_size
        self._headers = headers  # sent with every request (kubectl's --as, --as-group)
        self._request_timeout = request_timeout  # every request's, 0: none (--request-timeout)

    @classmethod
    async def connect(cls, kubeconfig: str | None = None, qps_connections: int = 100) -> KubeClient:
        # Gate lifts go out concurrently, and every informer's watch holds a connection of its own
        # for as long as it runs: a pool only as large as the patch concurrency would let the
        # watches starve every other request (with --patch-concurrency 1, nothing was ever lifted).
        return cls(await transport.connect(kubeconfig, qps_connections + WATCH_CONNECTIONS))

    async def close(self) -> None:
        await self._transport.close()

    async def _request(
        self,
        method: str,
        path: str,
        query: list[tuple[str, str]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = 30.0,
    ) -> aiohttp.ClientResponse:
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        if self._request_timeout is not None:
            timeout = self._request_timeout or None
        try:
            response = await self._transport.send(
                transport.Request(method, path, query or [], body, headers, timeout, self._headers)
            )
        except (aiohttp.ClientError, TimeoutError) as err:
            # No answer at all: an ApiError too, so that callers handling one gang's failure (retry
            # it with backoff) do not abort the whole pass over a network blip.
            raise ApiError(0, "Unreachable", f"{method} {path}: {type(err).__name__}: {err}") from err
        # The transport hands back error answers too (a 404 arrives as a Status body): turn every
        # non-2xx into an ApiError here, once, for every caller.
        if not 200 <= response.status < 300:
            data = await response.read()
            response.release()
            raise _error(response.status, data)
        return response

    async def _json(self, method: str, path: str, **kwargs: Any) -> JsonObject:
        response = await self._request(method, path, **kwargs)
        data = await response.read()
        result: JsonObject = orjson.loads(data) if data else {}
        return result

    async def list(
        self, rt: ResourceType, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[list[JsonObject], str]:
        items: list[JsonObject] = []
        token = ""
        while True:
            query = [("limit", str(self._page))]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if token:
                query.append(("continue", token))
            page = await self._json("GET", rt.path(namespace), query=query, timeout=120.0)
            items.extend(page.get("items") or [])
            token = page.get("metadata", {}).get("continue") or ""
            if not token:
                return items, str(page.get("metadata", {}).get("resourceVersion", ""))

    async def watch(
        self, rt: ResourceType, resource_version: str, timeout_seconds: int
    ) -> AsyncIterator[JsonObject]:
        query = [
            ("watch", "1"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        response = await self._request("GET", rt.path(), query=query, timeout=timeout_seconds + 30)
        try:
            async for line in response.content:
                if line.strip():
                    yield orjson.loads(line)
        finally:
            response.release()

    async def get(self, rt: ResourceType, namespace: str | None, name: str) -> JsonObject:
        return await self._json("GET", rt.path(namespace, name))

    async def create(self, rt: ResourceType, namespace: str | None, body: Mapping[str, Any]) -> JsonObject:
        return await self._json("POST", rt.path(namespace), body=dict(body))

    async def patch(
        self,
        rt: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        patch_type: PatchType = "merge",
        subresource: str | None = None,
    ) -> JsonObject:
        return await self._json(
            "PATCH",
            rt.path(namespace, name, subresource),
            body=body,
            content_type=_PATCH_CONTENT_TYPES[patch_type],
        )

    async def replace(
        self, rt: ResourceType, namespace: str | None, name: str, body: Mapping[str, Any]
    ) -> JsonObject:
        return await self._json("PUT", rt.path(namespace, name), body=dict(body))

    async def delete(
        self, rt: ResourceType, namespace: str | None, name: str, uid: str | None = None
    ) -> None:
        body: JsonObject = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}  # never delete a newer object of the same name
        await self._json("DELETE", rt.path(namespace, name), body=body)

    async def evict(
        self, namespace: str, name: str, grace_seconds: int | None = None, dry_run: bool = False
    ) -> None:
        body: JsonObject = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
        }
        options: JsonObject = {}
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = grace_seconds
        if dry_run:  # checks PodDisruptionBudgets without evicting
            options["dryRun"] = ["All"]
        if options:
            body["deleteOptions"] = options
        await self._json("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction", body=body)

    async def served(self, rt: ResourceType) -> bool:
        path = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
        try:
            resources = await self._json("GET", path)
        except ApiError as err:
            if err.status in (403, 404, 503):
                return False
            raise
        return any(r.get("name") == rt.plural for r in resources.get("resources", []))

    async def server_version(self) -> JsonObject:
        """The API server's /version (gitVersion, major, minor)."""
        return await self._json("GET", "/version")


async def gather_limited(limit: int, *coros: Any) -> list[Any]:
    """asyncio.gather with at most ``limit`` in flight, returning exceptions instead of raising."""
    semaphore = asyncio.Semaphore(limit)

    async def run(coro: Any) -> Any:
        async with semaphore:
            return await coro

    return await asyncio.gather(*(run(c) for c in coros), return_exceptions=True)
