"""Prometheus metrics of the webhook, in a registry of their own (tests build many apps).

The per-admission metrics are counted in plain numbers and turned into metric families only when
collected (a scrape): prometheus_client's own counters and histograms take a lock and run checks
on every increment, which is thread safety this process does not need (one event loop counts and
serves ``/metrics``) and cost CPU on every request. What is exposed is the same.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from shared.health import register_process_metrics

# Admission is sub-millisecond when healthy; the fine low buckets show regressions long before
# the API server's timeout (the webhook configuration's timeoutSeconds, 5 s) is anywhere near.
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


class LoopCounter(Collector):
    """A labelled counter for one event loop: ``inc`` adds to a dict entry, nothing more."""

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        # Named as on prometheus_client's own metrics: docs/refgen.py and the monitoring tests
        # read the label names of a registered collector from it.
        self._labelnames = tuple(labelnames)
        self.values: dict[tuple[str, ...], float] = {}
        self._created: dict[tuple[str, ...], float] = {}
        registry.register(self)

    def inc(self, labels: tuple[str, ...], amount: float = 1) -> None:
        value = self.values.get(labels)
        if value is None:
            self._created[labels] = time.time()
            value = 0
        self.values[labels] = value + amount

    def describe(self) -> Iterable[Metric]:
        return [CounterMetricFamily(self.name, self.documentation, labels=self._labelnames)]

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self._labelnames)
        for labels, value in self.values.items():
            family.add_metric(labels, value, created=self._created[labels])
        yield family


class LoopHistogram(Collector):
    """An unlabelled histogram for one event loop: ``observe`` adds to one bucket and the sum."""

    def __init__(
        self, name: str, documentation: str, buckets: Sequence[float], registry: CollectorRegistry
    ) -> None:
        self.name = name
        self.documentation = documentation
        self._labelnames: tuple[str, ...] = ()  # as on LoopCounter
        self._bounds = tuple(buckets)
        # The "le" label values, spelled as prometheus_client spells them ("+Inf" last).
        self._le = [floatToGoString(b) for b in (*self._bounds, float("inf"))]  # type: ignore[no-untyped-call]
        self._counts = [0] * (len(self._bounds) + 1)  # the last one: above every bound (+Inf)
        self._sum = 0.0
        self._created = time.time()
        registry.register(self)

    def observe(self, value: float) -> None:
        # Bucket i counts bounds[i-1] < value <= bounds[i]: bisect_left finds that i.
        self._counts[bisect_left(self._bounds, value)] += 1
        self._sum += value

    def describe(self) -> Iterable[Metric]:
        return [HistogramMetricFamily(self.name, self.documentation)]

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation)
        cumulative, buckets = 0.0, []
        for le, count in zip(self._le, self._counts, strict=True):
            cumulative += count
            buckets.append((le, cumulative))
        family.add_metric([], buckets, self._sum)
        family.samples.append(Sample(self.name + "_created", {}, self._created))
        yield family


class WebhookMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        register_process_metrics(self.registry)
        self.requests = LoopCounter(
            "phalanx_webhook_requests",
            "Admission requests by object kind, operation and outcome.",
            ["kind", "operation", "outcome"],
            registry=self.registry,
        )
        self.duration = LoopHistogram(
            "phalanx_webhook_request_duration_seconds",
            "Time from reading an admission request to having its answer.",
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.patch_operations = LoopCounter(
            "phalanx_webhook_patch_operations",
            "JSONPatch operations returned, by object kind.",
            ["kind"],
            registry=self.registry,
        )
        self.connections_closed = LoopCounter(
            "phalanx_webhook_connections_closed",
            "Connections the webhook closed itself, by reason: displaced_while_idle (a new one came "
            "beyond --max-connections), over_limit (a new one came beyond it with none idle: that "
            "request failed), header_timeout.",
            ["reason"],
            registry=self.registry,
        )
        # Rare (a reload every few weeks): prometheus_client's own counter.
        self.certificate_reloads = Counter(
            "phalanx_webhook_certificate_reloads",
            "Serving certificate loads from disk, by result (ok or error).",
            ["result"],
            registry=self.registry,
        )
        self.certificate_expiry = Gauge(
            "phalanx_webhook_certificate_expiry_timestamp_seconds",
            "When the serving certificate in use expires (notAfter, Unix seconds); 0 before one is loaded.",
            registry=self.registry,
        )

    def count(self, kind: str, operation: str, outcome: str, patch_operations: int = 0) -> None:
        """Count one admission."""
        self.requests.inc((kind, operation, outcome))
        if patch_operations:
            self.patch_operations.inc((kind,), patch_operations)

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
