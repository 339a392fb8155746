"""The in-cluster bootstrap logic against an in-memory API (FakeCertAPI)."""

from __future__ import annotations

import base64
from datetime import timedelta
from pathlib import Path

import pytest

from certs import issue, pem
from certs.api import CertAPI, ConflictError, NotFoundError
from certs.bootstrap import BootstrapConfig, BootstrapError, ensure_secret, inject_ca, reconcile, run
from certs.bundle import CertBundle
from certs.check import problem_with

from .conftest import DNS, NOW
from .fakes import FakeCertAPI

NS, SECRET = "phalanx-system", "phalanx-webhook-tls"


@pytest.fixture
def cfg(tmp_path: Path) -> BootstrapConfig:
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


async def test_creates_the_secret_when_missing(api: FakeCertAPI, cfg: BootstrapConfig) -> None:
    bundle, action = await ensure_secret(api, cfg, NOW)
    assert action == "created" and api.creates == 1
    assert _stored(api) == bundle
    assert bundle.ca_key is not None  # kept so the next renewal can reuse the CA
    assert problem_with(bundle, cfg.dns_names, (), NOW) is None
    assert cfg.dns_names == DNS


async def test_keeps_a_valid_secret(api: FakeCertAPI, cfg: BootstrapConfig) -> None:
    first, _ = await ensure_secret(api, cfg, NOW)
    again, action = await ensure_secret(api, cfg, NOW + timedelta(days=100))
    assert (again, action) == (first, "unchanged")
    assert api.creates == 1 and api.updates == 0


async def test_adopts_the_other_replicas_secret_after_losing_the_create_race(
    api: FakeCertAPI, cfg: BootstrapConfig
) -> None:
    theirs = issue.new_bundle(cfg.dns_names, (), NOW)
    api.before_create = lambda: api.put_secret(NS, SECRET, theirs.as_mapping())
    bundle, action = await ensure_secret(api, cfg, NOW)
    assert (bundle, action) == (theirs, "adopted")
    assert api.creates == 0 and _stored(api) == theirs


async def test_renews_an_expiring_certificate_with_the_same_ca(
    api: FakeCertAPI, cfg: BootstrapConfig
) -> None:
    old, _ = await ensure_secret(api, cfg, NOW)
    later = NOW + timedelta(days=300)
    new, action = await ensure_secret(api, cfg, later)
    assert action == "renewed" and api.updates == 1
    assert new.tls_crt != old.tls_crt and new.ca_crt == old.ca_crt
    assert _stored(api) == new
    assert problem_with(new, cfg.dns_names, (), later) is None


async def test_adopts_the_other_replicas_renewal_after_losing_the_update_race(
    api: FakeCertAPI, cfg: BootstrapConfig
) -> None:
    old, _ = await ensure_secret(api, cfg, NOW)
    later = NOW + timedelta(days=300)
    theirs = issue.reissue(old, cfg.dns_names, (), later)
    api.before_update = lambda: api.put_secret(NS, SECRET, theirs.as_mapping())
    bundle, action = await ensure_secret(api, cfg, later)
    assert (bundle, action) == (theirs, "adopted")
    assert api.updates == 0


async def test_replaces_a_secret_with_missing_keys(api: FakeCertAPI, cfg: BootstrapConfig) -> None:
    api.put_secret(NS, SECRET, {"tls.crt": b"", "tls.key": b""})  # e.g. an empty placeholder
    bundle, action = await ensure_secret(api, cfg, NOW)
    assert action == "renewed" and _stored(api) == bundle


async def test_rotates_an_expiring_ca_keeping_the_old_one_trusted(
    api: FakeCertAPI, cfg: BootstrapConfig
) -> None:
    short = BootstrapConfig(**{**cfg.__dict__, "ca_days": 400})
    old, _ = await ensure_secret(api, short, NOW)
    later = NOW + timedelta(days=300)
    new, action = await ensure_secret(api, short, later)
    assert action == "renewed"
    cas = pem.load_certs(new.ca_crt)
    assert cas[1] == pem.load_cert(old.ca_crt)


async def test_gives_up_when_the_secret_keeps_changing(api: FakeCertAPI, cfg: BootstrapConfig) -> None:
    class Flapping(FakeCertAPI):
        async def create_secret(self, namespace: str, name: str, data: object) -> None:
            raise ConflictError("someone else, always")

    with pytest.raises(BootstrapError, match="gave up"):
        await ensure_secret(Flapping(), cfg, NOW)


async def test_injects_the_ca_into_every_webhook_only_when_different(api: FakeCertAPI) -> None:
    ca = issue.new_ca(NOW)[0]
    assert await inject_ca(api, "phalanx-webhook", ca) == 2
    assert api.ca_bundles() == [base64.b64encode(ca).decode()] * 2
    assert await inject_ca(api, "phalanx-webhook", ca) == 0
    assert len(api.patches) == 1  # the second call did not patch at all

    assert api.webhook_config is not None
    api.webhook_config["webhooks"][1]["clientConfig"]["caBundle"] = "c3RhbGU="  # someone reset one
    assert await inject_ca(api, "phalanx-webhook", ca) == 1
    assert [op["path"] for op in api.patches[-1]] == ["/webhooks/1/name", "/webhooks/1/clientConfig/caBundle"]


async def test_reconcile_writes_serving_files_without_the_ca_key(
    api: FakeCertAPI, cfg: BootstrapConfig
) -> None:
    report = await reconcile(api, cfg, NOW)
    assert report.secret == "created" and report.webhooks_patched == 2
    assert sorted(p.name for p in cfg.cert_dir.iterdir()) == ["ca.crt", "tls.crt", "tls.key"]
    assert (cfg.cert_dir / "tls.key").stat().st_mode & 0o777 == 0o600
    assert (cfg.cert_dir / "tls.crt").read_bytes() == _stored(api).tls_crt

    again = await reconcile(api, cfg, NOW + timedelta(minutes=5))
    assert (again.secret, again.webhooks_patched, again.files_written) == ("unchanged", 0, ())


async def test_a_second_replica_converges_on_the_same_certificate(
    api: FakeCertAPI, cfg: BootstrapConfig, tmp_path: Path
) -> None:
    await reconcile(api, cfg, NOW)
    other = BootstrapConfig(**{**cfg.__dict__, "cert_dir": tmp_path / "replica-2"})
    report = await reconcile(api, other, NOW)
    assert report.secret == "unchanged" and report.webhooks_patched == 0
    assert (other.cert_dir / "tls.crt").read_bytes() == (cfg.cert_dir / "tls.crt").read_bytes()


async def test_files_are_written_even_if_the_webhook_config_is_missing(
    api: FakeCertAPI, cfg: BootstrapConfig
) -> None:
    api.webhook_config = None
    with pytest.raises(NotFoundError):
        await reconcile(api, cfg, NOW)
    assert (cfg.cert_dir / "tls.crt").exists()  # the webhook can get ready meanwhile


async def test_run_retries_failures_with_backoff_then_settles(api: FakeCertAPI, cfg: BootstrapConfig) -> None:
    config = api.webhook_config
    api.webhook_config = None  # missing for the first three passes
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            api.webhook_config = config

    await run(api, cfg, clock=lambda: NOW, sleep=sleep, interval=60, retry=2, iterations=5)
    assert sleeps == [2, 4, 8, 60]
    assert api.ca_bundles()[0] is not None
