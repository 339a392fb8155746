"""Wire the controller together: informers -> store -> work queue -> reconciler, plus leadership
and the health/metrics server."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable

from aiohttp import web

from controller import resources as r
from controller.config import ControllerSettings
from controller.core.config import PlannerConfig
from controller.events import EventRecorder
from controller.executor import Executor, ExecutorSettings
from controller.health import health_app
from controller.informer import Informer
from controller.kube import Kube
from controller.leader import LeaderElector
from controller.metrics import ControllerMetrics
from controller.queue_feed import queue_sinks
from controller.reconciler import REPLAN, Reconciler
from controller.resources import ResourceType
from controller.store import Store, sinks_for
from controller.workqueue import WorkQueue

log = logging.getLogger(__name__)


WATCHED = [
    r.NODES,
    r.NAMESPACES,
    r.PODS,
    r.PRIORITY_CLASSES,
    r.PDBS,
    r.WORKLOADS,
    *r.PODGROUP_TYPES,
    *r.QUEUE_TYPES,
]


def planner_config(settings: ControllerSettings) -> PlannerConfig:
    return PlannerConfig(
        default_schedule_timeout=settings.default_schedule_timeout_seconds,
        preemption=settings.preemption,
        preemption_min_runtime_seconds=settings.preemption_min_runtime_seconds,
        starvation_age_seconds=settings.starvation_age_seconds,
    )


class Controller:
    def __init__(
        self, settings: ControllerSettings, kube: Kube, clock: Callable[[], float] = time.time
    ) -> None:
        self.settings = settings
        self.kube = kube
        self.clock = clock
        self.store = Store()
        self.metrics = ControllerMetrics()
        self.queue = WorkQueue(time.monotonic)
        identity = settings.identity
        self.events = EventRecorder(kube, clock, identity)
        self.executor = Executor(
            kube,
            self.store,
            self.events,
            self.metrics,
            clock,
            ExecutorSettings(
                concurrency=settings.patch_concurrency,
                eviction_grace_seconds=settings.eviction_grace_seconds,
                dry_run_preemption=settings.preemption_dry_run,
            ),
        )
        self.reconciler = Reconciler(
            kube,
            self.store,
            self.queue,
            self.executor,
            self.events,
            self.metrics,
            planner_config(settings),
            clock,
            bind_timeout=settings.bind_timeout_seconds,
            timeout_action=settings.schedule_timeout_action,
            degraded_timeout=settings.degraded_gang_timeout_seconds,
        )
        self.elector = LeaderElector(
            kube,
            settings.namespace,
            settings.lease_name,
            identity,
            clock,
            settings.lease_duration_seconds,
            settings.lease_renew_seconds,
        )
        self.informers: list[Informer] = []

    @property
    def synced(self) -> bool:
        return bool(self.informers) and all(i.synced.is_set() for i in self.informers)

    async def _served_types(self, wanted: list[ResourceType]) -> list[ResourceType]:
        served = []
        for rt in wanted:
            if await self.kube.served(rt):
                served.append(rt)
            else:
                log.info("resource not served, not watched yet", extra={"resource": str(rt)})
        return served

    def _start_informers(self, types: list[ResourceType]) -> list[asyncio.Task[None]]:
        sinks = sinks_for(self.store, [t for t in types if t in r.PODGROUP_TYPES])
        sinks.update(
            queue_sinks(self.store, types, sinks[str(r.NAMESPACES)] if r.NAMESPACES in types else None)
        )
        informers = [Informer(self.kube, rt, sinks[str(rt)]) for rt in types]
        self.informers.extend(informers)
        return [asyncio.create_task(i.run(), name=f"informer {i.rt}") for i in informers]

    async def _watch_new_kinds(self, tasks: list[asyncio.Task[None]]) -> None:
        """A CRD installed after the start (a component added later, or not yet Established when
        the controller came up) is watched from then on: its PodGroups would be invisible."""
        while True:
            await asyncio.sleep(self.settings.resync_seconds)
            watched = {i.rt for i in self.informers}
            missing = [rt for rt in WATCHED if rt not in watched]
            if not missing:
                continue
            try:
                new = await self._served_types(missing)
            except Exception as err:
                log.warning("could not check served resources", extra={"error": repr(err)})
                continue
            if new:
                log.info("resource now served, watching it", extra={"resources": [str(t) for t in new]})
                tasks.extend(self._start_informers(new))

    async def run(self, health_host: str | None = None, health_port: int | None = None) -> None:
        runner = web.AppRunner(
            health_app(lambda: self.synced, lambda: not self.elector.lost.is_set(), self.metrics.registry)
        )
        await runner.setup()
        site = web.TCPSite(
            runner, health_host or self.settings.health_bind_address, health_port or self.settings.health_port
        )
        await site.start()
        tasks: list[asyncio.Task[None]] = []
        try:
            types = await self._served_types(WATCHED)
            tasks = self._start_informers(types)
            await asyncio.gather(*(i.synced.wait() for i in self.informers))
            log.info("informers synced", extra={"resources": [str(t) for t in types]})
            if self.settings.leader_election:
                tasks.append(asyncio.create_task(self.elector.run(), name="leader election"))
            else:
                self.elector.is_leader.set()
            tasks.append(asyncio.create_task(self.reconciler.run(self.elector.is_leader), name="reconciler"))
            tasks.append(asyncio.create_task(self._resync(), name="resync"))
            tasks.append(asyncio.create_task(self._watch_new_kinds(tasks), name="new kinds"))
            lost = asyncio.create_task(self.elector.lost.wait())
            done, _ = await asyncio.wait([*tasks, lost], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is lost:
                    raise SystemExit("lost leadership")
                task.result()  # surface the crash of a long-running task
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            if self.settings.leader_election:
                await self.elector.release()  # nothing admits any more: hand over at once
            await runner.cleanup()

    async def _resync(self) -> None:
        await self.elector.is_leader.wait()
        self.queue.add(REPLAN)
        while True:
            await asyncio.sleep(self.settings.resync_seconds)
            self.queue.add(REPLAN)
