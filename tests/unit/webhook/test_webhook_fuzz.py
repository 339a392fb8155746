"""Property tests: whatever shape the object has, ``mutate`` returns ops that apply and settle, and
any body gets an answer (strategies in ``strategies.py``)."""

from __future__ import annotations

import copy
import time
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.admission import Admitter
from webhook.metrics import WebhookMetrics
from webhook.mutate import MutationConfig, Outcome, mutate

from .builders import apply_patch, request
from .strategies import GVKS, json_values, objects

CONFIG = MutationConfig()


def check_mutation(req: dict[str, Any]) -> None:
    before = copy.deepcopy(req)
    mutation = mutate(req, CONFIG)
    assert req == before, "mutate changed its input"
    orjson.dumps(mutation.ops)
    assert all(w.startswith("phalanx: ") for w in mutation.warnings)
    if mutation.outcome is not Outcome.PATCHED:
        assert mutation.ops == []
        return
    patched = apply_patch(req["object"], mutation.ops)
    again = mutate({**req, "object": patched}, CONFIG)
    assert again.ops == [], "mutation is not idempotent"


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(obj=objects, gvk=st.sampled_from(GVKS))
def test_mutate_any_object_shape(obj: dict[str, Any], gvk: tuple[str, str, str]) -> None:
    check_mutation(request(obj, gvk=gvk))


@settings(max_examples=200, deadline=None)
@given(
    req=st.dictionaries(
        st.sampled_from(["kind", "operation", "namespace", "object", "subResource"]), json_values
    )
)
def test_mutate_any_request_shape(req: dict[str, Any]) -> None:
    mutation = mutate(req, CONFIG)
    assert mutation.ops == [] or isinstance(req.get("object"), dict)


@settings(max_examples=300, deadline=None)
@given(body=st.binary(max_size=300) | json_values.map(orjson.dumps) | objects.map(orjson.dumps))
def test_admit_any_body_answers_200_or_400(body: bytes) -> None:
    answer = Admitter(CONFIG, WebhookMetrics()).admit(body, time.perf_counter())
    assert answer.status in (200, 400)
    if answer.status == 200:
        assert orjson.loads(answer.body)["kind"] == "AdmissionReview"


@settings(max_examples=200, deadline=None)
@given(obj=objects, gvk=st.sampled_from(GVKS), uid=st.text(min_size=1, max_size=40))
def test_admit_any_review_echoes_and_answers(
    obj: dict[str, Any], gvk: tuple[str, str, str], uid: str
) -> None:
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request(obj, gvk=gvk, uid=uid),
    }
    answer = Admitter(CONFIG, WebhookMetrics()).admit(orjson.dumps(body), time.perf_counter())
    assert answer.status == 200
    response = orjson.loads(answer.body)
    assert (response["apiVersion"], response["kind"], response["response"]["uid"]) == (
        "admission.k8s.io/v1",
        "AdmissionReview",
        uid,
    )
    assert response["response"].get("status", {}).get("code") != 500, "internal error"
