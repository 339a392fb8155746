"""The HTTP connection to the API server: where it is, how it is trusted, and who Phalanx is.

Phalanx sends and reads plain JSON, so it needs none of kubernetes-asyncio's generated models, whose
import alone holds about 38 MB of the process. ``SessionTransport`` covers what the controller runs
with -- the in-cluster ServiceAccount, and kubeconfigs with a token, a token file or a client
certificate -- on one aiohttp session. A kubeconfig whose user runs an exec plugin or an auth
provider (a laptop's EKS, GKE or OIDC login, as ``kubectl phalanx`` meets them) is handed to
kubernetes-asyncio instead (``KubeAsyncioTransport``), imported only then.
"""

from __future__ import annotations

import base64
import contextlib
import os
import ssl
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol
from urllib.parse import urlsplit

import aiohttp
import orjson
import yaml

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# Bound ServiceAccount tokens rotate (the kubelet rewrites the file well before expiry): re-read it
# this often, as client-go does.
TOKEN_REREAD_SECONDS = 60.0


class Request(NamedTuple):
    method: str
    path: str  # from the API root: /api/v1/pods
    query: list[tuple[str, str]]
    body: Any  # JSON-able, or None
    headers: dict[str, str]
    timeout: float | None  # seconds for the whole request
    # Headers sent once per value, as Impersonate-Group is (a dict holds one value a name).
    repeated: tuple[tuple[str, str], ...] = ()


class Transport(Protocol):
    async def send(self, request: Request) -> aiohttp.ClientResponse:
        """The response, whatever its status (the caller reads and releases it)."""
        ...

    async def close(self) -> None: ...


class ConfigError(ValueError):
    """No usable connection in the kubeconfig or the pod's environment."""


@dataclass
class Token:
    """A bearer token, given or read from a file (and re-read while the process runs)."""

    value: str = ""
    file: Path | None = None
    _read_at: float = field(default=-1.0, repr=False)

    def current(self) -> str:
        if self.file is not None and time.monotonic() - self._read_at >= TOKEN_REREAD_SECONDS:
            self.value = self.file.read_text().strip()
            self._read_at = time.monotonic()
        return self.value


@dataclass
class Endpoint:
    server: str  # scheme://host:port, no trailing slash
    tls: ssl.SSLContext | None  # None for plain http (tests only)
    token: Token | None = None
    server_hostname: str | None = None  # kubeconfig tls-server-name
    proxy: str | None = None  # kubeconfig proxy-url; else the environment's, read once


def in_cluster(root: Path = SERVICE_ACCOUNT, env: Mapping[str, str] = os.environ) -> Endpoint:
    """The pod's ServiceAccount, as every in-cluster client finds it."""
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError("not in a pod: KUBERNETES_SERVICE_HOST/PORT are not set")
    if ":" in host:  # IPv6
        host = f"[{host}]"
    context = ssl.create_default_context(cafile=str(root / "ca.crt"))
    token = Token(file=root / "token")
    token.current()  # fail now, not on the first request, if it is missing
    return Endpoint(f"https://{host}:{port}", context, token)


def from_kubeconfig(path: str, context_name: str | None = None) -> Endpoint | None:
    """The current (or named) context of a kubeconfig file; None when its user needs an exec
    plugin, an auth provider or a username and password (for kubernetes-asyncio)."""
    config = yaml.safe_load(Path(path).read_text()) or {}
    return from_config(config, Path(path).resolve().parent, context_name)


def from_config(config: Mapping[str, Any], base: Path, context_name: str | None = None) -> Endpoint | None:
    """``from_kubeconfig`` on a parsed kubeconfig whose relative paths are relative to ``base``."""
    context = kubeconfig_context(config, context_name)
    cluster = _named(config, "clusters", context.get("cluster"), "cluster")
    user = _named(config, "users", context.get("user"), "user") if context.get("user") else {}
    if any(key in user for key in ("exec", "auth-provider", "username")):
        return None
    server = str(cluster.get("server") or "").rstrip("/")
    if not server:
        raise ConfigError(f"cluster {context.get('cluster')!r} has no server")
    tls = None
    if urlsplit(server).scheme == "https":
        tls = _tls(cluster, user, base)
    token = None
    if user.get("token"):
        token = Token(str(user["token"]))
    elif user.get("tokenFile"):
        token = Token(file=base / str(user["tokenFile"]))
    return Endpoint(
        server, tls, token, cluster.get("tls-server-name") or None, cluster.get("proxy-url") or None
    )


def kubeconfig_context(config: Mapping[str, Any], name: str | None = None) -> dict[str, Any]:
    """The named context of a parsed kubeconfig, else its current one (ConfigError if absent)."""
    return _named(config, "contexts", name or config.get("current-context"), "context")


def _named(config: Mapping[str, Any], section: str, name: Any, key: str) -> dict[str, Any]:
    for entry in config.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get(key)
            return value if isinstance(value, dict) else {}
    raise ConfigError(f"kubeconfig has no {section[:-1]} named {name!r}")


def _tls(cluster: Mapping[str, Any], user: Mapping[str, Any], base: Path) -> ssl.SSLContext:
    if cluster.get("insecure-skip-tls-verify"):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif cluster.get("certificate-authority-data"):
        pem = base64.b64decode(cluster["certificate-authority-data"]).decode()
        context = ssl.create_default_context(cadata=pem)
    elif cluster.get("certificate-authority"):
        context = ssl.create_default_context(cafile=str(base / cluster["certificate-authority"]))
    else:
        context = ssl.create_default_context()
    cert = _pem(user, "client-certificate", base)
    key = _pem(user, "client-key", base)
    if cert and key:
        _load_client_pair(context, cert, key)
    return context


def _pem(user: Mapping[str, Any], key: str, base: Path) -> bytes | None:
    if user.get(f"{key}-data"):
        return base64.b64decode(user[f"{key}-data"])
    if user.get(key):
        return (base / str(user[key])).read_bytes()
    return None


def _load_client_pair(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    # ssl loads a certificate chain from files only: write them to a private directory for the
    # moment it takes (the key never outlives this call on disk).
    with tempfile.TemporaryDirectory(prefix="phalanx-tls-") as directory:
        cert_file, key_file = Path(directory) / "tls.crt", Path(directory) / "tls.key"
        cert_file.write_bytes(cert)
        key_file.touch(mode=0o600)
        key_file.write_bytes(key)
        context.load_cert_chain(cert_file, key_file)


def _proxy_for(server: str) -> str | None:
    """The proxy the environment names for the API server, read once: the environment does not
    change while the process runs (client-go, too, reads it once and never reads netrc)."""
    url = urlsplit(server)
    if not url.hostname or urllib.request.proxy_bypass_environment(url.hostname):  # type: ignore[attr-defined]
        return None
    return urllib.request.getproxies_environment().get(url.scheme)


class SessionTransport:
    """Requests on one aiohttp session with the endpoint's TLS and bearer token."""

    def __init__(self, endpoint: Endpoint, connections: int) -> None:
        self._endpoint = endpoint
        self._proxy = endpoint.proxy or _proxy_for(endpoint.server)
        # trust_env=False: aiohttp would otherwise look up ~/.netrc and the proxy environment in a
        # worker thread on every request, which cost as much client CPU as the request itself.
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=connections, ssl=endpoint.tls or False),
            trust_env=False,
        )

    async def send(self, request: Request) -> aiohttp.ClientResponse:
        endpoint = self._endpoint
        headers = [*request.headers.items(), *request.repeated]
        if endpoint.token is not None:
            headers.append(("Authorization", f"Bearer {endpoint.token.current()}"))
        return await self._session.request(
            request.method,
            endpoint.server + request.path,
            params=request.query or None,
            data=None if request.body is None else orjson.dumps(request.body),
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=request.timeout),
            proxy=self._proxy,
            server_hostname=endpoint.server_hostname,
        )

    async def close(self) -> None:
        await self._session.close()


class KubeAsyncioTransport:
    """kubernetes-asyncio's client, for kubeconfigs only it can use (exec plugins, auth providers).

    Non-2xx answers come back as responses here too (``_preload_content=False``)."""

    def __init__(self, api: Any) -> None:
        self._api = api
        rest = api.rest_client
        if rest.proxy is None:
            rest.proxy = _proxy_for(api.configuration.host)
        rest.pool_manager._trust_env = False  # as SessionTransport: no per-request netrc lookups

    @classmethod
    async def connect(cls, kubeconfig: str | Mapping[str, Any], connections: int) -> KubeAsyncioTransport:
        """From a kubeconfig file, or from a parsed one whose paths are absolute."""
        # ~38 MB of generated models: imported only for these kubeconfigs.
        from kubernetes_asyncio import client, config  # noqa: PLC0415

        configuration = client.Configuration()
        if isinstance(kubeconfig, str):
            await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        else:
            await config.load_kube_config_from_dict(dict(kubeconfig), client_configuration=configuration)
        configuration.connection_pool_maxsize = connections
        return cls(client.ApiClient(configuration))

    async def send(self, request: Request) -> aiohttp.ClientResponse:
        from kubernetes_asyncio.client.exceptions import ApiException  # noqa: PLC0415

        headers = dict(request.headers)
        for name, value in request.repeated:
            if name in headers:
                raise ConfigError(f"{name} once only with a kubeconfig user run by kubernetes-asyncio")
            headers[name] = value
        try:
            response: aiohttp.ClientResponse = await self._api.call_api(
                request.path,
                request.method,
                query_params=request.query,
                header_params=headers,
                body=request.body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=request.timeout,
            )
        except ApiException as err:  # raised before sending (a request it cannot encode)
            raise aiohttp.ClientError(f"{err.status} {err.reason}") from err
        return response

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._api.close()


async def connect(kubeconfig: str | None, connections: int) -> Transport:
    """A transport for ``kubeconfig``, or for the pod's ServiceAccount when there is none."""
    if not kubeconfig:
        return SessionTransport(in_cluster(), connections)
    endpoint = from_kubeconfig(kubeconfig)
    if endpoint is None:
        return await KubeAsyncioTransport.connect(kubeconfig, connections)
    return SessionTransport(endpoint, connections)


async def connect_config(config: Mapping[str, Any], connections: int) -> Transport:
    """A transport for a parsed kubeconfig whose paths are absolute (kubectl phalanx's merged one)."""
    endpoint = from_config(config, Path.cwd())
    if endpoint is None:
        return await KubeAsyncioTransport.connect(config, connections)
    return SessionTransport(endpoint, connections)
