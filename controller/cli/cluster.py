"""Read the cluster once and build the controller's snapshot from it (the only I/O of the plugin).

Everything goes through the controller's own code: lists are fed to a ``Store`` exactly as the
informers' initial lists are, PodGroups the controller would create (gated members, no PodGroup
yet) are built by ``PodGroupFactory.manifest``, and ``gangs.snapshot`` assembles the core's input.
What the controller only keeps in memory (room held for a preemptor while its victims terminate,
admissions not yet confirmed by its informers) is not visible from outside and is left out.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from controller.api import resources as r
from controller.api.kube import ApiError, Kube
from controller.api.resources import PODGROUPS, PODS, ResourceType
from controller.api.store import Store
from controller.cli import planner_settings
from controller.cli.gpu_counts import GpuCounts, gpu_counts
from controller.core import GangKey, PlannerConfig, Snapshot
from controller.pipeline import gangs
from controller.pipeline.gangs import GangView
from controller.pipeline.podgroups import PodGroupFactory, waiting_message
from controller.runtime.config import ControllerSettings
from controller.runtime.wiring import WATCHED, informer_sinks, planner_config
from shared import constants, kinds
from shared.jsonread import JsonObject

DEPLOYMENTS = r.of(kinds.DEPLOYMENT_KIND)  # the controller's own: its planner settings
STATEFULSETS = r.STATEFULSETS
# Read besides what the controller watches: owners of members (explain Job/x, MPIJob/x) and the
# workloads the audit dry-runs the webhook on.
WORKLOAD_TYPES = r.ADMITTED_WORKLOAD_TYPES


@dataclass
class ClusterState:
    store: Store
    snapshot: Snapshot
    views: dict[GangKey, GangView]
    config: PlannerConfig
    now: float
    # kind -> raw objects (Job, StatefulSet, MPIJob), all namespaces
    workloads: dict[str, list[JsonObject]] = field(default_factory=dict)
    served: set[str] = field(default_factory=set)  # str(ResourceType) of every served type read
    # Gangs whose PodGroup the controller has not created yet (built here as it would build it).
    synthesized: set[GangKey] = field(default_factory=set)
    settings: planner_settings.SettingsUsed = field(
        default_factory=lambda: planner_settings.defaults("given to the plugin")
    )
    # schedulerName of every pod placed on a node: evidence that a scheduler runs.
    schedulers_seen: set[str] = field(default_factory=set)
    # Gangs with no PodGroup whose size is not known yet: what they wait for.
    unsized: dict[GangKey, str] = field(default_factory=dict)
    # str(ResourceType) of what the user may not list cluster-wide (then read in one namespace, or
    # not at all): set by the plugin after reading.
    unreadable: set[str] = field(default_factory=set)
    _gpu_counts: GpuCounts | None = None

    @property
    def gpus(self) -> GpuCounts:
        """GPUs and DRA devices as the planner counts them (computed once)."""
        if self._gpu_counts is None:
            self._gpu_counts = gpu_counts(self.snapshot, self.config.gpu_resource)
        return self._gpu_counts


async def _settings(kube: Kube, namespace: str, name: str) -> planner_settings.SettingsUsed:
    """The running controller's settings, or the defaults and why (not installed, not readable)."""
    try:
        return planner_settings.from_deployment(await kube.get(DEPLOYMENTS, namespace, name))
    except ApiError as err:
        if err.status == 404:
            return planner_settings.defaults(f"no Deployment {namespace}/{name}")
        if err.status == 403:
            return planner_settings.defaults(f"Deployment {namespace}/{name} is not readable to you")
        raise


async def load(
    kube: Kube,
    now: float,
    controller: tuple[str, str] = ("phalanx-system", "phalanx-controller"),
    config: PlannerConfig | None = None,
    extra: Sequence[ResourceType] = WORKLOAD_TYPES,
) -> ClusterState:
    """List everything once and build the snapshot the controller would plan on at ``now``."""
    wanted = list(dict.fromkeys([*WATCHED, *extra]))  # Jobs and StatefulSets are watched as well
    served_flags = await asyncio.gather(*(kube.served(resource_type) for resource_type in wanted))
    served_types = r.first_served(
        [resource_type for resource_type, served in zip(wanted, served_flags, strict=True) if served]
    )
    lists = await asyncio.gather(*(kube.list(resource_type) for resource_type in served_types))
    store = Store()
    sinks = informer_sinks(store, served_types)
    workloads: dict[str, list[JsonObject]] = {}
    schedulers = {constants.DEFAULT_SCHEDULER}
    for resource_type, (items, _) in zip(served_types, lists, strict=True):
        if resource_type == PODS:
            schedulers.update(
                str(spec["schedulerName"])
                for pod in items
                if (spec := pod.get("spec") or {}).get("nodeName") and spec.get("schedulerName")
            )
        sink = sinks.get(str(resource_type))
        if sink is not None:
            sink.replace(items)
        if resource_type in extra:
            workloads[resource_type.kind] = items  # the audit dry-runs the webhook on them
    synthesized, unsized = _podgroups_to_be(kube, store)
    used = planner_settings.SettingsUsed(ControllerSettings(), "given")
    if config is None:
        used = await _settings(kube, *controller)
        config = planner_config(used.settings)
    snapshot, views = gangs.snapshot(store, now)
    return ClusterState(
        store,
        snapshot,
        views,
        config,
        now,
        workloads,
        {str(resource_type) for resource_type in served_types},
        synthesized,
        used,
        schedulers,
        unsized,
    )


def _podgroups_to_be(kube: Kube, store: Store) -> tuple[set[GangKey], dict[GangKey, str]]:
    """PodGroups the controller would create now (``PodGroupFactory.planned``), put in the store;
    and the gangs that need one whose size is not known yet, with what they wait for."""
    synthesized: set[GangKey] = set()
    unsized: dict[GangKey, str] = {}
    factory = PodGroupFactory(kube, store)
    for key in sorted(store.gang_keys(), key=str):
        if store.podgroup(key) is not None or key.namespace in store.terminating_namespaces:
            continue
        manifest = factory.planned(key)
        if manifest is not None:
            store.upsert_podgroup(PODGROUPS, manifest)
            synthesized.add(key)
            continue
        sizing = factory.sizing(key)
        if sizing is not None and not sizing.known:
            unsized[key] = waiting_message(sizing)
    return synthesized, unsized
