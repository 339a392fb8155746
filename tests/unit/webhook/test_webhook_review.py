"""AdmissionReview parsing and answers, and the body -> answer step with its metrics."""

from __future__ import annotations

import base64
import time
from typing import Any

import orjson
import pytest

from shared import constants as c
from tests.builders import job, pod
from webhook.admission import Admitter
from webhook.metrics import WebhookMetrics
from webhook.mutate import MutationConfig
from webhook.review import ReviewError, encode_response, parse_review

from .builders import request, review


def _without(key: str) -> dict[str, Any]:
    """A complete AdmissionRequest lacking ``key``."""
    full = request(pod())
    return {k: v for k, v in full.items() if k != key}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "not valid JSON"),
        (b"{", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        # Read by the view (webhook/view.py) first: a pod's review and a Job's, cut short.
        (b'{"request":{"kind":{"group":"","version":"v1","kind":"Pod"},', "not valid JSON"),
        (orjson.dumps(review(request(pod())))[:-2], "not valid JSON"),
        (orjson.dumps(review(request(job())))[:-2], "not valid JSON"),
        (b"[]", "not a JSON object"),
        (b'{"kind": "Pod"}', "kind must be AdmissionReview"),
        (b'{"kind": "AdmissionReview", "apiVersion": "v1"}', "apiVersion must be"),
        (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1"}', "no request"),
        (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {}}', "uid"),
        (b'{"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {"uid": 7}}', "uid"),
        *(
            (orjson.dumps(review(_without(key))), message)
            for key, message in (
                ("operation", "request.operation must be"),
                ("kind", "request.kind must be"),
                ("object", "request.object must be"),
            )
        ),
        (orjson.dumps(review({**_without("object"), "operation": "PATCH"})), "request.operation must be"),
        (orjson.dumps(review({**_without("kind"), "kind": "Pod"})), "request.kind must be"),
        (orjson.dumps(review({**_without("object"), "object": None})), "request.object must be"),
        (orjson.dumps(review({**_without("object"), "operation": "DELETE"})), "request.oldObject must be"),
    ],
)
def test_parse_refuses_what_is_not_a_review(body: bytes, message: str) -> None:
    with pytest.raises(ReviewError, match=message):
        parse_review(body)


def test_parse_takes_a_body_read_in_pieces() -> None:
    """A body that arrived in several reads is a bytearray (webhook/body.py)."""
    parsed = parse_review(bytearray(orjson.dumps(review(request(pod(), uid="u")))))
    assert (parsed.uid, parsed.operation, parsed.gvk) == ("u", "CREATE", ("", "v1", "Pod"))


def test_parse_accepts_v1beta1_and_echoes_it() -> None:
    body = {
        "apiVersion": "admission.k8s.io/v1beta1",
        "kind": "AdmissionReview",
        "request": request(pod(), uid="u"),
    }
    parsed = parse_review(orjson.dumps(body))
    answer = orjson.loads(encode_response(parsed))
    assert answer == {
        "apiVersion": "admission.k8s.io/v1beta1",
        "kind": "AdmissionReview",
        "response": {"uid": "u", "allowed": True},
    }


def test_encode_patch_warnings_and_status() -> None:
    parsed = parse_review(orjson.dumps(review(request(pod(), uid="u"))))
    ops = [{"op": "add", "path": "/a", "value": 1}]
    answer = orjson.loads(encode_response(parsed, ops=ops, warnings=["phalanx: w"]))["response"]
    assert answer["patchType"] == "JSONPatch"
    assert orjson.loads(base64.b64decode(answer["patch"])) == ops
    assert answer["warnings"] == ["phalanx: w"]
    denied = orjson.loads(encode_response(parsed, allowed=False, message="no", code=403))["response"]
    assert denied == {"uid": "u", "allowed": False, "status": {"message": "no", "code": 403}}


def admit(body: Any, metrics: WebhookMetrics | None = None) -> tuple[int, Any]:
    admitter = Admitter(MutationConfig(), metrics or WebhookMetrics())
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    answer = admitter.admit(raw, time.perf_counter())
    if answer.content_type == "application/json":
        return answer.status, orjson.loads(answer.body)
    return answer.status, answer.body.decode()


def sample(metrics: WebhookMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return value or 0.0


def test_admit_patches_and_counts() -> None:
    metrics = WebhookMetrics()
    status, answer = admit(review(request(job().parallelism(2))), metrics)
    assert status == 200
    response = answer["response"]
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    assert response["warnings"]
    assert (
        sample(metrics, "phalanx_webhook_requests_total", kind="Job", operation="CREATE", outcome="patched")
        == 1
    )
    assert (
        sample(metrics, "phalanx_webhook_patch_operations_total", kind="Job") == 5
    )  # + podFailurePolicy, podReplacementPolicy
    assert sample(metrics, "phalanx_webhook_request_duration_seconds_count") == 1


def test_admit_rejects_with_403_status() -> None:
    metrics = WebhookMetrics()
    _, answer = admit(review(request(job().annotation(c.MIN_MEMBER_ANNOTATION, "x"))), metrics)
    assert answer["response"]["allowed"] is False
    assert answer["response"]["status"]["code"] == 403
    assert answer["response"]["status"]["message"].startswith("phalanx: annotation phalanx.io/min-member")
    assert (
        sample(metrics, "phalanx_webhook_requests_total", kind="Job", operation="CREATE", outcome="rejected")
        == 1
    )


def test_admit_bad_body_is_400_plain_text() -> None:
    metrics = WebhookMetrics()
    status, text = admit(b"not json", metrics)
    assert status == 400
    assert text.startswith("phalanx: body is not valid JSON")
    assert (
        sample(
            metrics,
            "phalanx_webhook_requests_total",
            kind="unknown",
            operation="unknown",
            outcome="bad_request",
        )
        == 1
    )


def test_unknown_kinds_share_one_label_and_unknown_operations_are_400() -> None:
    metrics = WebhookMetrics()
    admit(review(request(pod(), gvk=("x", "v1", "Gadget"), operation="CONNECT")), metrics)
    assert (
        sample(
            metrics, "phalanx_webhook_requests_total", kind="other", operation="CONNECT", outcome="skipped"
        )
        == 1
    )
    status, answer = admit(review(request(pod(), operation="EXPLODE")), metrics)
    assert status == 400
    assert "request.operation must be one of" in answer


def test_internal_error_refuses_and_is_counted(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("webhook.admission.mutate_request", broken)
    metrics = WebhookMetrics()
    status, answer = admit(review(request(job())), metrics)
    assert status == 200
    assert answer["response"]["uid"] == "6a1d4b8e-0000-4000-8000-000000000001"
    assert answer["response"]["allowed"] is False
    assert answer["response"]["status"]["message"] == "phalanx internal error: RuntimeError: boom"
    assert (
        sample(metrics, "phalanx_webhook_requests_total", kind="Job", operation="CREATE", outcome="error")
        == 1
    )
    assert any(record.exc_info for record in caplog.records)


def test_unreadable_review_is_a_400_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(body: bytes) -> None:
        raise RecursionError("deep")

    monkeypatch.setattr("webhook.admission.parse_review", broken)
    status, text = admit(review(request(job())))
    assert (status, text) == (400, "phalanx: could not read the AdmissionReview (RecursionError)\n")


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (("apiVersion",), "apiVersion must be one of"),
        (("kind",), "kind must be AdmissionReview"),
        (("request", "operation"), "request.operation must be one of"),
        (("request", "uid"), "request.uid must be a non-empty string"),
        (("request", "kind"), "request.kind must be an object"),
        (("request", "kind", "kind"), "request.kind must be an object"),
    ],
)
@pytest.mark.parametrize("hostile", [["CREATE", "secret-marker"], {"secret-marker": "CREATE"}])
def test_a_list_or_object_where_a_name_belongs_is_one_warning_and_a_400(
    field: tuple[str, ...], message: str, hostile: object, caplog: pytest.LogCaptureFixture
) -> None:
    doc = review(request(pod()))
    parent = doc
    for key in field[:-1]:
        parent = parent[key]
    parent[field[-1]] = hostile
    with caplog.at_level("DEBUG", logger="phalanx.webhook"):
        status, text = admit(doc)
    assert status == 400
    assert message in text
    assert [(r.levelname, r.getMessage(), r.exc_info) for r in caplog.records] == [
        ("WARNING", "bad admission request", None)
    ]
    assert "secret-marker" not in caplog.text + str(caplog.records[0].__dict__)
