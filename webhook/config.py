"""Webhook settings: defaults < ``PHALANX_WEBHOOK_*`` environment < command-line flags."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from shared import constants as c
from webhook.mutate import DEFAULT_EXCLUDED_NAMESPACES, MutationConfig

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"

# NoDecode: lists come as "a,b,c" (env or flag), not as JSON.
NameList = Annotated[frozenset[str], NoDecode]


class Names(frozenset[str]):
    """A default name list, shown by ``--help`` as it is written on the command line."""

    def __str__(self) -> str:
        return ",".join(sorted(self))


class WebhookSettings(BaseSettings):
    """Phalanx mutating admission webhook: gang scheduling gates on pods and workloads."""

    model_config = SettingsConfigDict(env_prefix="PHALANX_WEBHOOK_", frozen=True)

    bind_address: str = Field(
        "0.0.0.0", description="address of both ports; in a cluster the pod IP must be reachable"
    )
    port: int = Field(default=9443, ge=0, le=65535, description="TLS admission port")
    health_port: int = Field(default=8080, ge=0, le=65535, description="plain HTTP /healthz /readyz /metrics")
    cert_dir: Path = Field(
        Path("/etc/phalanx/webhook/certs"), description="where tls.crt and tls.key are read"
    )
    cert_reload_seconds: float = Field(
        default=5.0, gt=0, description="how often a renewed certificate is picked up"
    )
    max_body_bytes: int = Field(
        default=3 * 1024 * 1024,
        ge=1024,
        description="larger requests get HTTP 413 (the API server's own request limit: no review it "
        "sends is larger)",
    )
    body_read_timeout_seconds: float = Field(
        default=2.0,
        gt=0,
        description="a body must arrive whole within this time; stalled uploads get HTTP 408",
    )
    max_concurrent_large_bodies: int = Field(
        default=8, ge=1, description="large bodies (over 64 KiB, or of unknown length) read at once"
    )
    body_slot_wait_seconds: float = Field(
        default=1.0, ge=0, description="how long another large body waits for a slot, then gets HTTP 503"
    )
    foreign_schedulers: NameList = Field(
        Names(c.DEFAULT_FOREIGN_GANG_SCHEDULERS),
        description="schedulerName values of other gang schedulers, rewritten to --target-scheduler "
        "(comma list)",
    )
    target_scheduler: str = Field(c.DEFAULT_SCHEDULER, description="the scheduler gangs are handed to")
    excluded_namespaces: NameList = Field(
        Names(DEFAULT_EXCLUDED_NAMESPACES),
        description="never mutated, whatever their labels say (comma list)",
    )
    event_loop: Literal["auto", "uvloop", "asyncio"] = Field(
        "auto",
        description="uvloop (C event loop and TLS: about a tenth more admissions per CPU second), "
        "asyncio, or auto: uvloop when installed",
    )
    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")
    log_json: bool = Field(True, description="JSON log lines (--no-log-json: plain text)")
    shutdown_delay_seconds: float = Field(
        default=2.0,
        ge=0,
        description="on SIGTERM, keep serving (unready) this long while the endpoint removal propagates",
    )
    shutdown_timeout_seconds: float = Field(
        default=10.0,
        ge=0,
        description="then wait at most this long for in-flight requests (the API server gives up on "
        "one after the webhook's timeoutSeconds, 5 s as deployed)",
    )

    @field_validator("foreign_schedulers", "excluded_namespaces", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        if isinstance(value, str):
            return frozenset(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        level = value.upper()
        if level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ValueError(f"unknown log level {value!r}")
        return level

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
