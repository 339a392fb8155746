"""The one wiring of the controller's parts: store, work queue, events, executor, reconciler, and
where each watched type's lists and events go.

``runtime/app.py`` runs these parts with informers, leader election and a health server; the
component tests' harness (tests/component/controller/harness.py) runs the very same parts against
an in-memory API server, delivering watch events through the same sinks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from controller.api import resources as r
from controller.api.kube import Kube
from controller.api.queue_feed import queue_sinks
from controller.api.resources import ResourceType
from controller.api.store import Store, StoreSink, sinks_for
from controller.core import BEST_EFFORT_ATOMIC, CHECK_CAPACITY, PlannerConfig, ProvisioningConfig, TimerConfig
from controller.pipeline.events import EventRecorder
from controller.pipeline.executor import Executor, ExecutorSettings
from controller.pipeline.metrics import ControllerMetrics
from controller.pipeline.provisioning import Provisioner
from controller.pipeline.reconciler import Reconciler
from controller.pipeline.workqueue import WorkQueue
from controller.runtime.config import ControllerSettings, parse_topologies

WATCHED = [
    r.NODES,
    r.NAMESPACES,
    r.PODS,
    r.PRIORITY_CLASSES,
    r.PDBS,
    # The native gang API at each version Phalanx reads: only the newest served one is watched.
    *r.WORKLOAD_VERSIONS,
    *r.NATIVE_PODGROUP_VERSIONS,
    *r.PODGROUP_TYPES,
    *r.QUEUE_TYPES,
    *r.SIZED_WORKLOAD_TYPES,
    *r.DRA_TYPES,
]


def informer_sinks(store: Store, types: list[ResourceType]) -> dict[str, StoreSink]:
    """Where each watched type's lists and events go (also what kubectl-phalanx feeds its store)."""
    sinks = sinks_for(store, [t for t in types if t in r.PODGROUP_TYPES])
    sinks.update(queue_sinks(store, types, sinks[str(r.NAMESPACES)] if r.NAMESPACES in types else None))
    return sinks


def planner_config(settings: ControllerSettings) -> PlannerConfig:
    return PlannerConfig(
        default_schedule_timeout=settings.default_schedule_timeout_seconds,
        preemption=settings.preemption,
        preemption_min_runtime_seconds=settings.preemption_min_runtime_seconds,
        starvation_age_seconds=settings.starvation_age_seconds,
        topologies=parse_topologies(settings.topology_levels, settings.topologies),
    )


def timer_config(settings: ControllerSettings, planner: PlannerConfig) -> TimerConfig:
    return TimerConfig(
        bind_timeout=settings.bind_timeout_seconds,
        degraded_timeout=settings.degraded_gang_timeout_seconds,
        default_schedule_timeout=planner.default_schedule_timeout,
        release_on_timeout=settings.schedule_timeout_action == "release",
    )


def provisioning_config(settings: ControllerSettings) -> ProvisioningConfig:
    classes = {"best-effort-atomic": BEST_EFFORT_ATOMIC, "check-capacity": CHECK_CAPACITY}
    return ProvisioningConfig(
        enabled=settings.provisioning_requests in classes,
        class_name=classes.get(settings.provisioning_requests, BEST_EFFORT_ATOMIC),
        retry_seconds=settings.provisioning_retry_seconds,
        answer_seconds=settings.provisioning_answer_seconds,
    )


@dataclass
class Parts:
    store: Store
    metrics: ControllerMetrics
    queue: WorkQueue
    events: EventRecorder
    executor: Executor
    reconciler: Reconciler
    sinks: dict[str, StoreSink]  # by str(ResourceType), for every type in WATCHED


class Wired:
    """What a wired process (the controller, the component tests' harness) reads of its parts."""

    parts: Parts

    @property
    def store(self) -> Store:
        return self.parts.store

    @property
    def metrics(self) -> ControllerMetrics:
        return self.parts.metrics

    @property
    def queue(self) -> WorkQueue:
        return self.parts.queue

    @property
    def events(self) -> EventRecorder:
        return self.parts.events

    @property
    def executor(self) -> Executor:
        return self.parts.executor

    @property
    def reconciler(self) -> Reconciler:
        return self.parts.reconciler

    @property
    def sinks(self) -> dict[str, StoreSink]:
        return self.parts.sinks


def wire(
    settings: ControllerSettings,
    kube: Kube,
    clock: Callable[[], float],
    queue: WorkQueue,
    planner: PlannerConfig | None = None,
    background_events: bool = True,
) -> Parts:
    """The controller's parts, wired. ``planner`` overrides what ``settings`` say of the planner
    (tests set knobs the command line does not offer)."""
    store = Store()
    metrics = ControllerMetrics()
    events = EventRecorder(kube, clock, settings.identity, background=background_events)
    executor = Executor(
        kube,
        store,
        events,
        metrics,
        clock,
        ExecutorSettings(
            concurrency=settings.patch_concurrency,
            eviction_grace_seconds=settings.eviction_grace_seconds,
            dry_run_preemption=settings.preemption_dry_run,
        ),
    )
    planner = planner or planner_config(settings)
    provisioning = provisioning_config(settings)
    provisioner = (
        Provisioner(kube, provisioning, events, metrics, clock, store.podgroup_uid)
        if provisioning.enabled
        else None
    )
    reconciler = Reconciler(
        kube,
        store,
        queue,
        executor,
        events,
        metrics,
        planner,
        timer_config(settings, planner),
        clock,
        provisioning,
        provisioner,
    )
    return Parts(store, metrics, queue, events, executor, reconciler, informer_sinks(store, WATCHED))
