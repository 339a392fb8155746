"""Slim records of the DRA objects (resource.k8s.io/v1) the planner reads: only what
controller/core/devices.py models. Anything else a claim asks for is kept as a reason, so the
gang waits instead of being planned on a guess."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from controller.api.node_selectors import selector_terms
from controller.core import (
    AttributeValue,
    Claim,
    ClaimSpec,
    Device,
    DeviceClass,
    DeviceRequest,
    GroupClaim,
    NodeReach,
    PodClaim,
)
from controller.core import (
    messages as msg,
)
from shared.jsonread import items, obj
from shared.quantities import parse_fraction

_Entry = TypeVar("_Entry", PodClaim, GroupClaim)

JsonObject = Mapping[str, Any]
SCHEDULING_GROUP = "scheduling.k8s.io"  # a claim reserved for a native PodGroup names this group


def _key(raw: JsonObject) -> tuple[str, str]:
    meta = obj(raw.get("metadata"))
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


@dataclass(frozen=True, slots=True)
class SliceRecord:
    driver: str
    pool: str
    generation: int
    slice_count: int
    devices: tuple[Device, ...]


def _attribute(value: Mapping[str, Any]) -> AttributeValue | None:
    if "bool" in value:
        return bool(value["bool"])
    if "int" in value:
        return int(value["int"])
    if "string" in value:
        return str(value["string"])
    if "version" in value:
        return ("version", str(value["version"]))
    return None


def _qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def _node_selection(raw: Mapping[str, Any]) -> tuple[str | None, NodeReach | None]:
    """Where a slice's (or, with ``perDeviceNodeSelection``, a device's) devices are reachable
    from: one node, or the nodes of a NodeReach; neither (a selection not known) reaches none."""
    if raw.get("nodeName"):
        return str(raw["nodeName"]), None
    if raw.get("allNodes"):
        return None, NodeReach(all_nodes=True)
    if isinstance(raw.get("nodeSelector"), Mapping):
        return None, NodeReach(terms=selector_terms(raw["nodeSelector"]))
    return None, None


def slice_record(raw: JsonObject) -> SliceRecord:
    spec = obj(raw.get("spec"))
    driver = str(spec.get("driver") or "")
    pool = obj(spec.get("pool"))
    pool_name = str(pool.get("name") or "")
    generation = int(pool.get("generation") or 0)
    per_device = bool(spec.get("perDeviceNodeSelection"))
    node, reach = _node_selection(spec)
    devices = []
    for item in items(spec.get("devices")):
        device = obj(item)
        if per_device:
            node, reach = _node_selection(device)
        attributes: dict[str, AttributeValue] = {}
        for name, value in obj(device.get("attributes")).items():
            parsed = _attribute(obj(value))
            if parsed is not None:
                attributes[_qualified(str(name), driver)] = parsed
        capacity: dict[str, int] = {}
        for name, value in obj(device.get("capacity")).items():
            try:
                capacity[_qualified(str(name), driver)] = int(
                    parse_fraction(str(obj(value).get("value"))) * 1000
                )
            except (ValueError, ZeroDivisionError):
                continue
        unmodelled = None
        if device.get("taints"):
            unmodelled = msg.DEVICE_TAINTS
        elif device.get("consumesCounters"):
            unmodelled = msg.DEVICE_SHARED_COUNTERS
        devices.append(
            Device(
                driver,
                pool_name,
                str(device.get("name") or ""),
                node,
                attributes,
                capacity,
                unmodelled,
                generation,
                reach,
            )
        )
    return SliceRecord(
        driver, pool_name, generation, int(pool.get("resourceSliceCount") or 1), tuple(devices)
    )


def class_record(raw: JsonObject) -> DeviceClass:
    spec = obj(raw.get("spec"))
    selectors = tuple(
        str(obj(obj(s).get("cel")).get("expression") or "") for s in items(spec.get("selectors"))
    )
    return DeviceClass(_key(raw)[1], selectors, spec.get("extendedResourceName") or None)


def _request(raw: Mapping[str, Any], name: str) -> DeviceRequest:
    selectors = tuple(
        str(obj(obj(s).get("cel")).get("expression") or "") for s in items(raw.get("selectors"))
    )
    unmodelled = None
    if raw.get("adminAccess"):
        unmodelled = msg.device_admin_access(name)
    elif raw.get("capacity"):
        unmodelled = msg.device_request_unmodelled(name, msg.DEVICE_CAPACITY_REQUESTS)
    elif raw.get("tolerations"):
        unmodelled = msg.device_request_unmodelled(name, msg.DEVICE_TOLERATIONS)
    elif raw.get("allocationMode") not in (None, "ExactCount", "All"):
        unmodelled = msg.device_request_unmodelled(
            name, msg.device_allocation_mode(str(raw.get("allocationMode")))
        )
    return DeviceRequest(
        name,
        str(raw.get("deviceClassName") or ""),
        selectors,
        int(raw.get("count") or 1),
        raw.get("allocationMode") == "All",
        unmodelled=unmodelled,
    )


def claim_spec(spec: Mapping[str, Any]) -> ClaimSpec:
    devices = obj(spec.get("devices"))
    requests = []
    for item in items(devices.get("requests")):
        request = obj(item)
        name = str(request.get("name") or "")
        if request.get("exactly") is not None:
            requests.append(_request(obj(request.get("exactly")), name))
        elif request.get("firstAvailable"):
            alternatives = tuple(
                _request(obj(sub), f"{name}/{obj(sub).get('name')}")
                for sub in items(request["firstAvailable"])
            )
            requests.append(DeviceRequest(name, "", alternatives=alternatives))
        else:
            requests.append(
                DeviceRequest(name, "", unmodelled=msg.device_request_unmodelled(name, msg.DEVICE_NO_EXACTLY))
            )
    matches: list[tuple[str, tuple[str, ...]]] = []
    distinct: list[tuple[str, tuple[str, ...]]] = []
    unmodelled = None
    for item in items(devices.get("constraints")):
        constraint = obj(item)
        names = tuple(str(n) for n in items(constraint.get("requests")))
        if constraint.get("matchAttribute"):
            matches.append((str(constraint["matchAttribute"]), names))
        elif constraint.get("distinctAttribute"):
            distinct.append((str(constraint["distinctAttribute"]), names))
        else:
            unmodelled = msg.device_claim_unmodelled(msg.DEVICE_OTHER_CONSTRAINT)
    return ClaimSpec(tuple(requests), tuple(matches), unmodelled, tuple(distinct))


def template_record(raw: JsonObject) -> ClaimSpec:
    return claim_spec(obj(obj(obj(raw.get("spec")).get("spec"))))


def _allocated_nodes(allocation: Mapping[str, Any]) -> tuple[str | None, NodeReach | None]:
    """Where an allocation may be used: one node (a single ``metadata.name In [node]``), or the
    nodes its selector matches, or (no selector: devices every node reaches) any node."""
    selector = allocation.get("nodeSelector")
    if not isinstance(selector, Mapping):
        return None, NodeReach(all_nodes=True)
    terms = selector_terms(selector)
    if len(terms) == 1 and len(terms[0]) == 1:
        only = terms[0][0]
        if only.field and only.key == "metadata.name" and only.operator == "In" and len(only.values) == 1:
            return only.values[0], None
    return None, NodeReach(terms=terms)


def claim_record(raw: JsonObject) -> Claim:
    namespace, name = _key(raw)
    status = obj(raw.get("status"))
    allocation = obj(status.get("allocation"))
    results = items(obj(allocation.get("devices")).get("results"))
    allocated = tuple(
        (str(obj(r).get("driver")), str(obj(r).get("pool")), str(obj(r).get("device"))) for r in results
    )
    node, reach = _allocated_nodes(allocation) if allocated else (None, None)
    consumers = [obj(r) for r in items(status.get("reservedFor"))]
    reserved = tuple(str(r.get("uid")) for r in consumers if r.get("uid"))
    groups = tuple(
        str(r.get("name"))
        for r in consumers
        if r.get("resource") == "podgroups" and r.get("apiGroup") == SCHEDULING_GROUP and r.get("name")
    )
    annotations = obj(obj(raw.get("metadata")).get("annotations"))
    extended = annotations.get("resource.kubernetes.io/extended-resource-claim") == "true"
    owner = next(
        (
            str(ref["uid"])
            for ref in map(obj, items(obj(raw.get("metadata")).get("ownerReferences")))
            if ref.get("controller") and ref.get("uid")
        ),
        None,
    )
    spec = claim_spec(obj(raw.get("spec")))
    return Claim(
        namespace,
        name,
        spec,
        allocated,
        node,
        reserved,
        extended,
        allocated_reach=reach,
        reserved_for_groups=groups,
        owner=owner,
    )


def group_claims(raw: JsonObject) -> tuple[GroupClaim, ...]:
    """A native PodGroup's spec.resourceClaims, with the claims its status names (1.36+, where the
    DRAWorkloadResourceClaims gate is on; the API server drops the field where it is off)."""
    return _claim_entries(obj(raw.get("spec")), obj(raw.get("status")), GroupClaim)


def pod_claims(spec: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[PodClaim, ...]:
    return _claim_entries(spec, status, PodClaim)


def _claim_entries(
    spec: Mapping[str, Any], status: Mapping[str, Any], entry_of: Callable[..., _Entry]
) -> tuple[_Entry, ...]:
    """``spec.resourceClaims`` of a pod or a PodGroup, each with the claim ``status`` says was
    made for it (``status.resourceClaimStatuses``): the same shape on both."""
    generated = {
        str(obj(s).get("name")): str(obj(s).get("resourceClaimName"))
        for s in items(status.get("resourceClaimStatuses"))
        if obj(s).get("resourceClaimName")
    }
    out = []
    for item in items(spec.get("resourceClaims")):
        entry = obj(item)
        name = str(entry.get("name") or "")
        out.append(
            entry_of(
                name,
                template=entry.get("resourceClaimTemplateName") or None,
                claim=entry.get("resourceClaimName") or None,
                generated=generated.get(name),
            )
        )
    return tuple(out)
