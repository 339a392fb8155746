"""A pod review read as far as the webhook looks into it, and no further.

Pod reviews are most of what an API server sends, and a pod's containers, volumes and env are most
of each. Decoded against the TypedDicts below, msgspec builds plain dicts of just these fields and
only checks the syntax of the rest, in less than half the time of parsing the whole body; the
result has the same shape as the whole parse, so the pod path reads it unchanged.

Every field the pod path (``webhook.mutate``) or the admission log reads must be listed here: a
property test checks that a pod admitted from this view gets the same answer as from the whole
parse (tests/unit/webhook/test_webhook_fuzz.py). Any other kind, and any body of a shape the view
does not take (a wrong type anywhere in it), is parsed whole instead.
"""

from __future__ import annotations

from typing import Any, TypedDict

import msgspec


class _Kind(TypedDict, total=False):
    group: Any
    version: Any
    kind: Any


class _Metadata(TypedDict, total=False):
    name: Any
    generateName: Any
    namespace: Any
    labels: Any
    annotations: Any


class _Spec(TypedDict, total=False):
    schedulingGates: Any
    schedulerName: Any
    nodeName: Any
    workloadRef: Any


class _Pod(TypedDict, total=False):
    metadata: _Metadata
    spec: _Spec


class _Request(TypedDict, total=False):
    uid: Any
    kind: _Kind
    operation: Any
    subResource: Any
    namespace: Any
    object: _Pod
    oldObject: Any


class _Review(TypedDict, total=False):
    apiVersion: Any
    kind: Any
    request: _Request


_DECODER = msgspec.json.Decoder(_Review)
# As the API server writes it (compact JSON): a body without it is not a pod's review, and is not
# decoded twice. A false hit only costs the view's decode.
_POD_KIND = b'"kind":"Pod"'


class NotJson(ValueError):
    """The body is not valid JSON (the message says where)."""


def pod_review(body: bytes | bytearray) -> dict[str, Any] | None:
    """The review of a pod (core/v1), with only the fields above; None for any other kind, or when
    the body has a shape the view does not take; ``NotJson`` when it is not JSON at all."""
    if _POD_KIND not in body:
        return None
    try:
        review = _DECODER.decode(body)
    except msgspec.ValidationError:
        return None
    except msgspec.DecodeError as err:
        raise NotJson(str(err)) from None
    kind = review.get("request", {}).get("kind", {})
    if kind.get("kind") == "Pod" and kind.get("group") == "":
        return review  # type: ignore[return-value]  # a _Review is a dict
    return None
