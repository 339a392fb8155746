"""Webhook settings: defaults < ``PHALANX_WEBHOOK_*`` environment < command-line flags."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from shared import constants as c
from webhook.mutate import DEFAULT_EXCLUDED_NAMESPACES, MutationConfig

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"

# NoDecode: lists come as "a,b,c" (env or flag), not as JSON.
NameList = Annotated[frozenset[str], NoDecode]


class WebhookSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PHALANX_WEBHOOK_", frozen=True)

    # In cluster the pod IP must be reachable; locally pass --bind-address 127.0.0.1.
    bind_address: str = "0.0.0.0"
    port: int = Field(default=9443, ge=0, le=65535, description="TLS admission port")
    health_port: int = Field(default=8080, ge=0, le=65535, description="plain HTTP /healthz /readyz /metrics")
    cert_dir: Path = Path("/etc/phalanx/webhook/certs")
    cert_reload_seconds: float = Field(default=5.0, gt=0)
    # The API server's own request limit (3 MiB): no review it sends is larger.
    max_body_bytes: int = Field(default=3 * 1024 * 1024, ge=1024)
    # A body must arrive whole within this time; stalled uploads are cut (HTTP 408).
    body_read_timeout_seconds: float = Field(default=2.0, gt=0)
    # Large bodies (over 64 KiB, or of unknown length) read at once; another waits, then gets 503.
    max_concurrent_large_bodies: int = Field(default=8, ge=1)
    body_slot_wait_seconds: float = Field(default=1.0, ge=0)
    foreign_schedulers: NameList = frozenset(c.DEFAULT_FOREIGN_GANG_SCHEDULERS)
    target_scheduler: str = c.DEFAULT_SCHEDULER
    excluded_namespaces: NameList = DEFAULT_EXCLUDED_NAMESPACES
    log_level: str = "INFO"
    log_json: bool = True
    # On SIGTERM: keep serving (unready) this long while the endpoint removal propagates...
    shutdown_delay_seconds: float = Field(default=2.0, ge=0)
    # ...then wait at most this long for in-flight requests (the API server's timeout is 10 s).
    shutdown_timeout_seconds: float = Field(default=10.0, ge=0)

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
