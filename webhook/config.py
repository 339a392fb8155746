"""Webhook settings: defaults < ``PHALANX_WEBHOOK_*`` environment < command-line flags."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from shared import constants as c
from shared.settings import Settings, setting
from webhook.mutate import DEFAULT_EXCLUDED_NAMESPACES, MutationConfig

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
LOG_LEVELS = frozenset({"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"})


class Names(frozenset[str]):
    """A default name list, shown by ``--help`` as it is written on the command line."""

    def __str__(self) -> str:
        return ",".join(sorted(self))


def _level(value: str) -> str:
    level = value.upper()
    if level not in LOG_LEVELS:
        raise ValueError(f"unknown log level {value!r}")
    return level


def _budget_fits_a_body(settings: WebhookSettings) -> None:
    if settings.max_buffered_body_bytes < settings.max_body_bytes:
        raise ValueError("--max-buffered-body-bytes must be at least --max-body-bytes")


@dataclass(frozen=True)
class WebhookSettings(Settings):
    """Phalanx mutating admission webhook: gang scheduling gates on pods and workloads."""

    env_prefix: ClassVar[str] = "PHALANX_WEBHOOK_"
    checks = (_budget_fits_a_body,)

    bind_address: str = setting(
        "0.0.0.0", description="address of both ports; in a cluster the pod IP must be reachable"
    )
    port: int = setting(9443, ge=0, le=65535, description="TLS admission port")
    health_port: int = setting(8080, ge=0, le=65535, description="plain HTTP /healthz /readyz /metrics")
    cert_dir: Path = setting(
        Path("/etc/phalanx/webhook/certs"), description="where tls.crt and tls.key are read"
    )
    cert_reload_seconds: float = setting(
        default=5.0, gt=0, description="how often a renewed certificate is picked up"
    )
    max_body_bytes: int = setting(
        default=6 * 1024 * 1024,
        ge=1024,
        description="larger requests get HTTP 413 (the API server accepts objects up to 3 MiB and "
        "stores up to 1.5 MiB: an UPDATE review carries both, in a few KiB of envelope)",
    )
    body_read_timeout_seconds: float = setting(
        default=2.0,
        gt=0,
        description="a body must arrive whole within this time; stalled uploads get HTTP 408",
    )
    max_buffered_body_bytes: int = setting(
        default=24 * 1024 * 1024,
        ge=64 * 1024,
        description="bytes of large bodies (over 64 KiB, or of unknown length) held at once across "
        "all connections; one that does not fit waits --body-budget-wait-seconds, then gets HTTP 503",
    )
    body_budget_wait_seconds: float = setting(
        default=0.0,
        ge=0,
        description="how long a large body waits for room in the budget (0: refused at once, so that "
        "its connection is closed before it buffers more)",
    )
    max_connections: int = setting(
        default=1024,
        ge=1,
        description="open connections; a new one beyond this closes the one idle longest (or, when "
        "every one is in a request, itself)",
    )
    header_timeout_seconds: float = setting(
        default=10.0,
        gt=0,
        description="a request's headers must arrive within this time of its first byte (of "
        "connecting, for a connection's first request), else the connection is closed",
    )
    keepalive_timeout_seconds: float = setting(
        default=120.0,
        gt=0,
        description="an idle connection is closed after this long (longer than the API server's own "
        "90 s, so that it never reuses a connection being closed)",
    )
    foreign_schedulers: frozenset[str] = setting(
        Names(c.DEFAULT_FOREIGN_GANG_SCHEDULERS),
        description="schedulerName values of other gang schedulers, rewritten to --target-scheduler "
        "(comma list)",
    )
    target_scheduler: str = setting(c.DEFAULT_SCHEDULER, description="the scheduler gangs are handed to")
    excluded_namespaces: frozenset[str] = setting(
        Names(DEFAULT_EXCLUDED_NAMESPACES),
        description="never mutated, whatever their labels say (comma list)",
    )
    event_loop: Literal["auto", "uvloop", "asyncio"] = setting(
        "auto",
        description="uvloop (C event loop and TLS: about a tenth more admissions per CPU second), "
        "asyncio, or auto: uvloop when installed",
    )
    log_level: str = setting("INFO", description="DEBUG, INFO, WARNING or ERROR", check=_level)
    log_json: bool = setting(True, description="JSON log lines (--no-log-json: plain text)")
    shutdown_delay_seconds: float = setting(
        default=2.0,
        ge=0,
        description="on SIGTERM, keep serving (unready) this long while the endpoint removal propagates",
    )
    shutdown_timeout_seconds: float = setting(
        default=10.0,
        ge=0,
        description=(
            "then wait at most this long for in-flight requests (the API server gives up on each"
            " after the webhook configuration's timeoutSeconds, 5 s)"
        ),
    )

    @property
    def cert_file(self) -> Path:
        return self.cert_dir / CERT_FILE

    @property
    def key_file(self) -> Path:
        return self.cert_dir / KEY_FILE

    def mutation_config(self) -> MutationConfig:
        return MutationConfig(
            foreign_schedulers=self.foreign_schedulers,
            target_scheduler=self.target_scheduler,
            excluded_namespaces=self.excluded_namespaces,
        )
