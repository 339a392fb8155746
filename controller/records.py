"""Raw API objects -> the core's slim, immutable records.

Pure functions (no I/O). Pods are parsed once, when their watch event arrives, so the store keeps
~1 KB per pod instead of the raw object; a 50,000-pod cluster must fit in a few hundred MB.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from controller.core.model import NODE_NAME_FIELD, Node, OwnerRef, Pod, Requirement, Taint, Toleration
from controller.core.requests import effective_requests
from shared import constants as c
from shared import grouplink
from shared.quantities import QuantityError, parse_resources


def parse_time(value: object) -> float | None:
    """An RFC 3339 timestamp as seconds since the epoch."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _str_map(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        return {}
    return {str(k): str(v) for k, v in value.items()}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def node_record(raw: Mapping[str, Any]) -> Node:
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    try:
        allocatable = parse_resources(status.get("allocatable"))
    except QuantityError:
        allocatable = {}
    ready = any(
        cond.get("type") == "Ready" and cond.get("status") == "True"
        for cond in _list(status.get("conditions"))
    )
    taints = tuple(
        Taint(str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "NoSchedule")))
        for t in _list(spec.get("taints"))
        if isinstance(t, Mapping)
    )
    return Node(
        name=str(meta.get("name", "")),
        allocatable=allocatable,
        labels=_str_map(meta.get("labels")),
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
        ready=ready,
    )


def _requirements(term: Mapping[str, Any]) -> tuple[Requirement, ...]:
    reqs = []
    for expr in _list(term.get("matchExpressions")):
        if isinstance(expr, Mapping):
            values = tuple(str(v) for v in _list(expr.get("values")))
            reqs.append(Requirement(str(expr.get("key", "")), str(expr.get("operator", "")), values))
    # matchFields: node fields, of which the API allows only metadata.name (the node's name,
    # which need not equal its kubernetes.io/hostname label).
    for expr in _list(term.get("matchFields")):
        if isinstance(expr, Mapping):
            values = tuple(str(v) for v in _list(expr.get("values")))
            key, operator = str(expr.get("key", "")), str(expr.get("operator", ""))
            reqs.append(Requirement(key, operator, values, field=True))
    return tuple(reqs)


def _requirement_json(req: Requirement) -> dict[str, Any]:
    out: dict[str, Any] = {"key": req.key, "operator": req.operator}
    if req.values:
        out["values"] = list(req.values)
    return out


def pinned_node_terms(pod: Pod, node: str) -> list[dict[str, Any]]:
    """The pod's required node-selector terms with a pin to ``node`` (by name) added to each.

    A gated pod's required node affinity may only be tightened (requirements added, none changed),
    so the pod's own terms are written back as they are, each with ``metadata.name In [node]``
    appended to its ``matchFields``; a pod without terms gets that one requirement. Pinning by name
    is what the DaemonSet controller does: the ``kubernetes.io/hostname`` label need not equal it.
    """
    pin = {"key": NODE_NAME_FIELD, "operator": "In", "values": [node]}
    if not pod.required_affinity:
        return [{"matchFields": [pin]}]
    terms = []
    for term in pod.required_affinity:
        out: dict[str, Any] = {}
        expressions = [_requirement_json(r) for r in term if not r.field]
        fields = [_requirement_json(r) for r in term if r.field]
        if expressions:
            out["matchExpressions"] = expressions
        out["matchFields"] = [*fields, pin]
        terms.append(out)
    return terms


def _unmodelled(affinity: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    reasons = []
    for kind, label in (
        ("podAffinity", "inter-pod affinity"),
        ("podAntiAffinity", "inter-pod anti-affinity"),
    ):
        if (affinity.get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution"):
            reasons.append(label)
    if any(
        isinstance(t, Mapping) and t.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule"
        for t in _list(spec.get("topologySpreadConstraints"))
    ):
        reasons.append("topology spread")
    return " and ".join(reasons) or None


def owner_of(meta: Mapping[str, Any]) -> OwnerRef | None:
    for ref in _list(meta.get("ownerReferences")):
        if isinstance(ref, Mapping) and ref.get("controller"):
            return OwnerRef(
                str(ref.get("apiVersion", "")),
                str(ref.get("kind", "")),
                str(ref.get("name", "")),
                str(ref.get("uid", "")),
            )
    return None


class InvalidPod(ValueError):
    """A pod whose requests cannot be parsed; reported on its PodGroup."""


def pod_record(raw: Mapping[str, Any]) -> Pod:
    meta = raw.get("metadata") or {}
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    labels = _str_map(meta.get("labels"))
    annotations = _str_map(meta.get("annotations"))
    try:
        requests = effective_requests(spec)
    except (QuantityError, ValueError) as err:
        raise InvalidPod(f"pod {meta.get('namespace')}/{meta.get('name')}: {err}") from err
    gates = [str(g.get("name", "")) for g in _list(spec.get("schedulingGates")) if isinstance(g, Mapping)]
    affinity = spec.get("affinity") or {}
    node_affinity = (affinity.get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = tuple(
        _requirements(t) for t in _list(node_affinity.get("nodeSelectorTerms")) if isinstance(t, Mapping)
    )
    tolerations = tuple(
        Toleration(
            str(t.get("key", "")),
            str(t.get("operator", "Equal")),
            str(t.get("value", "")),
            str(t.get("effect", "")),
        )
        for t in _list(spec.get("tolerations"))
        if isinstance(t, Mapping)
    )
    link = grouplink.resolve(labels, annotations, spec)
    ref = grouplink.workload_ref(spec)
    preemptible = not (
        labels.get(c.PREEMPTIBLE, "").lower() == "false"
        or annotations.get(c.PREEMPTIBLE, "").lower() == "false"
    )
    return Pod(
        uid=str(meta.get("uid", "")),
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        requests=requests,
        priority=int(spec.get("priority") or 0),
        created=parse_time(meta.get("creationTimestamp")) or 0.0,
        phase=str(status.get("phase") or "Pending"),
        node_name=spec.get("nodeName") or None,
        nominated_node=status.get("nominatedNodeName") or None,
        gated=c.GATE in gates,
        foreign_gates=tuple(sorted(g for g in gates if g != c.GATE)),
        terminating=bool(meta.get("deletionTimestamp")),
        node_selector=_str_map(spec.get("nodeSelector")),
        required_affinity=terms,
        tolerations=tolerations,
        unmodelled=_unmodelled(affinity, spec),
        group=link.name if link else None,
        workload=ref[:2] if ref else None,
        owner=owner_of(meta),
        labels=labels,
        annotations={
            k: v for k, v in annotations.items() if k.startswith(c.DOMAIN) or k in c.GROUP_LINK_ANNOTATIONS
        },
        started=parse_time(status.get("startTime")),
        preemptible=preemptible,
        preemption_policy=str(spec.get("preemptionPolicy") or "PreemptLowerPriority"),
    )
