"""A pod's effective resource request, computed from its raw spec as the scheduler does.

For each resource (k8s.io/component-helpers/resource PodRequests):

    max( sum(containers) + sum(restartable init containers),
         max over each other init container i of (request(i) + sidecars started before i) )
    + spec.overhead

A container's request for a resource defaults to its limit when only the limit is given (that is how
``nvidia.com/gpu`` usually appears). Pod-level resources (``spec.resources``, cpu, memory and
hugepages-*) replace the aggregate of the containers for those resources. ``pods`` is always 1.
Amounts are exact integers (milli-CPU, bytes, counts), see ``shared.quantities``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.core import messages as msg
from shared.quantities import QuantityError, parse_resources


class InvalidRequests(ValueError):
    """The spec carries a resource amount that is not a valid, non-negative quantity."""


def _is_pod_level_resource(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def _resource_list(value: object, where: str) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidRequests(msg.not_a_resource_map(where, value))
    try:
        parsed = parse_resources(dict(value))
    except QuantityError as err:
        raise InvalidRequests(msg.bad_quantity(where, err)) from err
    for name, amount in parsed.items():
        if amount < 0:
            raise InvalidRequests(msg.negative_amount(where, name))
    return parsed


def _requests(resources: object, where: str) -> dict[str, int]:
    """Requests with limits as the default for resources that give only a limit."""
    if resources is None:
        return {}
    if not isinstance(resources, Mapping):
        raise InvalidRequests(msg.resources_not_a_map(where))
    merged = _resource_list(resources.get("limits"), msg.limits_of(where))
    merged.update(_resource_list(resources.get("requests"), msg.requests_of(where)))
    return merged


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        into[name] = into.get(name, 0) + amount


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, amount in other.items():
        if name not in into or amount > into[name]:
            into[name] = amount


def _containers(spec: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    value = spec.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise InvalidRequests(msg.containers_not_a_list(key))
    return value


def effective_requests(pod_spec: Mapping[str, Any]) -> dict[str, int]:
    """The pod's effective request per resource, plus ``"pods": 1``. Raises InvalidRequests."""
    total: dict[str, int] = {}
    for index, container in enumerate(_containers(pod_spec, "containers")):
        name = container.get("name") or index
        _add(total, _requests(container.get("resources"), msg.container(name, init=False)))

    sidecars: dict[str, int] = {}  # restartable init containers started so far
    init_peak: dict[str, int] = {}
    for index, container in enumerate(_containers(pod_spec, "initContainers")):
        name = container.get("name") or index
        own = _requests(container.get("resources"), msg.container(name, init=True))
        if container.get("restartPolicy") == "Always":
            _add(total, own)
            _add(sidecars, own)
            _max(init_peak, sidecars)
        else:
            during = dict(own)
            _add(during, sidecars)
            _max(init_peak, during)
    _max(total, init_peak)

    pod_level = pod_spec.get("resources")
    if pod_level is not None:
        for name, amount in _requests(pod_level, "spec.resources").items():
            if _is_pod_level_resource(name):
                total[name] = amount

    _add(total, _resource_list(pod_spec.get("overhead"), "spec.overhead"))
    total["pods"] = 1
    return total
