"""Property tests: whatever shape the object has, ``mutate`` returns ops that apply and settle.

Custom resources (MPIJob) reach a mutating webhook before schema validation, so wrong types in
``spec`` or ``metadata`` are real inputs, not only hypothetical ones.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any
from unittest import mock

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared import constants as c
from shared.workloads import JOB, MPIJOB, POD, STATEFULSET
from webhook.admission import Admitter
from webhook.metrics import WebhookMetrics
from webhook.mutate import MutationConfig, Outcome, mutate
from webhook.podview import pod_review

from .builders import apply_patch, job, mpijob, pod, request, statefulset

CONFIG = MutationConfig()
GVKS = [POD, JOB, STATEFULSET, MPIJOB]
# Keys that steer the mutation, so random trees reach its branches instead of missing them all.
KEYS = [
    "metadata",
    "labels",
    "annotations",
    "name",
    "generateName",
    "namespace",
    "spec",
    "template",
    "schedulingGates",
    "schedulerName",
    "nodeName",
    "workloadRef",
    "podGroup",
    "replicas",
    "parallelism",
    "completions",
    "activeDeadlineSeconds",
    "podManagementPolicy",
    "mpiReplicaSpecs",
    "Launcher",
    "Worker",
    "launcherCreationPolicy",
    "runPolicy",
    c.POD_GROUP_LABEL,
    c.COSCHEDULING_LABEL,
    c.COSCHEDULING_MIN_AVAILABLE_LABEL,
    c.ACS_LABEL,
    c.SCHEDULER_PLUGINS_LABEL,
    c.KAI_ANNOTATION,
    c.VOLCANO_ANNOTATION,
    c.SKIP,
    c.MIN_MEMBER_ANNOTATION,
    c.INFERRED_MIN_MEMBER_ANNOTATION,
    c.PLACEMENT_ANNOTATION,
]
STRINGS = st.sampled_from(["", "pg", "true", "3", "0", "-1", "volcano", "OrderedReady", "a/b~c", "x" * 70])
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | STRINGS
    | st.text(max_size=12)
)
keys = st.sampled_from(KEYS) | st.text(max_size=6)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
    max_leaves=25,
)
valid_objects = st.sampled_from(
    [
        job().parallelism(4).active_deadline(30).scheduler("volcano"),
        job().template_label(c.COSCHEDULING_LABEL, "pg").gate("x/y"),
        statefulset().replicas(3),
        mpijob().workers(4).launcher_policy("WaitForWorkersReady"),
        pod().annotation(c.KAI_ANNOTATION, "pg"),
        pod().workload_ref("w", "g").scheduler("kai-scheduler"),
    ]
)


def _set(doc: dict[str, Any], path: list[str], value: Any) -> None:
    for key in path[:-1]:
        child = doc.get(key)
        if not isinstance(child, dict):
            child = doc[key] = {}
        doc = child
    doc[path[-1]] = value


@st.composite
def corrupted_objects(draw: st.DrawFn) -> dict[str, Any]:
    """A realistic object with a few values anywhere replaced by random JSON."""
    doc: dict[str, Any] = draw(valid_objects).build()
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=7))
        _set(doc, path, draw(json_values))
    return doc


objects = corrupted_objects() | st.dictionaries(keys, json_values, max_size=6)


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


# ---- the pod view (webhook/podview.py): the same answer as from the whole body -----------------

pod_objects = st.sampled_from(
    [
        pod().annotation(c.KAI_ANNOTATION, "pg"),
        pod().label(c.POD_GROUP_LABEL, "pg").gate(c.GATE),
        pod().label(c.COSCHEDULING_LABEL, "pg").label(c.COSCHEDULING_MIN_AVAILABLE_LABEL, "3"),
        pod().workload_ref("w", "g").scheduler("kai-scheduler"),
        pod().scheduler("volcano"),
        pod(),
    ]
).map(lambda b: b.build())


# Fields the pod path reads, set to plausible values: random paths rarely hit them.
POD_FIELDS = st.sampled_from(
    [
        (["spec", "nodeName"], "node-1"),
        (["spec", "schedulerName"], "volcano"),
        (["spec", "schedulingGates"], [{"name": c.GATE}]),
        (["metadata"], {"generateName": "train-", "namespace": "kube-system"}),
        (["metadata", "name"], ""),
        (["metadata", "labels", c.SKIP], "true"),
        (["metadata", "annotations", c.MIN_MEMBER_ANNOTATION], "0"),
        (["metadata", "labels", "leaderworkerset.sigs.k8s.io/name"], "lws"),
        (["metadata", "labels", "leaderworkerset.sigs.k8s.io/group-index"], "1"),
        (["metadata", "annotations", c.INFERRED_MIN_MEMBER_ANNOTATION], "4"),
    ]
)


@st.composite
def corrupted_pods(draw: st.DrawFn) -> dict[str, Any]:
    doc: dict[str, Any] = draw(pod_objects)
    for path, value in draw(st.lists(POD_FIELDS, max_size=3)):
        _set(doc, path, value)
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4))
        _set(doc, path, draw(json_values))
    return doc


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append({k: v for k, v in vars(record).items() if k not in ("created", "msecs",
                             "relativeCreated", "duration_ms")})  # fmt: skip


def _admitted(body: bytes) -> tuple[Any, list[dict[str, Any]]]:
    """The answer and the log records of one admission."""
    records, logger = _Records(), logging.getLogger("phalanx.webhook")
    logger.addHandler(records)
    level = logger.level
    logger.setLevel(logging.DEBUG)  # setLevel, not .level: isEnabledFor caches
    try:
        answer = Admitter(CONFIG, WebhookMetrics()).admit(body, time.perf_counter())
    finally:
        logger.removeHandler(records)
        logger.setLevel(level)
    return answer, records.records


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    obj=corrupted_pods() | objects,
    operation=st.sampled_from(["CREATE", "CREATE", "UPDATE"]),
    namespace=st.sampled_from(["ml", "kube-system", "", ""]),
)
def test_a_pod_admitted_from_the_view_gets_the_answer_of_the_whole_body(
    obj: dict[str, Any], operation: str, namespace: str
) -> None:
    body = orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": request(obj, gvk=POD, operation=operation, namespace=namespace),
        }
    )
    from_view = _admitted(body)
    with mock.patch("webhook.review.pod_review", return_value=None):
        whole = _admitted(body)
    assert from_view == whole  # the answer, and what the admission log says


def test_the_view_reads_a_pod_review_as_the_api_server_writes_it() -> None:
    """Compact JSON, as the API server sends: read by the view (so the property test above compares
    two different paths); indented JSON, or another kind, is read whole."""
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": request(pod().label(c.POD_GROUP_LABEL, "pg").gate(c.GATE))}  # fmt: skip
    view = pod_review(orjson.dumps(review))
    assert view is not None
    assert view["request"]["object"]["metadata"]["labels"] == {c.POD_GROUP_LABEL: "pg"}
    assert "containers" not in view["request"]["object"]["spec"]
    assert pod_review(orjson.dumps(review, option=orjson.OPT_INDENT_2)) is None
    assert pod_review(orjson.dumps({**review, "request": request(job(), gvk=JOB)})) is None
