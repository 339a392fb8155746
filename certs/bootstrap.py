"""In-cluster certificate bootstrap (the webhook's sidecar), in the spirit of Kueue's internal cert
manager: every replica converges on one Secret, injects its CA into the webhook configuration and
writes the serving files the webhook hot-reloads; then re-checks periodically."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from certs.api import CertAPI, ConflictError
from certs.bundle import CertBundle
from certs.cabundle import ca_bundle_patch, webhook_count
from certs.check import problem_with
from certs.files import write_files
from certs.issue import CA_DAYS, SERVING_DAYS, new_bundle, reissue
from certs.names import service_dns_names

log = logging.getLogger("phalanx.certs")

SecretAction = Literal["unchanged", "created", "adopted", "renewed"]
# Each conflict means another replica wrote first; re-reading adopts its result, so a few suffice.
MAX_ATTEMPTS = 5


class BootstrapError(Exception):
    pass


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


async def ensure_secret(api: CertAPI, cfg: BootstrapConfig, now: datetime) -> tuple[CertBundle, SecretAction]:
    """Make the Secret hold a valid bundle and return it. Replicas race with optimistic concurrency:
    whoever loses (409) re-reads and adopts the winner's bundle if it is valid."""
    lost_race = False
    for _ in range(MAX_ATTEMPTS):
        secret = await api.get_secret(cfg.namespace, cfg.secret)
        if secret is None:
            fresh = new_bundle(cfg.dns_names, (), now, days=cfg.days, ca_days=cfg.ca_days)
            try:
                await api.create_secret(cfg.namespace, cfg.secret, fresh.as_mapping())
            except ConflictError:
                lost_race = True
                continue
            return fresh, "created"
        current = CertBundle.from_mapping(secret.data)
        problem = "missing keys" if current is None else problem_with(current, cfg.dns_names, (), now)
        if problem is None and current is not None:
            return current, "adopted" if lost_race else "unchanged"
        log.info("renewing webhook certificate", extra={"secret": cfg.secret, "reason": problem})
        renewed = reissue(current, cfg.dns_names, (), now, days=cfg.days, ca_days=cfg.ca_days)
        try:
            await api.update_secret(cfg.namespace, cfg.secret, renewed.as_mapping(), secret.resource_version)
        except ConflictError:
            lost_race = True
            continue
        return renewed, "renewed"
    raise BootstrapError(
        f"Secret {cfg.namespace}/{cfg.secret} kept changing; gave up after {MAX_ATTEMPTS} tries"
    )


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


async def reconcile(api: CertAPI, cfg: BootstrapConfig, now: datetime) -> Report:
    """One pass: Secret, then files (so the webhook can serve even before the configuration exists),
    then caBundle."""
    bundle, action = await ensure_secret(api, cfg, now)
    written = write_files(cfg.cert_dir, bundle.as_mapping(with_ca_key=False))
    patched = await inject_ca(api, cfg.webhook_config, bundle.ca_crt)
    report = Report(secret=action, webhooks_patched=patched, files_written=tuple(written))
    if action != "unchanged" or patched or written:
        log.info(
            "webhook certificate reconciled",
            extra={"secret_action": action, "webhooks_patched": patched, "files_written": list(written)},
        )
    return report


async def run(
    api: CertAPI,
    cfg: BootstrapConfig,
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
            await reconcile(api, cfg, clock())
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
