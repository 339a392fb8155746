"""``CertAPI`` on kubernetes_asyncio: the only module of ``certs`` that talks to the API server."""

from __future__ import annotations

import base64
import os
from collections.abc import Awaitable, Mapping
from types import TracebackType
from typing import Any, TypeVar, cast

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from certs.api import ConflictError, NotFoundError, Secret

FIELD_MANAGER = "phalanx-certs"
_LABELS = {"app.kubernetes.io/name": "phalanx", "app.kubernetes.io/component": "webhook-certs"}
T = TypeVar("T")


class KubeCertAPI:
    """Use as ``async with await KubeCertAPI.connect(kubeconfig) as api: ...``."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self._client = api_client
        self._core = client.CoreV1Api(api_client)
        self._admission = client.AdmissionregistrationV1Api(api_client)

    @classmethod
    async def connect(cls, kubeconfig: str | None = None) -> KubeCertAPI:
        """In-cluster config inside a pod (no ``kubeconfig`` given), else the kubeconfig file
        (``kubeconfig`` or $KUBECONFIG / ~/.kube/config)."""
        configuration = client.Configuration()
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            _require_file(kubeconfig)
            await config.load_kube_config(
                config_file=kubeconfig,
                client_configuration=configuration,
                persist_config=False,
            )
        return cls(client.ApiClient(configuration=configuration))

    async def __aenter__(self) -> KubeCertAPI:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._client.close()

    async def get_secret(self, namespace: str, name: str) -> Secret | None:
        try:
            secret = await self._core.read_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        data = {key: base64.b64decode(value) for key, value in (secret.data or {}).items()}
        return Secret(data=data, resource_version=secret.metadata.resource_version)

    async def create_secret(self, namespace: str, name: str, data: Mapping[str, bytes]) -> None:
        body = _secret(namespace, name, data, resource_version=None)
        await _translate(self._core.create_namespaced_secret(namespace, body, field_manager=FIELD_MANAGER))

    async def update_secret(
        self, namespace: str, name: str, data: Mapping[str, bytes], resource_version: str
    ) -> None:
        body = _secret(namespace, name, data, resource_version=resource_version)
        await _translate(
            self._core.replace_namespaced_secret(name, namespace, body, field_manager=FIELD_MANAGER)
        )

    async def get_webhook_config(self, name: str) -> dict[str, Any]:
        obj = await _translate(self._admission.read_mutating_webhook_configuration(name))
        return cast(dict[str, Any], self._client.sanitize_for_serialization(obj))

    async def patch_webhook_config(self, name: str, patch: list[dict[str, Any]]) -> None:
        # A list body makes the client send application/json-patch+json.
        await _translate(
            self._admission.patch_mutating_webhook_configuration(name, patch, field_manager=FIELD_MANAGER),
            test_failure_is_conflict=True,
        )


def _require_file(kubeconfig: str | None) -> None:
    # The client's own error for a missing file is a misleading "Invalid kube-config file".
    if kubeconfig is not None and not os.path.isfile(kubeconfig):
        raise FileNotFoundError(f"kubeconfig {kubeconfig} does not exist")


def _secret(
    namespace: str, name: str, data: Mapping[str, bytes], resource_version: str | None
) -> client.V1Secret:
    return client.V1Secret(
        api_version="v1",
        kind="Secret",
        metadata=client.V1ObjectMeta(
            name=name, namespace=namespace, labels=dict(_LABELS), resource_version=resource_version
        ),
        type="kubernetes.io/tls",
        data={key: base64.b64encode(value).decode() for key, value in data.items()},
    )


async def _translate(call: Awaitable[T], test_failure_is_conflict: bool = False) -> T:
    """Await an API call, mapping 404 and 409 to our errors -- and 422, which is how the API server
    reports a failed JSON-patch ``test`` op, to ConflictError for patches."""
    try:
        return await call
    except ApiException as exc:
        if exc.status == 404:
            raise NotFoundError(_message(exc)) from exc
        if exc.status == 409 or (test_failure_is_conflict and exc.status == 422):
            raise ConflictError(_message(exc)) from exc
        raise


def _message(exc: ApiException) -> str:
    return f"HTTP {exc.status}: {exc.reason}"
