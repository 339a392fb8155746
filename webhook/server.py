"""The admission server and the process that serves it.

Admission (``POST /mutate``) is served over TLS only; health and metrics (shared.health) on a
second, plain-HTTP port so that kubelet probes and Prometheus need no certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import time

from aiohttp import hdrs, web

from shared.health import health_app
from shared.logging import batch_direct_lines
from webhook.admission import Admitter, Answer
from webhook.body import SMALL_BODY_BYTES, BodyError, BodyLimits, Upload, check_content_type
from webhook.config import WebhookSettings
from webhook.connections import ConnectionLimits, GuardedServer
from webhook.memory import BodyBudget, HeapTrimmer, map_large_allocations
from webhook.metrics import WebhookMetrics
from webhook.tls import CertReloader, server_context

log = logging.getLogger("phalanx.webhook")

MUTATE_PATH = "/mutate"
# Refusals after which the rest of the body (if any) is not worth reading: close the connection.
CLOSING_STATUSES = frozenset({408, 413, 415, 503})


class AdmissionHandler:
    """``POST /mutate``, served by aiohttp's low-level server (``web.Server``).

    One route needs no router, middlewares or signals, which a ``web.Application`` would run on
    every request; its body is read without waiting when it is whole (webhook.body).
    """

    def __init__(self, config: WebhookSettings, metrics: WebhookMetrics) -> None:
        self.metrics = metrics
        self.limits = BodyLimits(config.max_body_bytes, config.body_read_timeout_seconds)
        self.admitter = Admitter(config.mutation_config(), metrics)
        self.budget = BodyBudget(config.max_buffered_body_bytes, config.body_budget_wait_seconds)
        self.trimmer = HeapTrimmer(threshold_bytes=SMALL_BODY_BYTES)

    async def __call__(self, request: web.BaseRequest) -> web.StreamResponse:
        if request.path != MUTATE_PATH:
            return web.Response(status=404, text="404: Not Found")
        if request.method != hdrs.METH_POST:
            return web.Response(status=405, text="405: Method Not Allowed", headers={hdrs.ALLOW: "POST"})
        started = time.perf_counter()
        upload = Upload(request.content, request.content_length)
        try:
            answer = await self._answer(request, upload, started)
        finally:
            # Also after an aborted upload: whatever it held is freed by now or soon.
            self.trimmer.after(upload.size)
        response = web.Response(status=answer.status, body=answer.body, content_type=answer.content_type)
        if answer.status in CLOSING_STATUSES:
            response.force_close()
        return response

    async def _answer(self, request: web.BaseRequest, upload: Upload, started: float) -> Answer:
        try:
            check_content_type(request.headers.get(hdrs.CONTENT_TYPE))
            body = await upload.read(self.limits, self.budget)
        except BodyError as err:
            return self.admitter.bad_request(err.status, err.message, started)
        except ConnectionError as err:
            # The client went away mid-upload: nobody to answer, and no traceback per such client.
            return self.admitter.bad_request(
                400, f"client went away after {upload.received} bytes: {err}", started
            )
        return self.admitter.admit(body, started)


def create_admission_server(config: WebhookSettings, metrics: WebhookMetrics | None = None) -> web.Server:
    """The admission server (needs the running loop): ``POST /mutate`` for every kind Phalanx
    handles, within the connection limits (webhook.connections), without an access log (one
    structured line per admission is logged instead)."""
    limits = ConnectionLimits(
        max_connections=config.max_connections,
        header_timeout=config.header_timeout_seconds,
        keepalive_timeout=config.keepalive_timeout_seconds,
    )
    metrics = metrics or WebhookMetrics()
    return GuardedServer(
        AdmissionHandler(config, metrics),
        limits,
        lambda reason: metrics.connections_closed.inc((reason,)),
        access_log=None,
        # Headers of the API server's requests are a few hundred bytes: far fewer and shorter
        # than aiohttp allows by default (128 of 8 KiB each), which a client could hold per connection.
        max_headers=32,
        max_field_size=8190,
        max_line_size=8190,
        # What a connection buffers ahead of the handler (twice this, then reading pauses): 16 KiB
        # holds a pod review whole; aiohttp's 64 KiB would let each slow upload hold 128 KiB.
        read_bufsize=16 * 1024,
    )


class WebhookServer:
    """Both sites plus the certificate watcher; ``start`` then ``stop``."""

    def __init__(self, settings: WebhookSettings) -> None:
        self.settings = settings
        self.metrics = WebhookMetrics()
        self.ssl_context = server_context()
        self.certs = CertReloader(self.ssl_context, settings.cert_file, settings.key_file, self.metrics)
        self._stopping = False
        self._watch: asyncio.Task[None] | None = None
        self._ports = (0, 0)
        self._admission = web.ServerRunner(
            create_admission_server(settings, self.metrics),
            shutdown_timeout=settings.shutdown_timeout_seconds,
        )
        self.health_app = health_app(
            alive=lambda: True,  # nothing here can wedge but the event loop, which then answers nothing
            ready=self.ready,
            metrics=self.metrics.render,
            not_ready="no serving certificate loaded, or shutting down",
        )
        self._health = web.AppRunner(self.health_app, access_log=None)

    def ready(self) -> bool:
        return self.certs.loaded and not self._stopping

    @property
    def admission_port(self) -> int:
        """The bound port (useful with port 0); valid after ``start``."""
        return self._ports[0]

    @property
    def health_port(self) -> int:
        return self._ports[1]

    async def start(self) -> None:
        host = self.settings.bind_address
        if not self.certs.check():
            log.warning("no serving certificate yet; not ready", extra={"cert": str(self.settings.cert_file)})
        await self._health.setup()
        await web.TCPSite(self._health, host, self.settings.health_port).start()
        await self._admission.setup()
        await web.TCPSite(
            self._admission, host, self.settings.port, ssl_context=self.ssl_context, backlog=1024
        ).start()
        self._ports = (int(self._admission.addresses[0][1]), int(self._health.addresses[0][1]))
        self._watch = asyncio.create_task(self.certs.watch(self.settings.cert_reload_seconds))
        # The admission lines of one pass of the loop are written together, right after it.
        loop = asyncio.get_running_loop()
        batch_direct_lines(loop.call_soon)
        log.info(
            "webhook serving",
            extra={
                "address": host,
                "port": self.admission_port,
                "health_port": self.health_port,
                "event_loop": type(loop).__module__.split(".")[0],
            },
        )

    async def stop(self) -> None:
        """Turn unready, keep serving for the shutdown delay, then stop accepting, let in-flight
        admissions finish (up to the shutdown timeout) and close."""
        self._stopping = True
        # The API server keeps sending to this pod until the endpoint removal reaches it; refusing
        # those connections would fail admissions (failurePolicy: Fail).
        await asyncio.sleep(self.settings.shutdown_delay_seconds)
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        await self._admission.cleanup()
        await self._health.cleanup()
        batch_direct_lines(None)


async def run(settings: WebhookSettings) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    map_large_allocations()  # before any large body: they then go back to the OS when freed
    server = WebhookServer(settings)
    await server.start()
    # Everything allocated so far lives as long as the process: keep the collector from
    # re-scanning it on every full collection (requests allocate many short-lived objects).
    gc.freeze()
    try:
        await stop.wait()
        log.info("shutting down")
    finally:
        await server.stop()
    log.info("stopped")
