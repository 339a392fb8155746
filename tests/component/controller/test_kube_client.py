"""KubeClient's error mapping against a real HTTP server: every failure is an ApiError."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from controller.api import resources as r
from controller.api.kube import ApiError, KubeClient
from controller.api.transport import (
    TOKEN_REREAD_SECONDS,
    Endpoint,
    KubeAsyncioTransport,
    SessionTransport,
    Token,
)


def kube_at(url: str, fallback: bool = False) -> KubeClient:
    """A client of ``url`` on Phalanx's own session, or on kubernetes-asyncio's (exec-plugin
    kubeconfigs): both must behave alike."""
    if fallback:
        return KubeClient(KubeAsyncioTransport(client.ApiClient(client.Configuration(host=url))))
    return KubeClient(SessionTransport(Endpoint(url, None), connections=4))


@pytest.fixture
async def apiserver() -> AsyncIterator[str]:
    async def missing(request: web.Request) -> web.Response:
        status = {
            "kind": "Status",
            "status": "Failure",
            "reason": "NotFound",
            "message": 'pods "x" not found',
        }
        return web.json_response(status, status=404)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", missing)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


@pytest.mark.parametrize("fallback", [False, True])
async def test_an_error_answer_is_an_api_error_with_its_status(apiserver: str, fallback: bool) -> None:
    kube = kube_at(apiserver, fallback)
    try:
        with pytest.raises(ApiError) as caught:
            await kube.patch(r.PODS, "team", "x", {"metadata": {"labels": {"a": "b"}}})
        assert caught.value.not_found
        assert 'pods "x" not found' in str(caught.value)
    finally:
        await kube.close()


@pytest.mark.parametrize("fallback", [False, True])
async def test_no_answer_at_all_is_an_api_error_too(fallback: bool) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kube = kube_at(f"http://127.0.0.1:{port}", fallback)
    try:
        with pytest.raises(ApiError) as caught:
            await kube.get(r.PODS, "team", "x")
        assert (caught.value.status, caught.value.reason) == (0, "Unreachable")
        assert not caught.value.not_found
    finally:
        await kube.close()


async def test_requests_make_no_per_request_environment_lookups(apiserver: str) -> None:
    sender = SessionTransport(Endpoint(apiserver, None), connections=4)
    fallback = KubeAsyncioTransport(client.ApiClient(client.Configuration(host=apiserver)))
    try:
        # aiohttp would otherwise read ~/.netrc and the proxy variables in a thread per request.
        assert not sender._session.trust_env
        assert not fallback._api.rest_client.pool_manager.trust_env
    finally:
        await sender.close()
        await fallback.close()


async def test_the_proxy_environment_is_honoured_once_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    proxied = SessionTransport(Endpoint("https://api.example:6443", None), connections=4)
    bypassed = SessionTransport(Endpoint("https://internal.example:6443", None), connections=4)
    fallback = KubeAsyncioTransport(client.ApiClient(client.Configuration(host="https://api.example:6443")))
    try:
        assert proxied._proxy == "http://proxy.example:3128"
        assert bypassed._proxy is None
        named = SessionTransport(Endpoint("https://api.example:6443", None, proxy="http://k.example:1"), 4)
        assert named._proxy == "http://k.example:1"  # the kubeconfig's proxy-url comes first
        await named.close()
        assert fallback._api.rest_client.proxy == "http://proxy.example:3128"
    finally:
        for sender in (proxied, bypassed, fallback):
            await sender.close()


async def test_the_bearer_token_is_sent_and_a_token_file_reread(tmp_path: Path) -> None:
    seen: list[str] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({"kind": "Pod"})

    app = web.Application()
    app.router.add_get("/{tail:.*}", record)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    token_file = tmp_path / "token"
    token_file.write_text("first\n")
    token = Token(file=token_file)
    kube = KubeClient(
        SessionTransport(Endpoint(f"http://127.0.0.1:{runner.addresses[0][1]}", None, token), 4)
    )
    try:
        await kube.get(r.PODS, "team", "x")
        token_file.write_text("rotated")
        await kube.get(r.PODS, "team", "x")  # within the re-read interval: the token it has
        token._read_at -= TOKEN_REREAD_SECONDS
        await kube.get(r.PODS, "team", "x")
        assert seen == ["Bearer first", "Bearer first", "Bearer rotated"]
    finally:
        await kube.close()
        await runner.cleanup()


@pytest.mark.parametrize("fallback", [False, True])
async def test_objects_pages_and_watch_events_come_back_as_json(fallback: bool) -> None:
    """A list followed page by page (the continue token sent back as given) and a watch stream."""

    async def pods(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch"):
            response = web.StreamResponse()
            await response.prepare(request)
            await response.write(b'{"type":"ADDED","object":{"metadata":{"name":"a"}}}\n\n')
            await response.write(b'{"type":"DELETED","object":{"metadata":{"name":"a"}}}\n')
            await response.write_eof()
            return response
        if request.query.get("continue") == "t+/=":
            return web.json_response({"items": [{"n": 2}], "metadata": {"resourceVersion": "7"}})
        return web.json_response({"items": [{"n": 1}], "metadata": {"continue": "t+/="}})

    app = web.Application()
    app.router.add_get("/api/v1/pods", pods)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    kube = kube_at(f"http://127.0.0.1:{runner.addresses[0][1]}", fallback)
    try:
        assert await kube.list(r.PODS) == ([{"n": 1}, {"n": 2}], "7")
        events = [event["type"] async for event in kube.watch(r.PODS, "7", 5)]
        assert events == ["ADDED", "DELETED"]
    finally:
        await kube.close()
        await runner.cleanup()
