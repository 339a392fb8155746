"""/healthz, /readyz and /metrics over plain HTTP on their own port."""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest


def health_app(
    ready: Callable[[], bool], alive: Callable[[], bool], registry: CollectorRegistry
) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok") if alive() else web.Response(status=500, text="unhealthy")

    async def readyz(_: web.Request) -> web.Response:
        return web.Response(text="ok") if ready() else web.Response(status=503, text="informers not synced")

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
    return app
