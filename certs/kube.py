"""The Kubernetes side of the webhook's TLS: the Secret that holds the bundle, the caBundle of the
MutatingWebhookConfiguration, and the in-pod bootstrap that keeps both -- and the serving files the
webhook hot-reloads -- right.

The bootstrap (the webhook's sidecar) is in the spirit of Kueue's internal cert manager: every
replica converges on one Secret, injects its CA into the webhook configuration and writes the
serving files; then re-checks periodically. It is written against the ``CertAPI`` Protocol:
``KubeCertAPI`` implements it on kubernetes_asyncio, tests use a fake.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol, TypeVar, cast

from kubernetes_asyncio import client
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client.exceptions import ApiException

from certs.bundle import CA_DAYS, SERVING_DAYS, CertBundle, new_bundle, problem_with, reissue
from certs.files import write_files

log = logging.getLogger("phalanx.certs")

# Default object names: deploy/ uses the same.
DEFAULT_NAMESPACE = "phalanx-system"
DEFAULT_SERVICE = "phalanx-webhook"
DEFAULT_SECRET = "phalanx-webhook-tls"
DEFAULT_WEBHOOK_CONFIG = "phalanx-webhook"
DEFAULT_CLUSTER_DOMAIN = "cluster.local"

FIELD_MANAGER = "phalanx-certs"
SECRET_LABELS = {"app.kubernetes.io/name": "phalanx", "app.kubernetes.io/component": "webhook-certs"}
# Each conflict means another replica wrote first; re-reading adopts its result, so a few suffice.
MAX_ATTEMPTS = 5

SecretAction = Literal["unchanged", "created", "adopted", "renewed"]
T = TypeVar("T")


def service_dns_names(
    service: str, namespace: str, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
) -> tuple[str, ...]:
    """Every name the API server (or a pod) may use to reach ``service`` in ``namespace``."""
    return (
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.{cluster_domain}",
    )


# ---- the API-server operations the bootstrap needs -------------------------------------------------


class ConflictError(Exception):
    """HTTP 409: the Secret already exists (create) or changed since it was read (update)."""


class NotFoundError(Exception):
    """HTTP 404 on an object that must exist (the MutatingWebhookConfiguration)."""


class BootstrapError(Exception):
    pass


@dataclass(frozen=True)
class Secret:
    data: Mapping[str, bytes]  # base64-decoded
    resource_version: str


class CertAPI(Protocol):
    async def get_secret(self, namespace: str, name: str) -> Secret | None:
        """The Secret, or None when it does not exist."""
        ...

    async def create_secret(self, namespace: str, name: str, data: Mapping[str, bytes]) -> None:
        """Create a ``kubernetes.io/tls`` Secret; raise ConflictError when it already exists."""
        ...

    async def update_secret(
        self, namespace: str, name: str, data: Mapping[str, bytes], resource_version: str
    ) -> None:
        """Replace the Secret's data; raise ConflictError when ``resource_version`` is stale."""
        ...

    async def get_webhook_config(self, name: str) -> dict[str, Any]:
        """The MutatingWebhookConfiguration as JSON (camelCase keys); raise NotFoundError when absent."""
        ...

    async def patch_webhook_config(self, name: str, patch: list[dict[str, Any]]) -> None:
        """JSON-patch the MutatingWebhookConfiguration; raise ConflictError when a test op fails."""
        ...


class KubeCertAPI:
    """``CertAPI`` on kubernetes_asyncio. Use as ``async with await KubeCertAPI.connect(kubeconfig) as
    api: ...``."""

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
            kube_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            _require_file(kubeconfig)
            await kube_config.load_kube_config(
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
            secret = await _translate(self._core.read_namespaced_secret(name, namespace))
        except NotFoundError:
            return None
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
        webhook_config = await _translate(self._admission.read_mutating_webhook_configuration(name))
        return cast(dict[str, Any], self._client.sanitize_for_serialization(webhook_config))

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
            name=name, namespace=namespace, labels=dict(SECRET_LABELS), resource_version=resource_version
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


# ---- caBundle injection ---------------------------------------------------------------------------


def ca_bundle_patch(webhook_config: Mapping[str, Any], ca_pem: bytes) -> list[dict[str, Any]]:
    """JSON patch ops setting ``webhooks[i].clientConfig.caBundle`` to ``ca_pem`` where it differs;
    empty when every entry is already right. Each change is guarded by a ``test`` of the entry's
    name, so a concurrent reorder makes the patch fail instead of writing to the wrong webhook."""
    value = base64.b64encode(ca_pem).decode()
    ops: list[dict[str, Any]] = []
    for index, webhook in enumerate(webhook_config.get("webhooks") or []):
        client_config = webhook.get("clientConfig") or {}
        if _decode(client_config.get("caBundle")) == ca_pem:
            continue
        ops.append({"op": "test", "path": f"/webhooks/{index}/name", "value": webhook["name"]})
        # "add" sets the member whether or not it exists yet ("replace" fails on a missing one).
        ops.append({"op": "add", "path": f"/webhooks/{index}/clientConfig/caBundle", "value": value})
    return ops


def webhook_count(ops: list[dict[str, Any]]) -> int:
    """How many webhook entries a patch from ``ca_bundle_patch`` changes."""
    return sum(1 for op in ops if op["op"] == "add")


async def inject_ca(api: CertAPI, webhook_config: str, ca_pem: bytes) -> int:
    """Set caBundle on every webhook of the configuration where it differs; return how many changed."""
    for _ in range(MAX_ATTEMPTS):
        ops = ca_bundle_patch(await api.get_webhook_config(webhook_config), ca_pem)
        if not ops:
            return 0
        try:
            await api.patch_webhook_config(webhook_config, ops)
        except ConflictError:  # the configuration changed under us (a test op failed): recompute
            continue
        return webhook_count(ops)
    raise BootstrapError(f"MutatingWebhookConfiguration {webhook_config} kept changing")


def _decode(value: object) -> bytes | None:
    if isinstance(value, bytes):
        return value  # a client that already decoded the byte field
    if not isinstance(value, str) or not value:
        return None
    try:
        return base64.b64decode(value, validate=False)
    except (binascii.Error, ValueError):
        return None


# ---- the in-pod bootstrap ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BootstrapConfig:
    namespace: str
    secret: str
    webhook_config: str
    service: str
    cert_dir: Path
    days: int = SERVING_DAYS
    ca_days: int = CA_DAYS

    @property
    def dns_names(self) -> tuple[str, ...]:
        return service_dns_names(self.service, self.namespace)


@dataclass(frozen=True)
class Report:
    secret: SecretAction
    webhooks_patched: int
    files_written: tuple[str, ...]


async def ensure_secret(
    api: CertAPI, config: BootstrapConfig, now: datetime
) -> tuple[CertBundle, SecretAction]:
    """Make the Secret hold a valid bundle and return it. Replicas race with optimistic concurrency:
    whoever loses (409) re-reads and adopts the winner's bundle if it is valid."""
    lost_race = False
    for _ in range(MAX_ATTEMPTS):
        secret = await api.get_secret(config.namespace, config.secret)
        if secret is None:
            fresh = new_bundle(config.dns_names, (), now, days=config.days, ca_days=config.ca_days)
            try:
                await api.create_secret(config.namespace, config.secret, fresh.as_mapping())
            except ConflictError:
                lost_race = True
                continue
            return fresh, "created"
        current = CertBundle.from_mapping(secret.data)
        problem = "missing keys" if current is None else problem_with(current, config.dns_names, (), now)
        if problem is None and current is not None:
            return current, "adopted" if lost_race else "unchanged"
        log.info("renewing webhook certificate", extra={"secret": config.secret, "reason": problem})
        renewed = reissue(current, config.dns_names, (), now, days=config.days, ca_days=config.ca_days)
        try:
            await api.update_secret(
                config.namespace, config.secret, renewed.as_mapping(), secret.resource_version
            )
        except ConflictError:
            lost_race = True
            continue
        return renewed, "renewed"
    raise BootstrapError(
        f"Secret {config.namespace}/{config.secret} kept changing; gave up after {MAX_ATTEMPTS} tries"
    )


async def reconcile(api: CertAPI, config: BootstrapConfig, now: datetime) -> Report:
    """One pass: Secret, then files (so the webhook can serve even before the configuration exists),
    then caBundle."""
    bundle, action = await ensure_secret(api, config, now)
    written = write_files(config.cert_dir, bundle.as_mapping(with_ca_key=False))
    patched = await inject_ca(api, config.webhook_config, bundle.ca_crt)
    report = Report(secret=action, webhooks_patched=patched, files_written=tuple(written))
    if action != "unchanged" or patched or written:
        log.info(
            "webhook certificate reconciled",
            extra={"secret_action": action, "webhooks_patched": patched, "files_written": list(written)},
        )
    return report


async def run(
    api: CertAPI,
    config: BootstrapConfig,
    clock: Callable[[], datetime],
    sleep: Callable[[float], Awaitable[None]],
    *,
    interval: float = 60.0,
    retry: float = 2.0,
    iterations: int | None = None,
) -> None:
    """Reconcile every ``interval`` seconds; after a failure retry sooner (exponential from ``retry``,
    capped at ``interval``). ``iterations`` bounds the loop (tests); None runs forever."""
    failures = 0
    done = 0
    while iterations is None or done < iterations:
        try:
            await reconcile(api, config, clock())
        except Exception:  # a sidecar must outlive API hiccups; the next pass retries everything
            log.exception("certificate reconcile failed", extra={"failures": failures + 1})
            delay = min(retry * 2**failures, interval)
            failures += 1
        else:
            failures = 0
            delay = interval
        done += 1
        if iterations is None or done < iterations:
            await sleep(delay)
