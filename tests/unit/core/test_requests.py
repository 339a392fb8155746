"""effective_requests: the scheduler's arithmetic on a raw pod spec."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.requests import InvalidRequests, effective_requests

GI = 2**30
MI = 2**20


def c(
    name: str, requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "image": "x", "resources": resources, **extra}


def sidecar(name: str, requests: dict[str, Any]) -> dict[str, Any]:
    return c(name, requests, restartPolicy="Always")


CASES: list[tuple[str, dict[str, Any], dict[str, int]]] = [
    ("empty spec", {}, {"pods": 1}),
    (
        "one container",
        {"containers": [c("a", {"cpu": "500m", "memory": "1Gi"})]},
        {"cpu": 500, "memory": GI, "pods": 1},
    ),
    (
        "containers are summed",
        {"containers": [c("a", {"cpu": "1", "memory": "1Gi"}), c("b", {"cpu": "250m", "memory": "512Mi"})]},
        {"cpu": 1250, "memory": GI + 512 * MI, "pods": 1},
    ),
    (
        "limits only: the request defaults to the limit (GPUs)",
        {"containers": [c("a", {"cpu": "2"}, {"nvidia.com/gpu": 4, "cpu": "4"})]},
        {"cpu": 2000, "nvidia.com/gpu": 4, "pods": 1},
    ),
    (
        "an init container larger than the containers wins",
        {"initContainers": [c("i", {"cpu": "4"})], "containers": [c("a", {"cpu": "1", "memory": "1Gi"})]},
        {"cpu": 4000, "memory": GI, "pods": 1},
    ),
    (
        "init containers: the max, not the sum",
        {
            "initContainers": [c("i1", {"cpu": "2"}), c("i2", {"cpu": "3"})],
            "containers": [c("a", {"cpu": "1"})],
        },
        {"cpu": 3000, "pods": 1},
    ),
    (
        "sidecars add to the containers",
        {"initContainers": [sidecar("s", {"cpu": "500m"})], "containers": [c("a", {"cpu": "1"})]},
        {"cpu": 1500, "pods": 1},
    ),
    (
        "an init container after a sidecar runs alongside it",
        {
            "initContainers": [sidecar("s", {"cpu": "1"}), c("i", {"cpu": "3"})],
            "containers": [c("a", {"cpu": "1"})],
        },
        {"cpu": 4000, "pods": 1},  # max(1 + 1, 1 + 3)
    ),
    (
        "an init container before a sidecar does not run alongside it",
        {
            "initContainers": [c("i", {"cpu": "3"}), sidecar("s", {"cpu": "1"})],
            "containers": [c("a", {"cpu": "1"})],
        },
        {"cpu": 3000, "pods": 1},  # max(1 + 1, 3)
    ),
    (
        "two sidecars, an init container between them",
        {
            "initContainers": [
                sidecar("s1", {"cpu": "1"}),
                c("i", {"cpu": "2"}),
                sidecar("s2", {"cpu": "1"}),
            ],
            "containers": [c("a", {"cpu": "500m"})],
        },
        {"cpu": 3000, "pods": 1},  # max(0.5 + 1 + 1, 1 + 2)
    ),
    (
        "overhead is added on top",
        {"containers": [c("a", {"cpu": "1"})], "overhead": {"cpu": "250m", "memory": "64Mi"}},
        {"cpu": 1250, "memory": 64 * MI, "pods": 1},
    ),
    (
        "overhead is added after the init maximum",
        {
            "initContainers": [c("i", {"cpu": "4"})],
            "containers": [c("a", {"cpu": "1"})],
            "overhead": {"cpu": "100m"},
        },
        {"cpu": 4100, "pods": 1},
    ),
    (
        "pod-level resources replace cpu and memory, not GPUs",
        {
            "resources": {"requests": {"cpu": "8", "memory": "32Gi"}},
            "containers": [c("a", {"cpu": "1", "memory": "1Gi"}, {"nvidia.com/gpu": 2})],
        },
        {"cpu": 8000, "memory": 32 * GI, "nvidia.com/gpu": 2, "pods": 1},
    ),
    (
        "extended resources and exact quantities",
        {"containers": [c("a", {"cpu": "0.1", "example.com/fpga": "2"}), c("b", {"cpu": "0.2"})]},
        {"cpu": 300, "example.com/fpga": 2, "pods": 1},
    ),
    ("a container without resources", {"containers": [{"name": "a", "image": "x"}]}, {"pods": 1}),
]


@pytest.mark.parametrize(("spec", "expected"), [(s, e) for _, s, e in CASES], ids=[n for n, _, _ in CASES])
def test_effective_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert effective_requests(spec) == expected


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ({"containers": [c("web", {"cpu": "lots"})]}, "container web"),
        ({"containers": [c("web", {"memory": "-1Gi"})]}, "must not be negative"),
        ({"initContainers": [c("init", {"cpu": "1x"})]}, "init container init"),
        ({"containers": [c("a", limits={"nvidia.com/gpu": "two"})]}, "limits"),
        ({"containers": [c("a")], "overhead": {"cpu": "?"}}, "spec.overhead"),
        ({"containers": "nope"}, "spec.containers"),
        ({"containers": [{"name": "a", "resources": {"requests": ["cpu"]}}]}, "map of resource quantities"),
    ],
)
def test_invalid_quantities_raise_a_clear_value_error(spec: dict[str, Any], fragment: str) -> None:
    with pytest.raises(InvalidRequests, match=fragment) as info:
        effective_requests(spec)
    assert isinstance(info.value, ValueError)
