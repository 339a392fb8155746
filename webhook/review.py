"""AdmissionReview (admission.k8s.io/v1) parsing and response building.

Anything that is not a well-formed AdmissionReview raises ReviewError, which the server turns into
an HTTP 400: the API server never sends such a body, so whoever did gets a plain message back.
"""

from __future__ import annotations

import binascii
from collections.abc import Sequence
from typing import Any, NamedTuple

import orjson

from shared.workloads import GVK, gvk_of
from webhook.patch import JsonPatchOp
from webhook.view import NotJson, read_view

REVIEW_KIND = "AdmissionReview"
# v1beta1 has the same shape; API servers before 1.22 may still send it.
API_VERSIONS = frozenset({"admission.k8s.io/v1", "admission.k8s.io/v1beta1"})
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})


class ReviewError(ValueError):
    """The body is not an AdmissionReview request."""


class Review(NamedTuple):  # a tuple: made on every request, and cheaper than a frozen dataclass
    api_version: str
    kind: str
    uid: str
    request: dict[str, Any]
    operation: str  # one of OPERATIONS
    gvk: GVK  # the object's (group, version, kind); the kind is never empty


def parse_review(body: bytes | bytearray) -> Review:
    try:
        doc = read_view(body)  # a pod, Job or MPIJob: only the fields the webhook reads
        if doc is None:
            doc = orjson.loads(body)
    except (NotJson, orjson.JSONDecodeError) as err:
        raise ReviewError(f"body is not valid JSON: {err}") from None
    if not isinstance(doc, dict):
        raise ReviewError("body is not a JSON object")
    if doc.get("kind") != REVIEW_KIND:
        raise ReviewError(f"kind must be {REVIEW_KIND}")
    api_version = doc.get("apiVersion")
    # A list or object is never one of the names (and cannot even be looked up in a set).
    if not isinstance(api_version, str) or api_version not in API_VERSIONS:
        raise ReviewError(f"apiVersion must be one of {', '.join(sorted(API_VERSIONS))}")
    request = doc.get("request")
    if not isinstance(request, dict):
        raise ReviewError("AdmissionReview has no request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise ReviewError("request.uid must be a non-empty string")
    operation, gvk = _check_request(request)
    return Review(api_version, REVIEW_KIND, uid, request, operation, gvk)


def _check_request(request: dict[str, Any]) -> tuple[str, GVK]:
    """What the API server always sends: an operation, the object's kind, and the object itself."""
    operation = request.get("operation")
    if not isinstance(operation, str) or operation not in OPERATIONS:
        raise ReviewError(f"request.operation must be one of {', '.join(sorted(OPERATIONS))}")
    kind = request.get("kind")
    if not isinstance(kind, dict) or not isinstance(name := kind.get("kind"), str) or not name:
        raise ReviewError("request.kind must be an object with a kind (group, version, kind)")
    # DELETE carries the object as oldObject only; Phalanx is never registered for it.
    field = "oldObject" if operation == "DELETE" else "object"
    if not isinstance(request.get(field), dict):
        raise ReviewError(f"request.{field} must be an object for {operation}")
    return operation, gvk_of(kind)


def encode_response(
    review: Review,
    *,
    allowed: bool = True,
    ops: Sequence[JsonPatchOp] = (),
    warnings: Sequence[str] = (),
    message: str | None = None,
    code: int | None = None,
) -> bytes:
    """The AdmissionReview answer, echoing the request's uid, apiVersion and kind."""
    response: dict[str, Any] = {"uid": review.uid, "allowed": allowed}
    if ops:
        response["patchType"] = "JSONPatch"
        patch = orjson.dumps(ops if isinstance(ops, list | tuple) else list(ops))
        response["patch"] = binascii.b2a_base64(patch, newline=False).decode("ascii")
    if warnings:
        response["warnings"] = list(warnings)
    if message is not None:
        status: dict[str, Any] = {"message": message}
        if code is not None:
            status["code"] = code
        response["status"] = status
    return orjson.dumps({"apiVersion": review.api_version, "kind": review.kind, "response": response})
