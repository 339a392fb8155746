"""The controller process: the parts ``wiring.wire`` builds, fed by informers, plus leadership and
the health/metrics server."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from aiohttp import web

from controller.api import resources as r
from controller.api.informer import Informer
from controller.api.kube import Kube
from controller.api.resources import ResourceType
from controller.core import messages as msg
from controller.pipeline.reconciler import REPLAN
from controller.pipeline.workqueue import WorkQueue
from controller.runtime.config import ControllerSettings
from controller.runtime.leader import LeaderElector
from controller.runtime.stall import StallWatch
from controller.runtime.wiring import WATCHED, Wired, wire
from shared.health import health_app, registry_metrics

log = logging.getLogger(__name__)


class LeadershipLost(Exception):
    """This replica stopped leading: it exits, to be restarted as a standby."""


class Controller(Wired):
    def __init__(
        self,
        settings: ControllerSettings,
        kube: Kube,
        clock: Callable[[], float] = time.time,
        lease_kube: Kube | None = None,
    ) -> None:
        """``lease_kube``: the client leadership is renewed through; a connection of its own in the
        process, so that a gang's hundreds of gate lifts never hold a renewal past its deadline."""
        self.settings = settings
        self.kube = kube
        self.clock = clock
        self.parts = wire(settings, kube, clock, WorkQueue(time.monotonic))
        identity = settings.identity
        self.elector = LeaderElector(
            lease_kube or kube,
            settings.namespace,
            settings.lease_name,
            identity,
            clock,
            settings.lease_duration_seconds,
            settings.lease_renew_seconds,
        )
        # Read when scraped: it cannot drift from what the elector (or --no-leader-election) decided.
        self.metrics.leader.set_function(lambda: 1.0 if self.elector.is_leader.is_set() else 0.0)
        self.informers: list[Informer] = []
        self._unserved_told: set[str] = set()

    @property
    def synced(self) -> bool:
        return bool(self.informers) and all(i.synced.is_set() for i in self.informers)

    async def _served_types(self, wanted: list[ResourceType]) -> list[ResourceType]:
        served = []
        for rt in wanted:
            if await self.kube.served(rt):
                served.append(rt)
            elif str(rt) not in self._unserved_told:  # said once, not on every resync
                self._unserved_told.add(str(rt))
                log.info("resource not served, not watched yet", extra={"resource": str(rt)})
        return r.first_served(served)

    def _start_informers(self, group: asyncio.TaskGroup, types: list[ResourceType]) -> None:
        for rt in types:
            if rt in r.NATIVE_PODGROUP_VERSIONS:
                self.store.native_podgroup_api_version = rt.api_version
        informers = [Informer(self.kube, rt, self.sinks[str(rt)]) for rt in types]
        self.informers.extend(informers)
        for informer in informers:
            group.create_task(informer.run(), name=f"informer {informer.rt}")

    async def _watch_new_kinds(self, group: asyncio.TaskGroup) -> None:
        """A CRD installed after the start (a component added later, or not yet Established when
        the controller came up) is watched from then on: its PodGroups would be invisible. Its
        informer joins the same task group, so its crash stops the process like any other's."""
        while True:
            await asyncio.sleep(self.settings.resync_seconds)
            watched = {str(i.rt) for i in self.informers}  # any version of it
            missing = [rt for rt in WATCHED if str(rt) not in watched]
            if not missing:
                continue
            try:
                new = await self._served_types(missing)
            except Exception as err:
                log.warning("could not check served resources", extra={"error": repr(err)})
                continue
            if new:
                log.info("resource now served, watching it", extra={"resources": [str(t) for t in new]})
                self._start_informers(group, new)

    async def _leadership_kept(self) -> None:
        await self.elector.lost.wait()
        raise LeadershipLost("lost leadership")

    def health_app(self) -> web.Application:
        """``/healthz`` (leadership not lost), ``/readyz`` (informers synced), ``/metrics``."""
        return health_app(
            alive=lambda: not self.elector.lost.is_set(),
            ready=lambda: self.synced,
            metrics=registry_metrics(self.metrics.registry),
            not_alive=msg.leadership_lost(),
            not_ready=msg.informers_not_synced(),
        )

    async def run(self, health_host: str | None = None, health_port: int | None = None) -> None:
        """Serve health, watch, elect and reconcile until cancelled, or until a task fails or
        leadership is lost (raised as ``LeadershipLost``, inside an ExceptionGroup): every
        long-running task lives in one TaskGroup, so none can die unnoticed."""
        runner = web.AppRunner(self.health_app())
        await runner.setup()
        site = web.TCPSite(
            runner, health_host or self.settings.health_bind_address, health_port or self.settings.health_port
        )
        await site.start()
        stalls = StallWatch(asyncio.get_running_loop())
        stalls.start()
        try:
            async with asyncio.TaskGroup() as group:
                types = await self._served_types(WATCHED)
                self._start_informers(group, types)
                await asyncio.gather(*(i.synced.wait() for i in self.informers))
                log.info("informers synced", extra={"resources": [str(t) for t in types]})
                if self.settings.leader_election:
                    group.create_task(self.elector.run(), name="leader election")
                    group.create_task(self._leadership_kept(), name="leadership kept")
                else:
                    self.elector.is_leader.set()
                group.create_task(self.reconciler.run(self.elector.is_leader), name="reconciler")
                group.create_task(self.events.run(), name="events")
                group.create_task(self._resync(), name="resync")
                group.create_task(self._watch_new_kinds(group), name="new kinds")
        finally:
            stalls.stop()
            if self.settings.leader_election:
                await self.elector.release()  # nothing admits any more: hand over at once
            await runner.cleanup()

    async def _resync(self) -> None:
        await self.elector.is_leader.wait()
        self.queue.add(REPLAN)
        while True:
            await asyncio.sleep(self.settings.resync_seconds)
            self.queue.add(REPLAN)
