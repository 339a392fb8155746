"""The fake nodes: GPU nodes spread over racks and zones, and a few CPU-only nodes.

A fleet's GPUs are either an extended resource in each node's allocatable (``nvidia.com/gpu``, as
the device plugin publishes them), or only devices of Dynamic Resource Allocation: one DeviceClass
and one node-local ResourceSlice per GPU node, allocated by the real kube-scheduler (KWOK needs no
driver). ``dra-extended`` adds ``extendedResourceName: nvidia.com/gpu`` to that DeviceClass, so
plain ``nvidia.com/gpu`` requests are served from its devices (DRAExtendedResource, GA in 1.37).

``four_levels`` labels GPU nodes in four nested levels under their own ``domain_prefix`` (for one
test's pool): zone, block, rack, NVLink domain (``nvidia.com/gpu.clique``), where the NVLink domains
of a rack take its nodes in turn (node k of a rack joins its domain k % domains), so that consecutive
node names are not in one domain."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# kwok manages nodes carrying this annotation (kwokctl's default selector).
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
GPU_PRODUCT = "NVIDIA-H100-80GB-HBM3"

# Where a fleet's GPUs come from (FleetSpec.gpus_as).
GPUS_ALLOCATABLE = "allocatable"
GPUS_DRA = "dra"
GPUS_DRA_EXTENDED = "dra-extended"
GPU_SOURCES = (GPUS_ALLOCATABLE, GPUS_DRA, GPUS_DRA_EXTENDED)
# The fake DRA driver: its name is also the DeviceClass's and the domain of its device attributes.
DRA_DRIVER = "gpu.example.com"
DRA_DEVICE_CLASS = "gpu.example.com"
DRA_EXTENDED_RESOURCE = "nvidia.com/gpu"
DRA_GPU_MODEL = "H100"
# Devices per NVLink domain: a node's GPUs form domains of this many (attribute nvlinkDomain).
DRA_NVLINK_DOMAIN_SIZE = 4


@dataclass(frozen=True)
class FleetSpec:
    gpu_nodes: int = 8
    gpus_per_node: int = 8
    cpu_nodes: int = 2
    nodes_per_rack: int = 2
    racks_per_zone: int = 2
    gpu_node_cpu: str = "64"
    gpu_node_memory: str = "512Gi"
    cpu_node_cpu: str = "32"
    cpu_node_memory: str = "128Gi"
    max_pods: int = 110
    four_levels: bool = False
    racks_per_block: int = 2
    nvlink_per_rack: int = 2
    domain_prefix: str = ""
    gpus_as: str = GPUS_ALLOCATABLE  # one of GPU_SOURCES

    @property
    def dra(self) -> bool:
        return self.gpus_as != GPUS_ALLOCATABLE

    @property
    def total_gpus(self) -> int:
        return self.gpu_nodes * self.gpus_per_node


def _node(name: str, labels: dict[str, str], capacity: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/role": "agent",
                "type": "kwok",
                **labels,
            },
        },
        "spec": {},
        "status": {"allocatable": capacity, "capacity": capacity},
    }


def _four_levels(spec: FleetSpec, i: int) -> dict[str, str]:
    p = spec.domain_prefix
    rack = i // spec.nodes_per_rack
    block = rack // spec.racks_per_block
    nvlink = rack * spec.nvlink_per_rack + (i % spec.nodes_per_rack) % spec.nvlink_per_rack
    return {
        "topology.kubernetes.io/zone": f"{p}zone",
        "topology.kubernetes.io/block": f"{p}block-{block}",
        "topology.kubernetes.io/rack": f"{p}rack-{rack}",
        "nvidia.com/gpu.clique": f"{p}nvl-{nvlink}",
    }


def gpu_node_name(index: int) -> str:
    return f"gpu-node-{index:03d}"


def node_manifests(spec: FleetSpec) -> list[dict[str, Any]]:
    nodes = []
    for i in range(spec.gpu_nodes):
        rack = i // spec.nodes_per_rack
        zone = rack // spec.racks_per_zone
        nodes.append(
            _node(
                gpu_node_name(i),
                {
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.product": GPU_PRODUCT,
                    "nvidia.com/gpu.count": str(spec.gpus_per_node),
                    "topology.kubernetes.io/zone": f"zone-{chr(ord('a') + zone % 26)}",
                    "topology.kubernetes.io/rack": f"rack-{rack:02d}",
                    **(_four_levels(spec, i) if spec.four_levels else {}),
                },
                {
                    "cpu": spec.gpu_node_cpu,
                    "memory": spec.gpu_node_memory,
                    "pods": str(spec.max_pods),
                    # DRA fleets publish their GPUs only as ResourceSlice devices.
                    **({} if spec.dra else {"nvidia.com/gpu": str(spec.gpus_per_node)}),
                },
            )
        )
    for i in range(spec.cpu_nodes):
        nodes.append(
            _node(
                f"cpu-node-{i:03d}",
                {"topology.kubernetes.io/zone": "zone-a", "topology.kubernetes.io/rack": "rack-cpu"},
                {"cpu": spec.cpu_node_cpu, "memory": spec.cpu_node_memory, "pods": str(spec.max_pods)},
            )
        )
    return nodes


def device_class_manifest(spec: FleetSpec) -> dict[str, Any]:
    """The DeviceClass selecting the fake driver's devices (mapping nvidia.com/gpu onto them for
    ``dra-extended``)."""
    class_spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f"device.driver == '{DRA_DRIVER}'"}}]}
    if spec.gpus_as == GPUS_DRA_EXTENDED:
        class_spec["extendedResourceName"] = DRA_EXTENDED_RESOURCE
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DRA_DEVICE_CLASS},
        "spec": class_spec,
    }


def resource_slice_manifest(spec: FleetSpec, node: str) -> dict[str, Any]:
    """One node-local slice: the node's GPUs, each with its model, index and NVLink domain."""
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "model": {"string": DRA_GPU_MODEL},
                "index": {"int": i},
                "nvlinkDomain": {"int": i // DRA_NVLINK_DOMAIN_SIZE},
                "driverVersion": {"version": "1.2.3"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(spec.gpus_per_node)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRA_DRIVER}"},
        "spec": {
            "driver": DRA_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def dra_manifests(spec: FleetSpec) -> list[dict[str, Any]]:
    """A DRA fleet's DeviceClass and ResourceSlices (none for an allocatable fleet)."""
    if not spec.dra:
        return []
    return [
        device_class_manifest(spec),
        *(resource_slice_manifest(spec, gpu_node_name(i)) for i in range(spec.gpu_nodes)),
    ]
