"""Prometheus metrics of the webhook, in a registry of their own (tests build many apps)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

# Admission is sub-millisecond when healthy; the fine low buckets show regressions long before
# the API server's timeout (10 s) is anywhere near.
DURATION_BUCKETS = (
    0.00025,
    0.0005,
    0.00075,
    0.001,
    0.0015,
    0.002,
    0.003,
    0.004,
    0.005,
    0.0075,
    0.01,
    0.025,
    0.05,
    0.1,
    0.5,
    1.0,
)

OUTCOMES = ("patched", "unchanged", "skipped", "rejected", "error", "bad_request")


class WebhookMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "phalanx_webhook_requests",
            "Admission requests by object kind, operation and outcome.",
            ["kind", "operation", "outcome"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "phalanx_webhook_request_duration_seconds",
            "Time from reading an admission request to having its answer.",
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.patch_operations = Counter(
            "phalanx_webhook_patch_operations",
            "JSONPatch operations returned, by object kind.",
            ["kind"],
            registry=self.registry,
        )
        self._requests: dict[tuple[str, str, str], Any] = {}
        self._patch_operations: dict[str, Any] = {}
        self.certificate_reloads = Counter(
            "phalanx_webhook_certificate_reloads",
            "Serving certificate loads from disk, by result (ok or error).",
            ["result"],
            registry=self.registry,
        )

    def count(self, kind: str, operation: str, outcome: str, patch_operations: int = 0) -> None:
        """Count one admission (label children are cached: ``labels()`` is slow on the hot path)."""
        key = (kind, operation, outcome)
        child = self._requests.get(key)
        if child is None:
            child = self._requests[key] = self.requests.labels(kind, operation, outcome)
        child.inc()
        if patch_operations:
            ops = self._patch_operations.get(kind)
            if ops is None:
                ops = self._patch_operations[kind] = self.patch_operations.labels(kind)
            ops.inc(patch_operations)

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
