"""The aiohttp applications through aiohttp's test client, plus an HTTP-level fuzz."""

from __future__ import annotations

import asyncio
import base64
import http.client
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import RawTestServer, TestClient, TestServer
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CONTENT_TYPE_LATEST

from shared import constants as c
from webhook.config import WebhookSettings
from webhook.connections import GuardedServer
from webhook.server import AdmissionHandler, WebhookServer, create_admission_server

UID = "0d5e2c1a-7a8b-4c3d-9e0f-123456789abc"
JSON_HEADERS = {"Content-Type": "application/json"}  # as the API server sends


def job_review(uid: str = UID, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "operation": "CREATE",
            "namespace": "ml",
            "object": {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "train", "namespace": "ml"},
                "spec": {"parallelism": 2, **spec, "template": {"spec": {"containers": [{"name": "m"}]}}},
            },
        },
    }


if TYPE_CHECKING:  # TestClient is not subscriptable at runtime at aiohttp's floor (make floors)
    Clients = tuple[
        TestClient[web.Request, web.Application], TestClient[web.Request, web.Application], WebhookServer
    ]


@pytest.fixture
async def apps(tmp_path: Path) -> AsyncIterator[Clients]:
    """The admission handler and the webhook's own health app (as WebhookServer wires it; not
    started, so no certificate is loaded: not ready), sharing its metrics."""
    settings = WebhookSettings(max_body_bytes=4096, cert_dir=tmp_path)
    webhook = WebhookServer(settings)
    admission = TestClient(RawTestServer(AdmissionHandler(settings, webhook.metrics)), headers=JSON_HEADERS)
    health = TestClient(TestServer(webhook.health_app))
    await admission.start_server()
    await health.start_server()
    yield admission, health, webhook
    await admission.close()
    await health.close()


async def test_patch_is_answered_and_echoes_the_request(apps: Clients) -> None:
    admission, _, _ = apps
    resp = await admission.post("/mutate", data=orjson.dumps(job_review(activeDeadlineSeconds=60)))
    assert resp.status == 200
    assert resp.content_type == "application/json"
    review = orjson.loads(await resp.read())
    assert (review["apiVersion"], review["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    response = review["response"]
    assert response["uid"] == UID
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    ops = orjson.loads(base64.b64decode(response["patch"]))
    assert {"op": "add", "path": "/spec/template/spec/schedulingGates", "value": [{"name": c.GATE}]} in ops
    assert (
        len(response["warnings"]) == 3
    )  # joins a gang; deadline keeps counting; evictions count as failures
    assert any("backoffLimit" in w for w in response["warnings"])
    assert all(w.startswith("phalanx: ") for w in response["warnings"])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "phalanx: body is not valid JSON"),
        (b'{"kind": "Pod"}', "phalanx: kind must be AdmissionReview"),
        (b'"AdmissionReview"', "phalanx: body is not a JSON object"),
    ],
)
async def test_malformed_bodies_are_400(apps: Clients, body: bytes, message: str) -> None:
    admission, _, _ = apps
    resp = await admission.post("/mutate", data=body)
    assert resp.status == 400
    assert resp.content_type == "text/plain"
    assert (await resp.text()).startswith(message)


async def test_oversized_bodies_are_413(apps: Clients) -> None:
    admission, _, _ = apps
    resp = await admission.post("/mutate", data=b" " * 4097)
    assert resp.status == 413
    assert "larger than 4096 bytes" in await resp.text()

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: the limit applies while reading
        for _ in range(10):
            yield b" " * 1024

    resp = await admission.post("/mutate", data=chunks())
    assert resp.status == 413


async def test_a_body_of_exactly_the_limit_is_accepted(apps: Clients) -> None:
    admission, _, _ = apps
    body = orjson.dumps(job_review())
    resp = await admission.post("/mutate", data=body + b" " * (4096 - len(body)))
    assert resp.status == 200


async def test_other_methods_and_paths_are_4xx(apps: Clients) -> None:
    admission, _, _ = apps
    assert (await admission.get("/mutate")).status == 405
    assert (await admission.post("/validate", data=b"{}")).status == 404


async def test_health_readiness_and_metrics(apps: Clients) -> None:
    admission, health, webhook = apps
    assert (await health.get("/healthz")).status == 200
    resp = await health.get("/readyz")
    assert resp.status == 503
    assert await resp.text() == "not ready: no serving certificate loaded, or shutting down\n"
    webhook.certs.loaded = True  # what a successful certificate load sets
    assert (await health.get("/readyz")).status == 200

    await admission.post("/mutate", data=orjson.dumps(job_review()))
    await admission.post("/mutate", data=orjson.dumps(job_review(uid="2")))
    await admission.post("/mutate", data=b"nope")
    resp = await health.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"] == CONTENT_TYPE_LATEST
    text = await resp.text()
    assert 'phalanx_webhook_requests_total{kind="Job",operation="CREATE",outcome="patched"} 2.0' in text
    assert (
        'phalanx_webhook_requests_total{kind="unknown",operation="unknown",outcome="bad_request"} 1.0' in text
    )
    assert 'phalanx_webhook_patch_operations_total{kind="Job"} 6.0' in text
    assert "phalanx_webhook_request_duration_seconds_count 3.0" in text
    assert 'phalanx_webhook_request_duration_seconds_bucket{le="0.0005"}' in text


async def test_many_apps_each_with_their_own_metrics() -> None:
    first, second = create_admission_server(WebhookSettings()), create_admission_server(WebhookSettings())
    assert isinstance(first, GuardedServer) and isinstance(second, GuardedServer)
    assert isinstance(first.handler, AdmissionHandler) and isinstance(second.handler, AdmissionHandler)
    assert first.handler.metrics is not second.handler.metrics


# --- fuzz through the real HTTP stack ---------------------------------------------------------


@pytest.fixture(scope="module")
def live_url() -> Iterator[tuple[str, int]]:
    """The admission app on a plain loopback port, served by a loop in a background thread."""
    loop = asyncio.new_event_loop()
    runners: list[web.ServerRunner] = []
    started = threading.Event()

    async def start() -> None:
        runners.append(web.ServerRunner(create_admission_server(WebhookSettings(max_body_bytes=4096))))
        await runners[0].setup()
        await web.TCPSite(runners[0], "127.0.0.1", 0).start()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert started.wait(10)
    yield "127.0.0.1", runners[0].addresses[0][1]
    asyncio.run_coroutine_threadsafe(runners[0].cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**31), 2**31) | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=15,
)
reviews = st.builds(
    lambda request, version: {"apiVersion": version, "kind": "AdmissionReview", "request": request},
    st.dictionaries(
        st.sampled_from(["uid", "kind", "operation", "namespace", "object", "subResource"]), json_values
    ),
    st.sampled_from(["admission.k8s.io/v1", "admission.k8s.io/v1beta1", "v1"]),
)
bodies = (
    st.binary(max_size=6000)
    | json_values.map(orjson.dumps)
    | reviews.map(orjson.dumps)
    | st.text(max_size=200).map(lambda uid: orjson.dumps(job_review(uid=uid)))
)


@settings(max_examples=250, deadline=None)
@given(body=bodies)
def test_any_body_gets_a_review_or_a_4xx(live_url: tuple[str, int], body: bytes) -> None:
    connection = http.client.HTTPConnection(*live_url, timeout=10)
    try:
        connection.request("POST", "/mutate", body=body, headers={"Content-Type": "application/json"})
        resp = connection.getresponse()
        payload = resp.read()
    finally:
        connection.close()
    assert resp.status == 200 or 400 <= resp.status < 500, (resp.status, payload[:200])
    if resp.status == 200:
        review = orjson.loads(payload)
        assert review["kind"] == "AdmissionReview"
        request = orjson.loads(body)["request"]
        assert review["response"]["uid"] == request["uid"]
        assert review["apiVersion"] == orjson.loads(body)["apiVersion"]
        assert review["response"].get("status", {}).get("code") != 500


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
async def test_bodies_that_are_not_json_are_415(apps: Clients, content_type: str) -> None:
    admission, _, _ = apps
    body = orjson.dumps(job_review())
    resp = await admission.post("/mutate", data=body, headers={"Content-Type": content_type})
    assert resp.status == 415
    assert "Content-Type must be application/json" in await resp.text()
    charset = {"Content-Type": "application/json; charset=utf-8"}
    assert (await admission.post("/mutate", data=body, headers=charset)).status == 200


@pytest.mark.parametrize("missing", ["operation", "kind", "object"])
async def test_reviews_lacking_what_the_api_server_always_sends_are_400(apps: Clients, missing: str) -> None:
    admission, _, _ = apps
    review = job_review()
    del review["request"][missing]
    resp = await admission.post("/mutate", data=orjson.dumps(review))
    assert resp.status == 400
    assert f"request.{missing} must be" in await resp.text()
