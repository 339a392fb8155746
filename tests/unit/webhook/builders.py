"""AdmissionReview requests for the objects the webhook admits, and a tiny RFC 6902 applier to check patches.

The objects themselves come from ``tests.builders``."""

from __future__ import annotations

from typing import Any

import jsonpatch  # type: ignore[import-untyped]
import jsonpointer  # type: ignore[import-untyped]

from shared.kinds import POD
from shared.workloads import GVK
from tests.builders import Builder

Obj = dict[str, Any]


def request(
    obj: Obj | Builder,
    *,
    operation: str = "CREATE",
    namespace: str = "ml",
    gvk: GVK | None = None,
    uid: str = "6a1d4b8e-0000-4000-8000-000000000001",
) -> Obj:
    """An AdmissionRequest (the ``request`` member of an AdmissionReview) for ``obj``."""
    if isinstance(obj, Builder):
        gvk = gvk or obj.gvk
        obj = obj.build()
    group, version, kind = gvk or POD
    return {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "operation": operation,
        "namespace": namespace,
        "object": obj,
        "userInfo": {"username": "alice"},
    }


def review(req: Obj) -> Obj:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


class PatchError(Exception):
    pass


def apply_patch(doc: Any, ops: list[Obj]) -> Any:
    """Apply the webhook's add/replace ops with an independent RFC 6902 implementation (the
    ``jsonpatch`` library), so the oracle is not written by the hands that wrote the patcher."""
    for op in ops:
        if op["op"] not in ("add", "replace"):
            raise PatchError(f"unsupported op {op}")
    try:
        return jsonpatch.apply_patch(doc, ops, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as err:
        raise PatchError(str(err)) from err
