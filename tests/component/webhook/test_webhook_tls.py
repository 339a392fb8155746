"""The real server: TLS only on the admission port, certificate hot reload, readiness, SIGTERM."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import orjson
import pytest
from cryptography import x509

from certs.bundle import CertBundle, new_bundle
from webhook.config import WebhookSettings
from webhook.server import WebhookServer

from .tls_helpers import der, serving_bundle, write_pair

JSON_HEADERS = {"Content-Type": "application/json"}  # as the API server sends
REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "tls-1",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "namespace": "ml",
        "object": {
            "metadata": {"name": "p", "annotations": {"scheduling.run.ai/pod-group": "pg"}},
            "spec": {"containers": [{"name": "m"}]},
        },
    },
}


def client_context(*ca_pems: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=b"".join(ca_pems).decode())
    return context


async def served_cert(port: int, context: ssl.SSLContext) -> bytes:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="localhost")
    try:
        peer: bytes = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return peer
    finally:
        writer.close()
        await writer.wait_closed()


def settings_for(cert_dir: Path) -> WebhookSettings:
    return WebhookSettings(
        bind_address="127.0.0.1",
        port=0,
        health_port=0,
        cert_dir=cert_dir,
        cert_reload_seconds=0.05,
        shutdown_delay_seconds=0,
    )


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[WebhookServer, CertBundle]]:
    bundle = serving_bundle()
    write_pair(tmp_path, bundle)
    webhook = WebhookServer(settings_for(tmp_path))
    await webhook.start()
    yield webhook, bundle
    await webhook.stop()


async def test_admission_over_tls_and_never_plaintext(server: tuple[WebhookServer, CertBundle]) -> None:
    webhook, bundle = server
    cert = bundle.ca_crt
    port = webhook.admission_port
    async with aiohttp.ClientSession(headers=JSON_HEADERS) as session:
        url = f"https://localhost:{port}/mutate"
        async with session.post(url, data=orjson.dumps(REVIEW), ssl=client_context(cert)) as resp:
            assert resp.status == 200
            assert (await resp.json())["response"]["uid"] == "tls-1"
        with pytest.raises(aiohttp.ClientError):
            async with session.post(f"http://127.0.0.1:{port}/mutate", data=orjson.dumps(REVIEW)) as resp:
                await resp.read()
        # TLS 1.2 is the floor, and it works.
        assert webhook.ssl_context.minimum_version == ssl.TLSVersion.TLSv1_2
        tls12 = client_context(cert)
        tls12.maximum_version = ssl.TLSVersion.TLSv1_2
        async with session.post(url, data=orjson.dumps(REVIEW), ssl=tls12) as resp:
            assert resp.status == 200
        async with session.get(f"http://127.0.0.1:{webhook.health_port}/readyz") as resp:
            assert resp.status == 200


async def test_new_certificate_is_served_after_reload(
    tmp_path: Path, server: tuple[WebhookServer, CertBundle]
) -> None:
    webhook, old = server
    new = serving_bundle()
    context = client_context(old.ca_crt, new.ca_crt)
    assert await served_cert(webhook.admission_port, context) == der(old.tls_crt)
    write_pair(tmp_path, new)
    deadline = time.monotonic() + 5
    while await served_cert(webhook.admission_port, context) != der(new.tls_crt):
        assert time.monotonic() < deadline, "new certificate not served"
        await asyncio.sleep(0.05)
    ok = webhook.metrics.registry.get_sample_value(
        "phalanx_webhook_certificate_reloads_total", {"result": "ok"}
    )
    assert ok is not None and ok >= 2
    # A client that trusts only the new certificate now gets through.
    async with aiohttp.ClientSession(headers=JSON_HEADERS) as session:
        url = f"https://localhost:{webhook.admission_port}/mutate"
        async with session.post(url, data=orjson.dumps(REVIEW), ssl=client_context(new.ca_crt)) as resp:
            assert resp.status == 200


async def test_stop_serves_through_the_delay_then_refuses(tmp_path: Path) -> None:
    bundle = serving_bundle()
    write_pair(tmp_path, bundle)
    cert = bundle.ca_crt
    webhook = WebhookServer(dataclasses.replace(settings_for(tmp_path), shutdown_delay_seconds=0.5))
    await webhook.start()
    body = orjson.dumps(REVIEW)
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", webhook.admission_port, ssl=client_context(cert), server_hostname="localhost"
    )
    head = (
        "POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    writer.write(head.encode() + body[:10])
    await writer.drain()
    await asyncio.sleep(0.1)  # the handler is now waiting for the rest of the body
    stopping = asyncio.create_task(webhook.stop())
    await asyncio.sleep(0.1)
    assert not webhook.ready()
    # During the delay the request in flight completes...
    writer.write(body[10:])
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 5)
    assert status_line.startswith(b"HTTP/1.1 200")
    writer.close()
    # ...and so do new ones, since the API server may not know yet that this pod is leaving.
    async with aiohttp.ClientSession(headers=JSON_HEADERS) as session:
        url = f"https://localhost:{webhook.admission_port}/mutate"
        async with session.post(url, data=body, ssl=client_context(cert)) as resp:
            assert resp.status == 200
    await asyncio.wait_for(stopping, 10)
    with pytest.raises(OSError):  # afterwards nothing is accepted
        await asyncio.open_connection("127.0.0.1", webhook.admission_port)


async def test_not_ready_until_a_certificate_appears(tmp_path: Path) -> None:
    webhook = WebhookServer(settings_for(tmp_path))
    await webhook.start()
    try:
        assert not webhook.ready()
        async with aiohttp.ClientSession(headers=JSON_HEADERS) as session:
            readyz = f"http://127.0.0.1:{webhook.health_port}/readyz"
            async with session.get(readyz) as resp:
                assert resp.status == 503
            write_pair(tmp_path, serving_bundle())
            deadline = time.monotonic() + 5
            while not webhook.ready():
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            async with session.get(readyz) as resp:
                assert resp.status == 200
    finally:
        await webhook.stop()
    assert not webhook.ready()


def test_process_serves_and_exits_0_on_sigterm(tmp_path: Path) -> None:
    bundle = serving_bundle()
    write_pair(tmp_path, bundle)
    cert = bundle.ca_crt
    args = ["--bind-address", "127.0.0.1", "--port", "0", "--health-port", "0", "--cert-dir", str(tmp_path)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhook", *args],
        stderr=subprocess.PIPE,
        env={
            **os.environ,
            "PHALANX_WEBHOOK_LOG_LEVEL": "INFO",
            "PHALANX_WEBHOOK_SHUTDOWN_DELAY_SECONDS": "0.2",
        },
    )
    try:
        assert proc.stderr is not None
        port = None
        for line in proc.stderr:
            entry = orjson.loads(line)
            if entry["msg"] == "webhook serving":
                port = entry["port"]
                break
        assert port, "server did not report its port"

        async def call() -> int:
            async with aiohttp.ClientSession(headers=JSON_HEADERS) as session:
                url = f"https://localhost:{port}/mutate"
                async with session.post(url, data=orjson.dumps(REVIEW), ssl=client_context(cert)) as resp:
                    return resp.status

        assert asyncio.run(call()) == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        rest = [orjson.loads(line)["msg"] for line in proc.stderr]
        assert "stopped" in rest
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def not_after(cert_pem: bytes) -> float:
    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc.timestamp()


async def test_the_certificate_expiry_metric_follows_rotation(tmp_path: Path) -> None:
    """phalanx_webhook_certificate_expiry_timestamp_seconds is the notAfter of the certificate
    served, before and after a renewed one is loaded (the expiry alert reads it)."""
    now = datetime.now(UTC)
    short, renewed = (new_bundle(["localhost"], ["127.0.0.1"], now, days=d) for d in (10, 90))
    write_pair(tmp_path, short)
    webhook = WebhookServer(settings_for(tmp_path))
    await webhook.start()
    try:
        expiry = lambda: webhook.metrics.registry.get_sample_value(  # noqa: E731
            "phalanx_webhook_certificate_expiry_timestamp_seconds"
        )
        assert expiry() == not_after(short.tls_crt)
        write_pair(tmp_path, renewed)
        context = client_context(short.ca_crt, renewed.ca_crt)
        deadline = time.monotonic() + 5
        while await served_cert(webhook.admission_port, context) != der(renewed.tls_crt):
            assert time.monotonic() < deadline, "renewed certificate not served"
            await asyncio.sleep(0.05)
        assert expiry() == not_after(renewed.tls_crt) > not_after(short.tls_crt)
    finally:
        await webhook.stop()
