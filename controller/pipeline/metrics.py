"""Prometheus metrics of the controller (own registry, so tests can build many controllers).

Gang metrics are named ``phalanx_gang_*`` (the webhook's admissions are ``phalanx_webhook_*``).
Labels stay bounded: ``queue`` is a Queue that exists (else empty), ``reason`` one of a fixed set;
never a gang's or a pod's name.
"""

from __future__ import annotations

from collections.abc import Collection

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from shared.health import register_process_metrics

_FAST = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SLOW = (0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 24 * 3600)


def queue_label(queue: str | None, known: Collection[str]) -> str:
    """The ``queue`` label of a gang: its queue if that Queue exists, else empty. A name a user typed
    that no Queue carries is not a label value, so the series stay as many as the Queues."""
    return queue if queue is not None and queue in known else ""


class ControllerMetrics:
    def __init__(self) -> None:
        # One declaration per metric, kept together as a table (docs/reference.md is generated from
        # it): long, but there is no logic here to split.
        self.registry = CollectorRegistry()
        registry = self.registry
        register_process_metrics(registry)
        self.leader = Gauge(
            "phalanx_controller_leader",
            "1 while this replica holds the leader lease (only the leader admits gangs), else 0",
            registry=registry,
        )
        self.gang_wait = Histogram(
            "phalanx_gang_wait_seconds",
            "From a gang's first member to its admission, by queue (admitted gangs only)",
            ["queue"],
            buckets=_SLOW,
            registry=registry,
        )
        self.oldest_pending = Gauge(
            "phalanx_gang_oldest_pending_seconds",
            "Age of the longest-waiting gang not admitted yet (phase Pending), by queue",
            ["queue"],
            registry=registry,
        )
        self.provisioning = Counter(
            "phalanx_provisioning_requests_total",
            "ProvisioningRequests (--provisioning-requests) by outcome: requested (created), provisioned, "
            "not_found (the autoscaler found no room yet), failed, expired (the booking ended first)",
            ["outcome"],
            registry=registry,
        )
        self.provisioning_latency = Histogram(
            "phalanx_provisioning_seconds",
            "From a ProvisioningRequest's creation to its Provisioned condition",
            buckets=_SLOW,
            registry=registry,
        )
        self.admission_latency = Histogram(
            "phalanx_gang_admission_latency_seconds",
            "From the admission decision to the last gate lifted",
            buckets=_FAST,
            registry=registry,
        )
        self.gate_spread = Histogram(
            "phalanx_gang_gate_lift_spread_seconds",
            "Between the first and the last gate removal of one admission",
            buckets=_FAST,
            registry=registry,
        )
        self.pending = Gauge(
            "phalanx_gang_pending",
            "Gangs not admitted, by reason and queue",
            ["reason", "queue"],
            registry=registry,
        )
        self.admissions = Counter("phalanx_gang_admissions_total", "Gangs admitted", registry=registry)
        self.rollbacks = Counter(
            "phalanx_gang_rollbacks_total",
            "Admissions rolled back, by reason (bind_timeout, degraded)",
            ["reason"],
            registry=registry,
        )
        self.timeouts = Counter(
            "phalanx_gang_schedule_timeouts_total",
            "Gangs that hit their schedule timeout, by queue",
            ["queue"],
            registry=registry,
        )
        self.reconcile_errors = Counter(
            "phalanx_reconcile_errors_total", "Failed reconcile passes", registry=registry
        )
        self.queue_depth = Gauge(
            "phalanx_workqueue_depth", "Keys waiting in the work queue", registry=registry
        )
        self.pass_duration = Histogram(
            "phalanx_planning_pass_seconds",
            "One planning pass (snapshot + plan)",
            buckets=_FAST,
            registry=registry,
        )
        self.preemptions = Counter(
            "phalanx_gang_preemptions_total", "Gangs or pods evicted as victims", registry=registry
        )
        self.preempted_gpu_seconds = Counter(
            "phalanx_gang_preempted_gpu_seconds_total",
            "GPU-seconds of work lost to preemption (DRA devices counted as GPUs included)",
            registry=registry,
        )
        # A preemption's cost: GPUs evicted per GPU gained is the ratio of the two.
        self.preemption_gpus_evicted = Counter(
            "phalanx_gang_preemption_gpus_evicted_total",
            "GPUs (or DRA devices counted as GPUs) that preemption victims held when evicted",
            registry=registry,
        )
        self.preemption_gpus_gained = Counter(
            "phalanx_gang_preemption_gpus_gained_total",
            "GPUs (or DRA devices counted as GPUs) the preempting gangs were given by those preemptions",
            registry=registry,
        )
        self.status_writes = Counter(
            "phalanx_status_writes_total", "PodGroup status updates", registry=registry
        )
        self.gate_bypassed = Counter(
            "phalanx_gate_bypassed_pods_total",
            "Gang members found bound without Phalanx's admission (gate removed by someone else)",
            registry=registry,
        )
        # Queues (docs/user-guide.md "Queues"): per queue, subtree included; resource as in the pod
        # spec, in its base unit (cpu in cores, memory in bytes).
        by_resource = ["queue", "resource"]
        self.queue_allocated = Gauge(
            "phalanx_queue_allocated", "Held by the queue's admitted gangs", by_resource, registry=registry
        )
        self.queue_requested = Gauge(
            "phalanx_queue_requested",
            "Allocated plus what its waiting gangs ask for",
            by_resource,
            registry=registry,
        )
        self.queue_fair_share = Gauge(
            "phalanx_queue_fair_share", "Current fair share", by_resource, registry=registry
        )
        self.queue_quota = Gauge("phalanx_queue_quota", "Guaranteed amount", by_resource, registry=registry)
        self.queue_gangs = Gauge(
            "phalanx_queue_gangs",
            "Gangs of the queue by state (admitted, waiting)",
            ["queue", "state"],
            registry=registry,
        )
        self.queue_reclaims = Counter(
            "phalanx_queue_reclaims_total",
            "Reclaims that took borrowed room back from the queue",
            ["queue"],
            registry=registry,
        )
