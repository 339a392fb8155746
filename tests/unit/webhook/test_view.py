"""The view (webhook/view.py): a pod, Job or MPIJob admitted from it is admitted as from the whole
body, because the view keeps every field the admission reads.

Two checks, on the same random objects: the admission of each, run on the whole body with every
read recorded, reads nothing the view leaves out; and the answer and log records from the view
equal those from the whole body.
"""

from __future__ import annotations

import logging
import time
from typing import Any, TypedDict, get_type_hints
from unittest import mock

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared import constants as c
from shared.kinds import JOB, MPIJOB, POD, STATEFULSET
from shared.workloads import GVK
from tests.builders import job, mpijob, pod
from webhook import view
from webhook.admission import Admitter, _log
from webhook.metrics import WebhookMetrics
from webhook.mutate import MutationConfig, mutate_request
from webhook.review import Review, _check_request
from webhook.traps import KUEUE_QUEUE_LABEL

from .builders import request
from .strategies import KEYS, json_values, objects, set_path

CONFIG = MutationConfig()
VIEWED = [POD, JOB, MPIJOB]

# ---- objects: realistic ones, with the fields the admission reads set to plausible values ---------

OWNER = [{"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "name": "t", "controller": True}]
FAILURE_POLICY = {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}

REALISTIC: dict[GVK, list[Any]] = {
    POD: [
        pod().annotation(c.KAI_ANNOTATION, "pg"),
        pod().label(c.POD_GROUP_LABEL, "pg").gate(c.GATE),
        pod().label(c.COSCHEDULING_LABEL, "pg").label(c.COSCHEDULING_MIN_AVAILABLE_LABEL, "3"),
        pod().workload_ref("w", "g").scheduler("kai-scheduler"),
        pod().scheduling_group("pg"),
        pod().scheduler("volcano"),
        pod(),
    ],
    JOB: [
        job().parallelism(4).completions(8).active_deadline(30).scheduler("volcano"),
        job().template_label(c.COSCHEDULING_LABEL, "pg").gate("x/y"),
        job().failure_policy(FAILURE_POLICY).template_label(c.POD_GROUP_LABEL, "pg").gate(c.GATE),
        job().failure_policy({"rules": [{"action": "FailJob", "onExitCodes": {"values": [1]}}]}),
        job().label(KUEUE_QUEUE_LABEL, "team-a").annotation(c.MIN_MEMBER_ANNOTATION, "2"),
        job(),
    ],
    MPIJOB: [
        mpijob().workers(4).launcher_policy("WaitForWorkersReady"),
        mpijob().workers(8).run_policy_deadline(600).worker_label(c.POD_GROUP_LABEL, "pg"),
        mpijob().launchers(None).workers(None).scheduler("volcano"),
        mpijob().label(KUEUE_QUEUE_LABEL, "q").annotation(c.SCHEDULE_TIMEOUT_ANNOTATION, "60"),
    ],
}

# (path, value) pairs the admission of each kind reads: random paths rarely hit them.
_POD_META = [
    (["metadata"], {"generateName": "train-", "namespace": "kube-system"}),
    (["metadata", "name"], ""),
    (["metadata", "labels", c.SKIP], "true"),
    (["metadata", "annotations", c.MIN_MEMBER_ANNOTATION], "0"),
    (["metadata", "annotations", c.INFERRED_MIN_MEMBER_ANNOTATION], "4"),
    (["metadata", "ownerReferences"], OWNER),
    (["metadata", "labels", KUEUE_QUEUE_LABEL], "q"),
]
_TEMPLATE_FIELDS = [
    (["metadata", "labels", c.POD_GROUP_LABEL], "pg"),
    (["metadata", "labels", c.COSCHEDULING_MIN_AVAILABLE_LABEL], "3"),
    (["metadata", "annotations", c.INFERRED_MIN_MEMBER_ANNOTATION], "9"),
    (["metadata", "annotations", c.PLACEMENT_ANNOTATION], "bogus"),
    (["metadata", "labels", c.SKIP], "true"),
    (["metadata"], None),
    (["spec", "schedulingGates"], [{"name": c.GATE}]),
    (["spec", "schedulerName"], "volcano"),
    (["spec", "restartPolicy"], "OnFailure"),
    (["spec", "workloadRef"], {"name": "w", "podGroup": "g"}),
    (["spec", "schedulingGroup"], {"podGroupName": "pg"}),
]
FIELDS: dict[GVK, list[tuple[list[str], Any]]] = {
    POD: [
        *_POD_META,
        (["spec", "nodeName"], "node-1"),
        (["spec", "schedulerName"], "volcano"),
        (["spec", "schedulingGates"], [{"name": c.GATE}]),
        (["metadata", "labels", "leaderworkerset.sigs.k8s.io/name"], "lws"),
        (["metadata", "labels", "leaderworkerset.sigs.k8s.io/group-index"], "1"),
    ],
    JOB: [
        *_POD_META,
        (["spec", "podFailurePolicy"], FAILURE_POLICY),
        (["spec", "podFailurePolicy", "rules"], [{"action": "Ignore"}, "x"]),
        (["spec", "podReplacementPolicy"], "TerminatingOrFailed"),
        (["spec", "suspend"], True),
        (["spec", "completions"], 2),
        *((["spec", "template", *path], value) for path, value in _TEMPLATE_FIELDS),
    ],
    MPIJOB: [
        *_POD_META,
        (["spec", "runPolicy", "suspend"], True),
        (["spec", "runPolicy", "activeDeadlineSeconds"], 5),
        (["spec", "launcherCreationPolicy"], "WaitForWorkersReady"),
        (["spec", "mpiReplicaSpecs", "Launcher", "replicas"], 0),
        *((["spec", "mpiReplicaSpecs", "Worker", "template", *path], v) for path, v in _TEMPLATE_FIELDS),
        *((["spec", "mpiReplicaSpecs", "Launcher", "template", *path], v) for path, v in _TEMPLATE_FIELDS),
    ],
}


@st.composite
def viewed_objects(draw: st.DrawFn, gvk: GVK) -> dict[str, Any]:
    doc: dict[str, Any] = draw(st.sampled_from(REALISTIC[gvk])).build()
    for path, value in draw(st.lists(st.sampled_from(FIELDS[gvk]), max_size=4)):
        set_path(doc, path, value)
    for _ in range(draw(st.integers(0, 3))):
        set_path(doc, draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=5)), draw(json_values))
    return doc


# ---- what the admission reads, recorded on the whole body -------------------------------------

Path = tuple[str, ...]
ITEM = "[]"  # a path step into every element of a list


class Reads:
    def __init__(self) -> None:
        self.keys: set[Path] = set()  # a key looked up (present or not)
        self.whole: set[Path] = set()  # an object read as a whole (iterated, compared, copied)


def recording(value: Any, path: Path, reads: Reads) -> Any:
    if isinstance(value, dict):
        return _Dict({k: recording(v, (*path, k), reads) for k, v in value.items()}, path, reads)
    if isinstance(value, list):
        return [recording(v, (*path, ITEM), reads) for v in value]
    return value


class _Dict(dict[str, Any]):  # noqa: PLW1641  # unhashable, as dict is
    """A JSON object that records each read: lookups by key, and reads of the whole object."""

    def __init__(self, items: dict[str, Any], path: Path, reads: Reads) -> None:
        super().__init__(items)
        self._path, self._reads = path, reads

    def _key(self, key: object) -> None:
        self._reads.keys.add((*self._path, str(key)))

    def _whole(self) -> None:
        self._reads.whole.add(self._path)

    def get(self, key: str, default: Any = None) -> Any:
        self._key(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self._key(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self._key(key)
        return super().__contains__(key)

    def _whole_read(name: str) -> Any:  # type: ignore[misc]  # noqa: N805  # makes methods here
        method = getattr(dict, name)

        def read(self: _Dict, *args: Any) -> Any:
            self._whole()
            return method(self, *args)

        return read

    items = _whole_read("items")
    keys = _whole_read("keys")
    values = _whole_read("values")
    __iter__ = _whole_read("__iter__")
    __len__ = _whole_read("__len__")
    __eq__ = _whole_read("__eq__")
    __ne__ = _whole_read("__ne__")
    copy = _whole_read("copy")


def admission_reads(obj: dict[str, Any], gvk: GVK, operation: str, namespace: str) -> Reads:
    """What the admission of ``obj`` reads of its request: the checks of the review, the mutation and
    the log line, on the whole request."""
    reads = Reads()
    req = recording(request(obj, gvk=gvk, operation=operation, namespace=namespace), (), reads)
    _check_request(req)
    mutation = mutate_request(req, operation, gvk, CONFIG)
    logger = logging.getLogger("phalanx.webhook")
    enabled = mock.patch.object(logger, "isEnabledFor", return_value=True)
    with enabled, mock.patch("webhook.admission.log_fields"):
        review = Review("admission.k8s.io/v1", "AdmissionReview", "u", req, operation, gvk)
        _log(review, gvk[2], mutation, 0.0)
    return reads


def uncovered(reads: Reads, obj: type) -> list[str]:
    """Reads that a view reading the object as ``obj`` cannot answer as the whole body would."""
    request_type = get_type_hints(view.review_type(obj))["request"]
    keys = [f"key {'.'.join(p)}" for p in sorted(reads.keys) if not _kept(request_type, p, whole=False)]
    whole = [f"whole {'.'.join(p)}" for p in sorted(reads.whole) if not _kept(request_type, p, whole=True)]
    return keys + whole


def _kept(schema: Any, path: Path, *, whole: bool) -> bool:
    """Whether the view keeps ``path`` as in the whole body (``whole``: every key of it)."""
    for step in path:
        if schema is Any:
            return True
        hints = get_type_hints(schema)
        if step not in hints:
            return False
        schema = hints[step]
    return schema is Any or not whole


# ---- the tests ----------------------------------------------------------------------------------


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


def _body(obj: dict[str, Any], gvk: GVK, operation: str, namespace: str) -> bytes:
    req = request(obj, gvk=gvk, operation=operation, namespace=namespace)
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})


@pytest.mark.parametrize("gvk", VIEWED, ids=lambda gvk: gvk[2])
def test_the_admission_of_realistic_objects_reads_only_what_the_view_keeps(gvk: GVK) -> None:
    for builder in REALISTIC[gvk]:
        for path, value in [([], None), *FIELDS[gvk]]:
            obj = builder.build()
            if path:
                set_path(obj, path, value)
            reads = admission_reads(obj, gvk, "CREATE", "ml")
            assert reads.keys, "nothing recorded"
            assert uncovered(reads, view.OBJECTS[gvk]) == [], (path, value)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.data(),
    gvk=st.sampled_from(VIEWED),
    operation=st.sampled_from(["CREATE", "CREATE", "UPDATE"]),
    namespace=st.sampled_from(["ml", "kube-system", "", ""]),
)
def test_an_object_admitted_from_the_view_gets_the_answer_of_the_whole_body(
    data: st.DataObject, gvk: GVK, operation: str, namespace: str
) -> None:
    obj = data.draw(viewed_objects(gvk) | objects)
    assert uncovered(admission_reads(obj, gvk, operation, namespace), view.OBJECTS[gvk]) == []
    body = _body(obj, gvk, operation, namespace)
    from_view = _admitted(body)
    with mock.patch("webhook.review.read_view", return_value=None):
        whole = _admitted(body)
    assert from_view == whole  # the answer, and what the admission log says


def test_a_read_the_view_leaves_out_is_found() -> None:
    """The recording check itself: a field the view drops, read by the admission, is reported."""
    reads = admission_reads(job().failure_policy(FAILURE_POLICY).build(), JOB, "CREATE", "ml")
    assert uncovered(reads, view.OBJECTS[JOB]) == []
    job_fields = get_type_hints(view.OBJECTS[JOB])
    spec_fields = {k: v for k, v in get_type_hints(job_fields["spec"]).items() if k != "podFailurePolicy"}
    spec = TypedDict("spec", spec_fields, total=False)  # type: ignore[misc]
    narrower = TypedDict("narrower", {**job_fields, "spec": spec}, total=False)  # type: ignore[misc]
    assert "key object.spec.podFailurePolicy" in uncovered(reads, narrower)


def test_nesting_deeper_than_the_view_follows_is_read_whole() -> None:
    """An MPIJob's spec keeps unknown fields, at any depth orjson reads (about 1,000 levels);
    msgspec stops sooner, at Python's recursion limit: the body is then parsed whole."""
    obj = mpijob().workers(2).build()
    obj["spec"]["extra"] = "deep"
    body = _body(obj, MPIJOB, "CREATE", "ml").replace(b'"deep"', b"[" * 1000 + b"]" * 1000)
    orjson.loads(body)  # deep, but well within what the whole parse reads
    assert view.read_view(body) is None
    answer, _ = _admitted(body)
    assert answer.status == 200
    assert orjson.loads(answer.body)["response"]["allowed"] is True


@pytest.mark.parametrize(
    ("obj", "gvk"),
    [(pod().label(c.POD_GROUP_LABEL, "pg").gate(c.GATE), POD), (job(), JOB), (mpijob().workers(2), MPIJOB)],
    ids=["Pod", "Job", "MPIJob"],
)
def test_the_view_reads_a_review_as_the_api_server_writes_it(obj: Any, gvk: GVK) -> None:
    """Compact JSON, as the API server sends: read by the view (so the property test above compares
    two different paths), without the containers; indented JSON, or another kind, is read whole."""
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": request(obj, gvk=gvk),
    }
    read = view.read_view(orjson.dumps(review))
    assert read is not None
    kept = ("name", "namespace", "labels", "annotations")
    metadata = obj.build()["metadata"]
    assert read["request"]["object"]["metadata"] == {k: v for k, v in metadata.items() if k in kept}
    assert "containers" not in orjson.dumps(read).decode()
    assert view.read_view(orjson.dumps(review, option=orjson.OPT_INDENT_2)) is None
    other = {**review, "request": request(obj, gvk=STATEFULSET)}
    assert view.read_view(orjson.dumps(other)) is None
