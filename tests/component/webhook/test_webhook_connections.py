"""What one connection may hold (webhook.connections): the connection cap, which displaces the
connection idle longest, and the header deadline. The admission server on loopback, in process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest
from aiohttp import web
from prometheus_client import generate_latest

from webhook.config import WebhookSettings
from webhook.connections import (
    CLOSED_HEADER_TIMEOUT,
    CLOSED_IDLE_FOR_NEW,
    CLOSED_OVER_LIMIT,
    GuardedServer,
)
from webhook.metrics import WebhookMetrics
from webhook.server import create_admission_server

from .test_webhook_tls import REVIEW

BODY = orjson.dumps(REVIEW)
REQUEST = (
    f"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    f"Content-Length: {len(BODY)}\r\n\r\n"
).encode() + BODY


class Served:
    def __init__(self, server: GuardedServer, port: int, metrics: WebhookMetrics) -> None:
        self.server = server
        self.port = port
        self.metrics = metrics

    def closed_metric(self) -> str:
        return "\n".join(
            line
            for line in generate_latest(self.metrics.registry).decode().splitlines()
            if line.startswith("phalanx_webhook_connections_closed_total")
        )

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port)


async def _serve(**settings: float) -> AsyncIterator[Served]:
    metrics = WebhookMetrics()
    server = create_admission_server(WebhookSettings(**settings), metrics)  # type: ignore[arg-type]
    assert isinstance(server, GuardedServer)
    runner = web.ServerRunner(server)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield Served(server, int(runner.addresses[0][1]), metrics)
    finally:
        await runner.cleanup()


@pytest.fixture
async def capped() -> AsyncIterator[Served]:
    async for served in _serve(max_connections=3, header_timeout_seconds=60):
        yield served


@pytest.fixture
async def impatient() -> AsyncIterator[Served]:
    async for served in _serve(header_timeout_seconds=0.3):
        yield served


async def _admitted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    writer.write(REQUEST)
    await writer.drain()
    status = int((await asyncio.wait_for(reader.readline(), 30)).split()[1])
    await asyncio.wait_for(reader.readuntil(b"}}"), 30)  # the rest of the answer
    return status


async def _closed(reader: asyncio.StreamReader) -> bool:
    """True once the server has closed the connection (end of stream)."""
    return await asyncio.wait_for(reader.read(1), 30) == b""


async def test_a_new_connection_over_the_cap_displaces_the_one_idle_longest(capped: Served) -> None:
    oldest = await capped.connect()
    assert await _admitted(*oldest) == 200
    others = [await capped.connect() for _ in range(2)]
    for pair in others:
        assert await _admitted(*pair) == 200  # oldest is now the one idle longest
    newest = await capped.connect()
    assert await _closed(oldest[0])
    assert await _admitted(*newest) == 200
    for reader, writer in others:  # the rest are untouched and still admit
        assert await _admitted(reader, writer) == 200
    assert capped.server.closed == {CLOSED_IDLE_FOR_NEW: 1}
    for _, writer in [oldest, *others, newest]:
        writer.close()


async def test_when_every_connection_is_in_a_request_a_new_one_is_closed(capped: Served) -> None:
    busy = []
    for _ in range(3):  # each holds a request open: a body announced and never sent
        reader, writer = await capped.connect()
        writer.write(REQUEST[: -len(BODY)])
        await writer.drain()
        busy.append((reader, writer))
    # Until all three are in a request.
    while capped.server.open_connections < 3 or capped.server.idle_connections:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    reader, _ = await capped.connect()
    assert await _closed(reader)
    assert capped.server.closed == {CLOSED_OVER_LIMIT: 1}
    # The request that connection carried failed: operators see it in the metrics.
    assert capped.closed_metric() == 'phalanx_webhook_connections_closed_total{reason="over_limit"} 1.0'
    for _, writer in busy:
        writer.close()


async def test_headers_must_arrive_within_the_header_timeout(impatient: Served) -> None:
    silent = await impatient.connect()  # connects, never sends a byte
    trickling = await impatient.connect()
    trickling[1].write(b"POST /mutate HTTP/1.1\r\nHost: loc")  # and never finishes its headers
    prompt = await impatient.connect()
    assert await _admitted(*prompt) == 200
    assert await _closed(silent[0])
    assert await _closed(trickling[0])
    # A connection that is idle after a request is governed by the keep-alive timeout instead:
    # it still admits after a longer pause than the header timeout.
    await asyncio.sleep(0.6)
    assert await _admitted(*prompt) == 200
    # ... but once its next request has begun, the header deadline applies again.
    prompt[1].write(b"POST /mutate HTTP/1.1\r\n")
    assert await _closed(prompt[0])
    assert impatient.server.closed == {CLOSED_HEADER_TIMEOUT: 3}
    for _, writer in (silent, trickling, prompt):
        writer.close()
