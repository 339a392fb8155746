"""The aiohttp applications and the process that serves them.

Admission (``POST /mutate``) is served over TLS only; health and metrics on a second, plain-HTTP
port so that kubelet probes and Prometheus need no certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import time
from collections.abc import Callable

from aiohttp import hdrs, web

from webhook.admission import Admitter, Answer
from webhook.body import SMALL_BODY_BYTES, BodyError, BodyLimits, Upload, check_content_type
from webhook.config import WebhookSettings
from webhook.memory import BodySlots, HeapTrimmer
from webhook.metrics import WebhookMetrics
from webhook.tls import CertReloader, server_context

log = logging.getLogger("phalanx.webhook")

ADMITTER = web.AppKey("admitter", Admitter)
LIMITS = web.AppKey("limits", BodyLimits)
SLOTS = web.AppKey("slots", BodySlots)
TRIMMER = web.AppKey("trimmer", HeapTrimmer)
METRICS = web.AppKey("metrics", WebhookMetrics)
READY: web.AppKey[Callable[[], bool]] = web.AppKey("ready")


def create_app(config: WebhookSettings, metrics: WebhookMetrics | None = None) -> web.Application:
    """The admission application: ``POST /mutate`` for every kind Phalanx handles."""
    metrics = metrics or WebhookMetrics()
    # The body is read by webhook.body, never by aiohttp's own read(); this is only a backstop.
    app = web.Application(client_max_size=config.max_body_bytes + 1)
    app[METRICS] = metrics
    app[LIMITS] = BodyLimits(config.max_body_bytes, config.body_read_timeout_seconds)
    app[ADMITTER] = Admitter(config.mutation_config(), metrics)
    app.router.add_post("/mutate", _mutate)

    async def bound_memory(app: web.Application) -> None:  # asyncio objects need the running loop
        app[SLOTS] = BodySlots(config.max_concurrent_large_bodies, config.body_slot_wait_seconds)
        app[TRIMMER] = HeapTrimmer(threshold_bytes=SMALL_BODY_BYTES)

    app.on_startup.append(bound_memory)
    return app


async def _mutate(request: web.Request) -> web.Response:
    started = time.perf_counter()
    admitter = request.app[ADMITTER]
    upload = Upload(request.content, request.content_length)
    try:
        answer = await _answer(request, upload, admitter, started)
    finally:
        # Also after an aborted upload: whatever it held is freed by now or soon.
        request.app[TRIMMER].after(upload.size)
    response = web.Response(status=answer.status, body=answer.body, content_type=answer.content_type)
    if answer.status in (408, 413, 415, 503):
        response.force_close()  # the rest of the body is not worth reading
    return response


async def _answer(request: web.Request, upload: Upload, admitter: Admitter, started: float) -> Answer:
    try:
        check_content_type(request.headers.get(hdrs.CONTENT_TYPE))
        body = await upload.read(request.app[LIMITS], request.app[SLOTS])
    except BodyError as err:
        return admitter.bad_request(err.status, err.message, started)
    except ConnectionError as err:
        # The client went away mid-upload: nobody to answer, and no traceback per such client.
        return admitter.bad_request(400, f"client went away after {upload.received} bytes: {err}", started)
    return admitter.admit(body, started)


def create_health_app(metrics: WebhookMetrics, ready: Callable[[], bool]) -> web.Application:
    """``/healthz`` (alive), ``/readyz`` (a certificate is loaded) and ``/metrics``."""
    app = web.Application()
    app[METRICS] = metrics
    app[READY] = ready
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/metrics", _metrics)
    return app


async def _healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


async def _readyz(request: web.Request) -> web.Response:
    if request.app[READY]():
        return web.Response(text="ready\n")
    return web.Response(status=503, text="not ready: no serving certificate loaded, or shutting down\n")


async def _metrics(request: web.Request) -> web.Response:
    body, content_type = request.app[METRICS].render()
    return web.Response(body=body, headers={"Content-Type": content_type})


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
        self._admission = web.AppRunner(
            create_app(settings, self.metrics),
            access_log=None,  # one structured line per admission is logged instead
            shutdown_timeout=settings.shutdown_timeout_seconds,
        )
        self._health = web.AppRunner(create_health_app(self.metrics, self.ready), access_log=None)

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
        log.info(
            "webhook serving",
            extra={"address": host, "port": self.admission_port, "health_port": self.health_port},
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


async def run(settings: WebhookSettings) -> None:
    """Serve until SIGTERM or SIGINT, then shut down gracefully."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
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
