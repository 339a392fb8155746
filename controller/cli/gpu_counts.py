"""What the plugin counts as GPUs: the resource the planner indexes as GPUs (on a cluster whose GPUs
are only one DeviceClass's devices, that class), and each pod's share of it and of every other
DeviceClass -- the devices its DRA claims ask for, or hold -- exactly as the planner counts them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from controller.core import Pod, Snapshot, class_resource, gpu_resource_of, with_devices


@dataclass(frozen=True, slots=True)
class GpuCounts:
    resource: str  # what the GPU columns count
    device_resources: tuple[str, ...]  # what DeviceClasses count as, but the GPU resource (sorted)
    pods: Mapping[str, Pod]  # pod uid -> the pod with its claims' devices as requests

    def gpus(self, pod: Pod) -> int:
        return self.pods.get(pod.uid, pod).requests.get(self.resource, 0)

    def devices(self, pod: Pod) -> dict[str, int]:
        """The devices of other classes than the GPU resource the pod asks for or holds."""
        requests = self.pods.get(pod.uid, pod).requests
        return {name: requests[name] for name in self.device_resources if requests.get(name)}


def gpu_counts(snapshot: Snapshot, configured: str) -> GpuCounts:
    world = snapshot.devices
    translated = with_devices(snapshot, world)
    resource = gpu_resource_of(translated, world, configured)
    classes = sorted({class_resource(c) for c in world.classes.values()} - {resource}) if world else []
    return GpuCounts(resource, tuple(classes), {p.uid: p for p in translated.pods})
