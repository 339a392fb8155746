"""Controller settings: environment (PHALANX_CONTROLLER_*) overridden by command-line flags."""

from __future__ import annotations

import os
import socket
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ControllerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="PHALANX_CONTROLLER_")

    kubeconfig: str | None = Field(None, description="kubeconfig path; in-cluster service account when unset")
    namespace: str = Field("phalanx-system", description="where the leader-election Lease lives")
    health_bind_address: str = "0.0.0.0"
    health_port: int = 8081
    leader_election: bool = True
    lease_name: str = "phalanx-controller"
    identity: str = Field(
        default_factory=lambda: os.environ.get("POD_NAME") or socket.gethostname(),
        description="this replica's name in the Lease; unique per replica and kept across restarts "
        "(the pod's name), so a restarted leader takes its own lease back at once",
    )
    lease_duration_seconds: float = 15.0
    lease_renew_seconds: float = 5.0
    default_schedule_timeout_seconds: float | None = Field(
        None, description="timeout for gangs that set none (PodGroup spec or annotation); unset: wait forever"
    )
    schedule_timeout_action: Literal["report", "release"] = Field(
        "report",
        description="report: PodGroup Failed/SchedulingTimeout but the gang still starts if room appears; "
        "release: also suspend its Jobs / delete its owned pods",
    )
    bind_timeout_seconds: float = Field(
        60.0, description="admitted members not all bound by then are rolled back and re-queued"
    )
    degraded_gang_timeout_seconds: float = Field(
        300.0,
        description="a running gang with fewer than minMember members running (a node drained, a pod "
        "evicted) is re-queued whole after this long; 0: never",
    )
    preemption: bool = True
    preemption_dry_run: bool = False
    preemption_min_runtime_seconds: float = 0.0
    eviction_grace_seconds: int | None = None
    starvation_age_seconds: float | None = Field(
        None,
        description="a gang waiting longer gets a reservation so smaller gangs cannot starve it; "
        "unset (the default): no reservations",
    )
    patch_concurrency: int = 64
    resync_seconds: float = 30.0
    log_level: str = "INFO"
    log_json: bool = True
