"""The webhook's own counter and histogram expose what prometheus_client's would."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram

from webhook.metrics import DURATION_BUCKETS, LoopHistogram, WebhookMetrics


def test_a_value_on_a_bucket_bound_counts_in_that_bucket_as_prometheus_client_does() -> None:
    ours, reference = CollectorRegistry(), CollectorRegistry()
    mine = LoopHistogram("d", "durations", DURATION_BUCKETS, ours)
    theirs = Histogram("d", "durations", buckets=DURATION_BUCKETS, registry=reference)
    for value in (0.0, 0.00025, 0.0002500001, 0.001, 0.0042, 1.0, 1.5, 30.0):
        mine.observe(value)
        theirs.observe(value)
    for le in ("0.00025", "0.0005", "0.001", "0.005", "1.0", "+Inf"):
        assert ours.get_sample_value("d_bucket", {"le": le}) == reference.get_sample_value(
            "d_bucket", {"le": le}
        ), le
    assert ours.get_sample_value("d_bucket", {"le": "0.00025"}) == 2
    assert ours.get_sample_value("d_count") == 8
    assert ours.get_sample_value("d_sum") == reference.get_sample_value("d_sum")
    assert ours.get_sample_value("d_created") is not None


def test_counts_are_exposed_with_their_labels_and_created_time() -> None:
    metrics = WebhookMetrics()
    metrics.count("Job", "CREATE", "patched", 3)
    metrics.count("Job", "CREATE", "patched", 2)
    metrics.count("Pod", "CREATE", "skipped")
    text = metrics.render()[0].decode()
    assert 'phalanx_webhook_requests_total{kind="Job",operation="CREATE",outcome="patched"} 2.0' in text
    assert 'phalanx_webhook_requests_total{kind="Pod",operation="CREATE",outcome="skipped"} 1.0' in text
    assert 'phalanx_webhook_requests_created{kind="Job",operation="CREATE",outcome="patched"}' in text
    assert 'phalanx_webhook_patch_operations_total{kind="Job"} 5.0' in text
    assert 'kind="Pod"' not in text.split("phalanx_webhook_patch_operations")[1]  # no operations: no series
    assert "# TYPE phalanx_webhook_requests_total counter" in text
    assert "# TYPE phalanx_webhook_request_duration_seconds histogram" in text
