"""The plugin's client against a real HTTP server: what kubectl's flags put on the wire, and how a
refused cluster-wide list narrows to the command's namespace."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from controller.api import resources as r
from controller.api.kube import ApiError
from controller.cli.__main__ import parser
from controller.cli.connection import Chosen, choose, connect

SEEN: list[web.Request] = []


@pytest.fixture
async def apiserver() -> AsyncIterator[str]:
    """Pods readable in namespace "team" only; Secrets nowhere; namespace "slow" answers after 2 s."""

    async def answer(request: web.Request) -> web.Response:
        SEEN.append(request)
        if request.path == "/api/v1/namespaces/team/pods":
            pod = {"metadata": {"name": "p", "namespace": "team"}}
            return web.json_response({"items": [pod], "metadata": {"resourceVersion": "7"}})
        if request.path == "/api/v1/namespaces/slow/pods":
            await asyncio.sleep(2)
        status = {"kind": "Status", "reason": "Forbidden", "message": f"{request.path} is forbidden"}
        return web.json_response(status, status=403)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    SEEN.clear()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


def chosen(server: str) -> Chosen:
    config: dict[str, Any] = {
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "secret"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    return Chosen(config, 'context "x"')


async def test_impersonation_headers_go_out_once_per_value(apiserver: str) -> None:
    args = parser().parse_args(["top", "--as", "jane", "--as-group", "ml", "--as-group", "dev"])
    kube = await connect(chosen(apiserver), args, "team")
    try:
        items, _ = await kube.list(r.PODS)
    finally:
        await kube.close()
    assert [item["metadata"]["name"] for item in items] == ["p"]
    cluster_wide, narrowed = SEEN
    for request in (cluster_wide, narrowed):
        assert request.headers.getall("Impersonate-User") == ["jane"]
        assert request.headers.getall("Impersonate-Group") == ["ml", "dev"]
        assert request.headers["Authorization"] == "Bearer secret"


async def test_a_refused_cluster_wide_list_narrows_to_the_namespace_and_is_recorded(apiserver: str) -> None:
    kube = await connect(chosen(apiserver), parser().parse_args(["top"]), "team")
    try:
        pods, version = await kube.list(r.PODS)
        secrets, _ = await kube.list(r.ResourceType("", "v1", "secrets", "Secret"))
        nodes, _ = await kube.list(r.NODES)
        with pytest.raises(ApiError):  # a list in a namespace the command names is not narrowed
            await kube.list(r.PODS, "other")
    finally:
        await kube.close()
    assert (len(pods), version, secrets, nodes) == (1, "7", [], [])
    assert [request.path for request in SEEN[:2]] == ["/api/v1/pods", "/api/v1/namespaces/team/pods"]
    assert kube.access.data() == {
        "complete": False,
        "narrowedToNamespace": ["pods.core"],
        "forbidden": ["nodes.core", "secrets.core"],
    }


async def test_request_timeout_bounds_every_request(apiserver: str) -> None:
    args = parser().parse_args(["top", "--request-timeout", "200ms"])
    kube = await connect(chosen(apiserver), args, None)
    try:
        with pytest.raises(ApiError) as caught:
            await kube.list(r.PODS, "slow")
    finally:
        await kube.close()
    assert caught.value.reason == "Unreachable" and "TimeoutError" in caught.value.message


async def test_an_exec_plugin_user_from_a_merged_kubeconfig_authenticates(
    apiserver: str, tmp_path: Path
) -> None:
    """A laptop's login plugin (EKS, GKE, OIDC), named relative to its kubeconfig as client-go allows."""
    (tmp_path / "bin").mkdir()
    login = tmp_path / "bin" / "login"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": "from-exec"},
    }
    login.write_text(f"#!/bin/sh\necho '{json.dumps(credential)}'\n")
    login.chmod(0o755)
    config = {
        "current-context": "laptop",
        "clusters": [{"name": "c", "cluster": {"server": apiserver}}],
        "users": [
            {
                "name": "me",
                "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "./bin/login"}},
            }
        ],
        "contexts": [{"name": "laptop", "context": {"cluster": "c", "user": "me", "namespace": "team"}}],
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    args = parser().parse_args(["top", "--kubeconfig", str(path)])
    kube = await connect(choose(args), args, "team")
    try:
        await kube.list(r.PODS)
    finally:
        await kube.close()
    assert {request.headers["Authorization"] for request in SEEN} == {"Bearer from-exec"}
