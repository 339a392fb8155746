"""The Kubernetes side: the Service's names, the caBundle patch, and the in-cluster bootstrap
against an in-memory API (FakeCertAPI)."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from certs.bundle import CertBundle, load_cert, load_certs, new_bundle, new_ca, problem_with, reissue
from certs.kube import (
    BootstrapConfig,
    BootstrapError,
    CertAPI,
    ConflictError,
    KubeCertAPI,
    NotFoundError,
    Secret,
    ca_bundle_patch,
    ensure_secret,
    inject_ca,
    reconcile,
    run,
    service_dns_names,
    webhook_count,
)

from .conftest import DNS, NOW
from .fakes import WEBHOOK_NAMES, FakeCertAPI

NS, SECRET = "phalanx-system", "phalanx-webhook-tls"
CA = b"-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n"
B64 = base64.b64encode(CA).decode()


def test_service_dns_names_cover_every_way_to_address_the_service() -> None:
    assert service_dns_names("phalanx-webhook", "phalanx-system") == (
        "phalanx-webhook",
        "phalanx-webhook.phalanx-system",
        "phalanx-webhook.phalanx-system.svc",
        "phalanx-webhook.phalanx-system.svc.cluster.local",
    )


# ---- the caBundle patch ----------------------------------------------------------------------


def _config(*bundles: str | None) -> dict[str, object]:
    hooks = []
    for i, bundle in enumerate(bundles):
        client_config = {} if bundle is None else {"caBundle": bundle}
        hooks.append({"name": f"w{i}.phalanx.io", "clientConfig": client_config})
    return {"webhooks": hooks}


def test_patches_missing_and_different_bundles_guarded_by_name() -> None:
    ops = ca_bundle_patch(_config(None, B64, "b3RoZXI="), CA)
    assert ops == [
        {"op": "test", "path": "/webhooks/0/name", "value": "w0.phalanx.io"},
        {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": B64},
        {"op": "test", "path": "/webhooks/2/name", "value": "w2.phalanx.io"},
        {"op": "add", "path": "/webhooks/2/clientConfig/caBundle", "value": B64},
    ]
    assert webhook_count(ops) == 2


def test_nothing_to_do_when_every_bundle_matches() -> None:
    assert ca_bundle_patch(_config(B64, B64), CA) == []
    assert ca_bundle_patch({"webhooks": None}, CA) == []


def test_garbage_bundle_is_replaced() -> None:
    assert webhook_count(ca_bundle_patch(_config("%%% not base64"), CA)) == 1


# ---- the bootstrap --------------------------------------------------------------------------
@pytest.fixture
def config(tmp_path: Path) -> BootstrapConfig:
    return BootstrapConfig(
        namespace=NS,
        secret=SECRET,
        webhook_config="phalanx-webhook",
        service="phalanx-webhook",
        cert_dir=tmp_path / "certs",
    )


@pytest.fixture
def api() -> FakeCertAPI:
    return FakeCertAPI()


def _stored(api: FakeCertAPI) -> CertBundle:
    bundle = CertBundle.from_mapping(api.secrets[(NS, SECRET)].data)
    assert bundle is not None
    return bundle


def test_fake_implements_the_protocol() -> None:
    checked: CertAPI = FakeCertAPI()
    assert checked is not None


async def test_creates_the_secret_when_missing(api: FakeCertAPI, config: BootstrapConfig) -> None:
    bundle, action = await ensure_secret(api, config, NOW)
    assert action == "created" and api.creates == 1
    assert _stored(api) == bundle
    assert bundle.ca_key is not None  # kept so the next renewal can reuse the CA
    assert problem_with(bundle, config.dns_names, (), NOW) is None
    assert config.dns_names == DNS


async def test_keeps_a_valid_secret(api: FakeCertAPI, config: BootstrapConfig) -> None:
    first, _ = await ensure_secret(api, config, NOW)
    again, action = await ensure_secret(api, config, NOW + timedelta(days=100))
    assert (again, action) == (first, "unchanged")
    assert api.creates == 1 and api.updates == 0


async def test_adopts_the_other_replicas_secret_after_losing_the_create_race(
    api: FakeCertAPI, config: BootstrapConfig
) -> None:
    theirs = new_bundle(config.dns_names, (), NOW)
    api.before_create = lambda: api.put_secret(NS, SECRET, theirs.as_mapping())
    bundle, action = await ensure_secret(api, config, NOW)
    assert (bundle, action) == (theirs, "adopted")
    assert api.creates == 0 and _stored(api) == theirs


async def test_renews_an_expiring_certificate_with_the_same_ca(
    api: FakeCertAPI, config: BootstrapConfig
) -> None:
    old, _ = await ensure_secret(api, config, NOW)
    later = NOW + timedelta(days=300)
    new, action = await ensure_secret(api, config, later)
    assert action == "renewed" and api.updates == 1
    assert new.tls_crt != old.tls_crt and new.ca_crt == old.ca_crt
    assert _stored(api) == new
    assert problem_with(new, config.dns_names, (), later) is None


async def test_adopts_the_other_replicas_renewal_after_losing_the_update_race(
    api: FakeCertAPI, config: BootstrapConfig
) -> None:
    old, _ = await ensure_secret(api, config, NOW)
    later = NOW + timedelta(days=300)
    theirs = reissue(old, config.dns_names, (), later)
    api.before_update = lambda: api.put_secret(NS, SECRET, theirs.as_mapping())
    bundle, action = await ensure_secret(api, config, later)
    assert (bundle, action) == (theirs, "adopted")
    assert api.updates == 0


async def test_replaces_a_secret_with_missing_keys(api: FakeCertAPI, config: BootstrapConfig) -> None:
    api.put_secret(NS, SECRET, {"tls.crt": b"", "tls.key": b""})  # e.g. an empty placeholder
    bundle, action = await ensure_secret(api, config, NOW)
    assert action == "renewed" and _stored(api) == bundle


async def test_rotates_an_expiring_ca_keeping_the_old_one_trusted(
    api: FakeCertAPI, config: BootstrapConfig
) -> None:
    short = BootstrapConfig(**{**config.__dict__, "ca_days": 400})
    old, _ = await ensure_secret(api, short, NOW)
    later = NOW + timedelta(days=300)
    new, action = await ensure_secret(api, short, later)
    assert action == "renewed"
    cas = load_certs(new.ca_crt)
    assert cas[1] == load_cert(old.ca_crt)


async def test_gives_up_when_the_secret_keeps_changing(api: FakeCertAPI, config: BootstrapConfig) -> None:
    class Flapping(FakeCertAPI):
        async def create_secret(self, namespace: str, name: str, data: object) -> None:
            raise ConflictError("someone else, always")

    with pytest.raises(BootstrapError, match="gave up"):
        await ensure_secret(Flapping(), config, NOW)


async def test_injects_the_ca_into_every_webhook_only_when_different(api: FakeCertAPI) -> None:
    ca = new_ca(NOW)[0]
    assert await inject_ca(api, "phalanx-webhook", ca) == len(WEBHOOK_NAMES)
    assert api.ca_bundles() == [base64.b64encode(ca).decode()] * len(WEBHOOK_NAMES)
    assert await inject_ca(api, "phalanx-webhook", ca) == 0
    assert len(api.patches) == 1  # the second call did not patch at all

    assert api.webhook_config is not None
    api.webhook_config["webhooks"][1]["clientConfig"]["caBundle"] = "c3RhbGU="  # someone reset one
    assert await inject_ca(api, "phalanx-webhook", ca) == 1
    assert [op["path"] for op in api.patches[-1]] == ["/webhooks/1/name", "/webhooks/1/clientConfig/caBundle"]


async def test_reconcile_writes_serving_files_without_the_ca_key(
    api: FakeCertAPI, config: BootstrapConfig
) -> None:
    report = await reconcile(api, config, NOW)
    assert report.secret == "created" and report.webhooks_patched == len(WEBHOOK_NAMES)
    assert sorted(p.name for p in config.cert_dir.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    assert (config.cert_dir / "tls.key").stat().st_mode & 0o777 == 0o600
    assert (config.cert_dir / "tls.crt").read_bytes() == _stored(api).tls_crt

    again = await reconcile(api, config, NOW + timedelta(minutes=5))
    assert (again.secret, again.webhooks_patched, again.files_written) == ("unchanged", 0, ())


async def test_a_second_replica_converges_on_the_same_certificate(
    api: FakeCertAPI, config: BootstrapConfig, tmp_path: Path
) -> None:
    await reconcile(api, config, NOW)
    other = BootstrapConfig(**{**config.__dict__, "cert_dir": tmp_path / "replica-2"})
    report = await reconcile(api, other, NOW)
    assert report.secret == "unchanged" and report.webhooks_patched == 0
    assert (other.cert_dir / "tls.crt").read_bytes() == (config.cert_dir / "tls.crt").read_bytes()


async def test_files_are_written_even_if_the_webhook_config_is_missing(
    api: FakeCertAPI, config: BootstrapConfig
) -> None:
    api.webhook_config = None
    with pytest.raises(NotFoundError):
        await reconcile(api, config, NOW)
    assert (config.cert_dir / "tls.crt").exists()  # the webhook can get ready meanwhile


async def test_run_retries_failures_with_backoff_then_settles(
    api: FakeCertAPI, config: BootstrapConfig
) -> None:
    webhook_config = api.webhook_config
    api.webhook_config = None  # missing for the first three passes
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            api.webhook_config = webhook_config

    await run(api, config, clock=lambda: NOW, sleep=sleep, interval=60, retry=2, iterations=5)
    assert sleeps == [2, 4, 8, 60]
    assert api.ca_bundles()[0] is not None


# ---- KubeCertAPI's error mapping ------------------------------------------------------------------


class _Stub:
    """Stands in for the generated CoreV1Api/AdmissionregistrationV1Api: every call answers ``status``
    (an ApiException) or, with status 200, ``result``."""

    def __init__(self, status: int, result: object = None) -> None:
        self.status, self.result = status, result

    def __getattr__(self, name: str) -> Callable[..., Awaitable[object]]:
        async def call(*args: object, **kwargs: object) -> object:
            if self.status != 200:
                raise ApiException(status=self.status, reason="stub")
            return self.result

        return call


@contextlib.asynccontextmanager
async def _kube_api(status: int, result: object = None) -> AsyncIterator[KubeCertAPI]:
    async with KubeCertAPI(client.ApiClient()) as api:
        api._core = api._admission = cast(Any, _Stub(status, result))
        yield api


async def test_kube_api_reads_a_secret_and_says_none_when_it_is_missing() -> None:
    stored = client.V1Secret(
        data={"tls.crt": base64.b64encode(b"cert").decode()},
        metadata=client.V1ObjectMeta(resource_version="7"),
    )
    async with _kube_api(200, stored) as api:
        assert await api.get_secret(NS, SECRET) == Secret(data={"tls.crt": b"cert"}, resource_version="7")
    async with _kube_api(404) as api:
        assert await api.get_secret(NS, SECRET) is None
    async with _kube_api(403) as api:
        with pytest.raises(ApiException):
            await api.get_secret(NS, SECRET)


async def test_kube_api_maps_conflicts_and_missing_objects() -> None:
    async with _kube_api(409) as api:
        with pytest.raises(ConflictError):
            await api.create_secret(NS, SECRET, {"tls.crt": b"x"})
    async with _kube_api(404) as api:
        with pytest.raises(NotFoundError):
            await api.get_webhook_config("phalanx-webhook")
    # A failed JSON-patch test op is a 422: a conflict for a patch, an error anywhere else.
    async with _kube_api(422) as api:
        with pytest.raises(ConflictError):
            await api.patch_webhook_config("phalanx-webhook", [])
        with pytest.raises(ApiException):
            await api.update_secret(NS, SECRET, {"tls.crt": b"x"}, "1")
