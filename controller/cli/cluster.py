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
from typing import Any

from controller import gangs
from controller import resources as r
from controller.app import WATCHED, planner_config
from controller.config import ControllerSettings
from controller.core.config import PlannerConfig
from controller.core.model import GangKey, Snapshot
from controller.gangs import GangView
from controller.kube import JSON, ApiError, Kube
from controller.podgroups import PodGroupFactory
from controller.resources import ResourceType
from controller.store import Store, sinks_for
from shared import constants as c

DEPLOYMENTS = r.ResourceType("apps", "v1", "deployments", "Deployment")
STATEFULSETS = r.ResourceType("apps", "v1", "statefulsets", "StatefulSet")
MPIJOBS = r.ResourceType("kubeflow.org", "v2beta1", "mpijobs", "MPIJob")
# Read besides what the controller watches: owners of members (explain Job/x, MPIJob/x) and the
# workloads the audit dry-runs the webhook on.
WORKLOAD_TYPES = (r.JOBS, STATEFULSETS, MPIJOBS)
CONTROLLER_ENV_PREFIX = "PHALANX_CONTROLLER_"


@dataclass
class ClusterState:
    store: Store
    snapshot: Snapshot
    views: dict[GangKey, GangView]
    config: PlannerConfig
    now: float
    # kind -> raw objects (Job, StatefulSet, MPIJob), all namespaces
    workloads: dict[str, list[JSON]] = field(default_factory=dict)
    served: set[str] = field(default_factory=set)  # str(ResourceType) of every served type read
    # Gangs whose PodGroup the controller has not created yet (built here as it would build it).
    synthesized: set[GangKey] = field(default_factory=set)
    config_source: str = "defaults"
    # schedulerName of every pod placed on a node: evidence that a scheduler runs.
    schedulers_seen: set[str] = field(default_factory=set)


def controller_settings(deployment: JSON | None) -> tuple[ControllerSettings, str]:
    """The controller's settings as its Deployment sets them (plain ``value`` env entries)."""
    if deployment is None:
        return ControllerSettings(), "defaults"
    values: dict[str, Any] = {}
    for container in (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "containers"
    ) or ():
        for env in container.get("env") or ():
            name = str(env.get("name", ""))
            if name.startswith(CONTROLLER_ENV_PREFIX) and "value" in env:
                values[name.removeprefix(CONTROLLER_ENV_PREFIX).lower()] = env["value"]
    meta = deployment.get("metadata") or {}
    known = {k: v for k, v in values.items() if k in ControllerSettings.model_fields}
    return ControllerSettings(**known), f"Deployment {meta.get('namespace')}/{meta.get('name')}"


async def _deployment(kube: Kube, namespace: str, name: str) -> JSON | None:
    try:
        return await kube.get(DEPLOYMENTS, namespace, name)
    except ApiError as err:
        if err.status in (403, 404):
            return None
        raise


async def load(
    kube: Kube,
    now: float,
    controller: tuple[str, str] = ("phalanx-system", "phalanx-controller"),
    config: PlannerConfig | None = None,
    extra: Sequence[ResourceType] = WORKLOAD_TYPES,
) -> ClusterState:
    """List everything once and build the snapshot the controller would plan on at ``now``."""
    wanted = [*WATCHED, *extra]
    served_flags = await asyncio.gather(*(kube.served(rt) for rt in wanted))
    types = [rt for rt, ok in zip(wanted, served_flags, strict=True) if ok]
    lists = await asyncio.gather(*(kube.list(rt) for rt in types))
    store = Store()
    sinks = sinks_for(store, [t for t in types if t in r.PODGROUP_TYPES])
    workloads: dict[str, list[JSON]] = {}
    schedulers = {c.DEFAULT_SCHEDULER}
    for rt, (items, _) in zip(types, lists, strict=True):
        if rt == r.PODS:
            schedulers.update(
                str(spec["schedulerName"])
                for pod in items
                if (spec := pod.get("spec") or {}).get("nodeName") and spec.get("schedulerName")
            )
        sink = sinks.get(str(rt))
        if sink is not None:
            sink.replace(items)
        else:
            workloads[rt.kind] = items
    synthesized = set()
    factory = PodGroupFactory(kube, store)
    for key in sorted(store.gang_keys(), key=str):
        if store.podgroup(key) is None:
            manifest = factory.planned(key)
            if manifest is not None:
                store.upsert_podgroup(r.PODGROUPS, manifest)
                synthesized.add(key)
    source = "given"
    if config is None:
        settings, source = controller_settings(await _deployment(kube, *controller))
        config = planner_config(settings)
    snapshot, views = gangs.snapshot(store, now)
    return ClusterState(
        store,
        snapshot,
        views,
        config,
        now,
        workloads,
        {str(t) for t in types},
        synthesized,
        source,
        schedulers,
    )
