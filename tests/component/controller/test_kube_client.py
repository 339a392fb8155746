"""KubeClient's error mapping against a real HTTP server: every failure is an ApiError."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from kubernetes_asyncio import client

from controller import resources as r
from controller.kube import ApiError, KubeClient


def kube_at(url: str) -> KubeClient:
    configuration = client.Configuration(host=url)
    return KubeClient(client.ApiClient(configuration))


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


async def test_an_error_answer_is_an_api_error_with_its_status(apiserver: str) -> None:
    kube = kube_at(apiserver)
    try:
        with pytest.raises(ApiError) as caught:
            await kube.patch(r.PODS, "team", "x", {"metadata": {"labels": {"a": "b"}}})
        assert caught.value.not_found
        assert 'pods "x" not found' in str(caught.value)
    finally:
        await kube.close()


async def test_no_answer_at_all_is_an_api_error_too() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kube = kube_at(f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(ApiError) as caught:
            await kube.get(r.PODS, "team", "x")
        assert (caught.value.status, caught.value.reason) == (0, "Unreachable")
        assert not caught.value.not_found
    finally:
        await kube.close()


async def test_requests_make_no_per_request_environment_lookups(apiserver: str) -> None:
    kube = kube_at(apiserver)
    try:
        # aiohttp would otherwise read ~/.netrc and the proxy variables in a thread per request.
        assert not kube._api.rest_client.pool_manager.trust_env
    finally:
        await kube.close()


async def test_the_proxy_environment_is_honoured_once_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "internal.example")
    proxied = kube_at("https://api.example:6443")
    bypassed = kube_at("https://internal.example:6443")
    try:
        assert proxied._api.rest_client.proxy == "http://proxy.example:3128"
        assert bypassed._api.rest_client.proxy is None
    finally:
        await proxied.close()
        await bypassed.close()
