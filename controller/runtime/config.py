"""Controller settings: defaults < environment (PHALANX_CONTROLLER_*) < command-line flags."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import ClassVar, Literal

from controller.core import DEFAULT_LEVELS, DEFAULT_TOPOLOGY, messages
from shared.settings import Settings, setting

Topologies = tuple[tuple[str, tuple[str, ...]], ...]


def parse_topologies(levels: str, more: str) -> Topologies:
    """``--topology-levels`` (the default topology, label keys widest first, comma-separated) and
    ``--topologies`` (further ones, ``name=key,key;name=key,...``) as PlannerConfig.topologies."""
    out: list[tuple[str, tuple[str, ...]]] = [(DEFAULT_TOPOLOGY, _keys(levels))]
    for entry in (e.strip() for e in more.split(";")):
        if not entry:
            continue
        name, sep, keys = entry.partition("=")
        name = name.strip()
        if not sep or not name or any(name == seen for seen, _ in out):
            raise ValueError(messages.topologies_malformed(entry))
        out.append((name, _keys(keys)))
    return tuple(out)


def _keys(text: str) -> tuple[str, ...]:
    keys = tuple(k.strip() for k in text.split(",") if k.strip())
    if len(set(keys)) != len(keys):
        raise ValueError(messages.topology_key_twice(text))
    return keys


def pod_name_or_hostname() -> str:
    return os.environ.get("POD_NAME") or socket.gethostname()


def _topologies_parse(value: str) -> str:
    parse_topologies("", value)
    return value


def _levels_parse(value: str) -> str:
    _keys(value)
    return value


@dataclass(frozen=True)
class ControllerSettings(Settings):
    """Phalanx gang controller: admits whole gangs by lifting their pods' scheduling gates."""

    env_prefix: ClassVar[str] = "PHALANX_CONTROLLER_"

    kubeconfig: str | None = setting(
        None, description="kubeconfig path; in-cluster service account when unset"
    )
    namespace: str = setting("phalanx-system", description="where the leader-election Lease lives")
    health_bind_address: str = setting("0.0.0.0", description="address of /healthz, /readyz and /metrics")
    health_port: int = setting(8081, description="port of /healthz, /readyz and /metrics")
    leader_election: bool = setting(
        True, description="elect one leader among replicas (--no-leader-election: off)"
    )
    lease_name: str = setting("phalanx-controller", description="the leader-election Lease")
    identity: str = setting(
        default_factory=pod_name_or_hostname,
        description="this replica's name in the Lease; unique per replica and kept across restarts "
        "(the pod's name), so a restarted leader takes its own lease back at once",
    )
    lease_duration_seconds: float = setting(
        15.0, description="a leader that stops renewing loses the lease after this"
    )
    lease_renew_seconds: float = setting(
        2.0,
        description="how often the leader renews its lease (and retries a failed renewal); several "
        "tries fit in the renew deadline (2/3 of the duration), as client-go's retry period",
    )
    default_schedule_timeout_seconds: float | None = setting(
        None, description="timeout for gangs that set none (PodGroup spec or annotation); unset: wait forever"
    )
    schedule_timeout_action: Literal["report", "release"] = setting(
        "report",
        description="report: PodGroup Failed/SchedulingTimeout but the gang still starts if room appears; "
        "release: also suspend its Jobs / delete its owned pods",
    )
    bind_timeout_seconds: float = setting(
        60.0, description="admitted members not all bound by then are rolled back and re-queued"
    )
    degraded_gang_timeout_seconds: float = setting(
        300.0,
        description="a running gang with fewer than minMember members running (a node drained, a pod "
        "evicted) is re-queued whole after this long; 0: never",
    )
    preemption: bool = setting(
        True, description="whole-gang preemption of lower-priority work (--no-preemption: off)"
    )
    preemption_dry_run: bool = setting(False, description="only report what preemption would evict")
    preemption_min_runtime_seconds: float = setting(
        0.0, description="work running for less than this is never preempted (anti-thrashing)"
    )
    eviction_grace_seconds: int | None = setting(
        None, description="grace period of preemption evictions; unset: each pod's own"
    )
    starvation_age_seconds: float | None = setting(
        None,
        description="a gang waiting longer gets a reservation so smaller gangs cannot starve it; "
        "unset (the default): no reservations",
    )
    topology_levels: str = setting(
        ",".join(DEFAULT_LEVELS),
        description="the default topology: node label keys, widest first, comma-separated; a gang "
        "that fits inside one domain of a level is kept there (the narrowest first); labels no node "
        "carries are skipped",
        check=_levels_parse,
    )
    topologies: str = setting(
        "",
        description="further topologies a gang may name (phalanx.io/topology): "
        "name=key,key,...;name=key,... (widest first)",
        check=_topologies_parse,
    )
    provisioning_requests: Literal["off", "best-effort-atomic", "check-capacity"] = setting(
        "off",
        description="ask the cluster-autoscaler for the nodes of a gang that waits for capacity, whole, "
        "with one ProvisioningRequest (autoscaling.x-k8s.io/v1) of this class: best-effort-atomic "
        "(scale up all of it or nothing) or check-capacity (only book room that exists); off: never",
    )
    provisioning_retry_seconds: float = setting(
        30.0,
        description="a Failed ProvisioningRequest is asked again after this, doubled per failure "
        "up to 10 minutes",
    )
    provisioning_answer_seconds: float = setting(
        300.0,
        description="a gang whose ProvisioningRequest is not answered yet (Requested, Accepted) "
        "waits this long at most for its own nodes before it takes whatever room fits it",
    )
    patch_concurrency: int = setting(64, description="parallel pod patches when a gang's gates are lifted")
    resync_seconds: float = setting(
        30.0, description="a full re-plan at least this often, whatever the watches say"
    )
    log_level: str = setting("INFO", description="DEBUG, INFO, WARNING or ERROR")
    log_json: bool = setting(True, description="JSON log lines (--no-log-json: plain text)")
