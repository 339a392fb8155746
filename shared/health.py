"""``/healthz``, ``/readyz`` and ``/metrics`` over plain HTTP, the same for both processes.

Each process supplies what differs: when it is alive, when it is ready (and what to say when it is
not), and its metrics. Served on a port of its own, so that kubelet probes and Prometheus need no
certificate and never queue behind admissions or reconciles.

The one module of shared/ that does I/O (it builds an aiohttp application); pyproject.toml exempts
exactly this module from the "shared/ does no I/O" contract.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from importlib import metadata

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    GC_COLLECTOR,
    CollectorRegistry,
    Gauge,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)

MetricsText = tuple[bytes, str]  # the exposition and its Content-Type


def version() -> str:
    """The installed Phalanx's version (``unknown`` when run from a tree that is not installed)."""
    try:
        return metadata.version("phalanx")
    except metadata.PackageNotFoundError:
        return "unknown"


def register_process_metrics(registry: CollectorRegistry) -> Gauge:
    """What every process exports beside its own metrics: prometheus_client's process (CPU
    seconds, memory, open files, start time), platform and garbage-collector collectors, and
    ``phalanx_build_info`` (always 1; the labels carry the version and the Python it runs on)."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    if GC_COLLECTOR is not None:  # absent on interpreters without gc.get_stats
        GCCollector(registry=registry)
    build = Gauge(
        "phalanx_build_info",
        "Always 1; labels: the Phalanx version and the Python version it runs on",
        ["version", "python"],
        registry=registry,
    )
    build.labels(version(), platform.python_version()).set(1)
    return build


def registry_metrics(registry: CollectorRegistry) -> Callable[[], MetricsText]:
    """``/metrics`` for everything registered in ``registry``."""
    return lambda: (generate_latest(registry), CONTENT_TYPE_LATEST)


def health_app(
    *,
    alive: Callable[[], bool],
    ready: Callable[[], bool],
    metrics: Callable[[], MetricsText],
    not_alive: str = "not alive",
    not_ready: str = "not ready",
) -> web.Application:
    """``/healthz``: 200 while ``alive()``, else 500 (the kubelet restarts the container);
    ``/readyz``: 200 while ``ready()``, else 503 (no traffic, not restarted); ``/metrics``.
    ``not_alive`` and ``not_ready`` say why, for whoever looks at a failing probe."""

    async def healthz(_: web.Request) -> web.Response:
        if alive():
            return web.Response(text="ok\n")
        return web.Response(status=500, text=f"unhealthy: {not_alive}\n")

    async def readyz(_: web.Request) -> web.Response:
        if ready():
            return web.Response(text="ready\n")
        return web.Response(status=503, text=f"not ready: {not_ready}\n")

    async def render(_: web.Request) -> web.Response:
        body, content_type = metrics()
        # Content-Type as given: prometheus_client's carries a version parameter.
        return web.Response(body=body, headers={"Content-Type": content_type})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", render)
    return app
