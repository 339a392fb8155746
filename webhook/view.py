"""A review read as far as the webhook looks into it, and no further.

Nearly everything an API server sends Phalanx is a pod, a Job or an MPIJob (an MPIJob gang is the
MPIJob, the launcher Job mpi-operator makes and a pod per member), and their containers, volumes
and env are most of each body. Decoded against the TypedDicts below, msgspec builds plain dicts of
just the fields the webhook reads and only checks the syntax of the rest, in a third to a half of
the time of parsing the whole body; the result has the same shape as the whole parse, so the
admission reads it unchanged.

Every field the admission (``webhook.mutate``) or its log line reads for these kinds must be listed
here. Two tests hold that: one records every key the admission reads from a whole body and checks
that the view keeps it; one admits random objects through the view and through the whole parse and
compares the answers (tests/unit/webhook/test_view.py). Any other kind, and any body of a shape the
view does not take (a wrong type anywhere in it), is parsed whole instead.
"""

from __future__ import annotations

import re
from typing import Any, TypedDict

import msgspec

from shared.kinds import JOB, MPIJOB, POD
from shared.workloads import GVK


class _Kind(TypedDict, total=False):
    group: Any
    version: Any
    kind: Any


class _PodMetadata(TypedDict, total=False):
    name: Any
    generateName: Any
    namespace: Any
    labels: Any
    annotations: Any


class _PodSpec(TypedDict, total=False):
    schedulingGates: Any
    schedulerName: Any
    nodeName: Any
    workloadRef: Any
    schedulingGroup: Any  # 1.36+: the native PodGroup it belongs to


class _Pod(TypedDict, total=False):
    metadata: _PodMetadata
    spec: _PodSpec


class _Metadata(_PodMetadata, total=False):  # a workload's
    ownerReferences: Any  # made by another workload's controller: the gang size it carries stands


class _TemplateMetadata(TypedDict, total=False):
    labels: Any
    annotations: Any


class _TemplateSpec(TypedDict, total=False):
    schedulingGates: Any
    schedulerName: Any
    workloadRef: Any
    schedulingGroup: Any  # 1.36+: the native PodGroup it belongs to
    restartPolicy: Any  # a Job's: whether its pods may be ignored by a podFailurePolicy


class _Template(TypedDict, total=False):  # a workload's pod template
    metadata: _TemplateMetadata
    spec: _TemplateSpec


class _JobSpec(TypedDict, total=False):
    parallelism: Any
    completions: Any
    activeDeadlineSeconds: Any
    suspend: Any
    podFailurePolicy: Any
    podReplacementPolicy: Any
    template: _Template


class _Job(TypedDict, total=False):
    metadata: _Metadata
    spec: _JobSpec


class _ReplicaSpec(TypedDict, total=False):
    replicas: Any
    template: _Template


class _MPIReplicaSpecs(TypedDict, total=False):
    Launcher: _ReplicaSpec
    Worker: _ReplicaSpec


class _MPIJobSpec(TypedDict, total=False):
    runPolicy: Any
    launcherCreationPolicy: Any
    mpiReplicaSpecs: _MPIReplicaSpecs


class _MPIJob(TypedDict, total=False):
    metadata: _Metadata
    spec: _MPIJobSpec


def review_type(obj: type) -> type:
    """The review as the view reads it, its object read as ``obj``."""
    # The functional form: a class statement here could not name ``obj`` in its annotations
    # (postponed evaluation resolves them at module level).
    fields = {"uid": Any, "kind": _Kind, "operation": Any, "subResource": Any, "namespace": Any}
    request = TypedDict("request", {**fields, "object": obj, "oldObject": Any}, total=False)  # type: ignore[misc]
    review: type = TypedDict("review", {"apiVersion": Any, "kind": Any, "request": request}, total=False)
    return review


# The objects each view reads, by the request's kind (also what tests/unit/webhook/test_view.py
# checks the admission's reads against).
OBJECTS: dict[GVK, type] = {POD: _Pod, JOB: _Job, MPIJOB: _MPIJob}


def _kind_json(gvk: GVK) -> bytes:
    group, version, kind = gvk
    return f'"kind":{{"group":"{group}","version":"{version}","kind":"{kind}"}}'.encode()


# The request's kind as the API server writes it (compact JSON, group, version, kind), near the
# start of the body, right after the uid: it picks the decoder. The decoded kind is checked
# again, and a body where it is not found is parsed whole.
_REQUEST_KIND = re.compile(rb'"kind":\{"group":"[^"\\]*","version":"[^"\\]*","kind":"[^"\\]*"\}')
_KIND_WINDOW = 512
# By the request's kind as written: the kind as decoded, and the decoder.
_VIEWS: dict[bytes, tuple[dict[str, str], msgspec.json.Decoder[Any]]] = {
    _kind_json(gvk): (
        dict(zip(("group", "version", "kind"), gvk, strict=True)),
        msgspec.json.Decoder(review_type(obj)),
    )
    for gvk, obj in OBJECTS.items()
}


class NotJson(ValueError):
    """The body is not valid JSON (the message says where)."""


def read_view(body: bytes | bytearray) -> dict[str, Any] | None:
    """The review of a pod, Job or MPIJob with only the fields above; None for any other kind, or
    when the body has a shape the view does not take; ``NotJson`` when it is not JSON at all."""
    found = _REQUEST_KIND.search(body, 0, _KIND_WINDOW)
    view = _VIEWS.get(bytes(found[0])) if found is not None else None  # a bytearray body too
    if view is None:
        return None
    kind, decoder = view
    try:
        review = decoder.decode(body)
    except (msgspec.ValidationError, RecursionError):
        # RecursionError: nesting deeper than msgspec follows (Python's recursion limit, less the
        # stack in use); orjson reads to about 1,000 levels, and an MPIJob's spec keeps unknown
        # fields. Numbers beyond int64/float64 would also read differently (msgspec keeps big
        # integers, orjson makes them floats), but the API server re-encodes every number it sends.
        return None
    except msgspec.DecodeError as err:
        raise NotJson(str(err)) from None
    if review.get("request", {}).get("kind") == kind:
        return review  # type: ignore[no-any-return]  # a TypedDict is a dict
    return None
