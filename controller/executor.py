"""Carry out the plan: record admissions, lift gates, roll back, evict victims, give up.

Every write goes through the ``Kube`` adapter. Order matters and is the point of this module:
an admission is recorded on the PodGroup (and assumed in the store) *before* any gate is lifted,
and gates are lifted for all members concurrently so the scheduler sees the whole gang at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from controller import admission_record
from controller.admission_record import AdmissionRecord
from controller.core.model import GangKey, Pod, Preempt
from controller.events import EventRecorder
from controller.gangs import GangView
from controller.kube import ApiError, Kube, gather_limited
from controller.metrics import ControllerMetrics
from controller.resources import JOBS, PODS
from controller.store import Assumed, Store
from shared import constants as c

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExecutorSettings:
    concurrency: int = 64  # parallel pod patches per admission
    eviction_grace_seconds: int | None = None  # None: each pod's own terminationGracePeriodSeconds
    dry_run_preemption: bool = False


class Executor:
    def __init__(
        self,
        kube: Kube,
        store: Store,
        events: EventRecorder,
        metrics: ControllerMetrics,
        clock: Callable[[], float],
        settings: ExecutorSettings | None = None,
    ) -> None:
        self.kube = kube
        self.store = store
        self.events = events
        self.metrics = metrics
        self.clock = clock
        self.settings = settings or ExecutorSettings()

    # ---- admission ------------------------------------------------------------------------------
    async def record_admission(
        self, view: GangView, placement: Mapping[str, str | None], booked: Mapping[str, str]
    ) -> AdmissionRecord:
        """Write the admission on the PodGroup first; assume it in the store so no pass re-gives the room."""
        now = self.clock()
        live = {p.uid for p in view.members}
        existing = admission_record.decode(view.podgroup.annotations) or AdmissionRecord(now, {})
        record = existing.merged(placement, booked, keep=live)
        key = view.podgroup.key
        self.store.assumed[key] = Assumed(dict(record.placement), record.at, dict(record.booked))
        try:
            await self.kube.patch(
                view.podgroup.rt,
                key.namespace,
                key.name,
                {"metadata": {"annotations": {c.ADMISSION_ANNOTATION: record.encode()}}},
            )
        except Exception:
            self.store.assumed.pop(key, None)  # forget on failure: the room is free again
            raise
        return record

    async def lift_gates(self, members: list[Pod], placement: Mapping[str, str | None]) -> list[str]:
        """Remove our gate from every given member at once (pinning each); returns failures."""
        started = time.perf_counter()
        done_at: list[float] = []

        async def lift(pod: Pod) -> None:
            spec: dict[str, object] = {"schedulingGates": [{"$patch": "delete", "name": c.GATE}]}
            node = placement.get(pod.uid)
            # A gated pod's nodeSelector may only be tightened: never overwrite an existing pin.
            if node and c.HOSTNAME_LABEL not in pod.node_selector:
                spec["nodeSelector"] = {c.HOSTNAME_LABEL: node}
            await self.kube.patch(PODS, pod.namespace, pod.name, {"spec": spec}, patch_type="strategic")
            done_at.append(time.perf_counter())

        targets = [p for p in members if p.gated and not p.terminating]
        results = await gather_limited(self.settings.concurrency, *(lift(p) for p in targets))
        failures = []
        for pod, result in zip(targets, results, strict=True):
            if isinstance(result, ApiError) and result.not_found:
                continue  # gone meanwhile: its owner makes a new, gated one
            if isinstance(result, BaseException):
                failures.append(f"{pod.name}: {result}")
        if done_at:
            self.metrics.gate_spread.observe(max(done_at) - min(done_at))
            self.metrics.admission_latency.observe(max(done_at) - started)
        return failures

    async def admit(
        self, view: GangView, placement: Mapping[str, str | None], booked: Mapping[str, str], message: str
    ) -> None:
        first = not view.gang.admitted and view.gang.admitted_at is None
        await self.record_admission(view, placement, booked)
        members = [p for p in view.members if p.uid in placement]
        failures = await self.lift_gates(members, placement)
        if failures:
            raise RuntimeError(f"gates not lifted for {len(failures)} members: {'; '.join(failures[:3])}")
        if first:
            self.metrics.admissions.inc()
            self.metrics.gang_wait.observe(max(0.0, self.clock() - view.gang.created))
            await self.events.emit(view.podgroup, "Admitted", message)
        else:
            await self.events.emit(view.podgroup, "MembersAdmitted", message)

    async def finish_admission(self, view: GangView) -> None:
        """Lift the gates of members recorded as admitted but still gated (a restart mid-lift)."""
        pending = [p for p in view.members if p.gated and p.uid in view.gang.admitted]
        if not pending:
            return
        log.info(
            "finishing a half-lifted admission", extra={"gang": str(view.gang.key), "members": len(pending)}
        )
        failures = await self.lift_gates(pending, view.gang.admitted)
        if failures:
            raise RuntimeError(f"gates not lifted for {len(failures)} members: {'; '.join(failures[:3])}")

    # ---- rollback and give-up -------------------------------------------------------------------
    async def _clear_admission(self, view: GangView) -> None:
        key = view.podgroup.key
        self.store.assumed.pop(key, None)
        await self.kube.patch(
            view.podgroup.rt,
            key.namespace,
            key.name,
            {"metadata": {"annotations": {c.ADMISSION_ANNOTATION: None}}},
        )

    async def _delete_owned(self, view: GangView) -> tuple[int, list[str]]:
        owned = [p for p in view.members if p.owner is not None and not p.finished and not p.terminating]
        bare = [p.name for p in view.members if p.owner is None and not p.finished]
        results = await gather_limited(
            self.settings.concurrency,
            *(self.kube.delete(PODS, p.namespace, p.name, uid=p.uid) for p in owned),
        )
        for pod, result in zip(owned, results, strict=True):
            if isinstance(result, BaseException) and not (isinstance(result, ApiError) and result.not_found):
                log.warning(
                    "delete failed", extra={"pod": f"{pod.namespace}/{pod.name}", "error": str(result)}
                )
        return len(owned), bare

    async def roll_back(self, view: GangView, reason: str) -> None:
        """Not all admitted members bound in time: restart the gang whole, through its owners."""
        deleted, bare = await self._delete_owned(view)
        await self._clear_admission(view)
        self.metrics.rollbacks.inc()
        message = f"{reason}; deleted {deleted} owned members so their owners recreate them gated"
        if bare:
            message += f"; bare pods are never deleted, left as they are: {', '.join(sorted(bare))}"
        await self.events.emit(view.podgroup, "RolledBack", message, warning=True)

    async def give_up(self, view: GangView, message: str) -> None:
        """Schedule timeout with action "release": suspend the gang's Jobs, delete its other owned pods."""
        jobs = sorted({p.owner.name for p in view.members if p.owner is not None and p.owner.kind == "Job"})
        for job in jobs:
            try:
                await self.kube.patch(JOBS, view.gang.key.namespace, job, {"spec": {"suspend": True}})
            except ApiError as err:
                log.warning("could not suspend job", extra={"job": job, "error": str(err)})
        deleted = 0
        if not jobs:
            deleted, _ = await self._delete_owned(view)
        await self.events.emit(
            view.podgroup,
            "GaveUp",
            f"{message}; suspended Jobs: {', '.join(jobs) or 'none'}; deleted owned pods: {deleted}",
            warning=True,
        )

    # ---- preemption -----------------------------------------------------------------------------
    async def preempt(self, view: GangView, decision: Preempt, views: Mapping[GangKey, GangView]) -> None:
        now = self.clock()
        key = view.podgroup.key
        victims_text = []
        evictions: list[Coroutine[Any, Any, None]] = []
        for victim in decision.victims:
            pods = [self.store.pods[uid] for uid in victim.pods if uid in self.store.pods]
            label = str(victim.gang) if victim.gang else ", ".join(f"{p.namespace}/{p.name}" for p in pods)
            victims_text.append(label)
            gpu_seconds = sum(
                p.requests.get(c.GPU_RESOURCE, 0) * max(0.0, now - (p.started or now)) for p in pods
            )
            if victim.gang is not None and victim.gang in views:
                await self.events.emit(
                    views[victim.gang].podgroup,
                    "Preempted",
                    f"{'would be ' if self.settings.dry_run_preemption else ''}evicted whole "
                    f"to make room for {key} (priority {view.gang.priority})",
                    warning=True,
                )
            if self.settings.dry_run_preemption:
                continue
            self.metrics.preemptions.inc()
            self.metrics.preempted_gpu_seconds.inc(gpu_seconds)
            evictions.extend(
                self.kube.evict(p.namespace, p.name, self.settings.eviction_grace_seconds) for p in pods
            )
        if self.settings.dry_run_preemption:
            await self.events.emit(
                view.podgroup, "PreemptionDryRun", f"would evict: {'; '.join(victims_text)}"
            )
            return
        self.store.holds[key] = Assumed(dict(decision.placement), now)
        results = await gather_limited(self.settings.concurrency, *evictions)
        failed = [
            r
            for r in results
            if isinstance(r, BaseException) and not (isinstance(r, ApiError) and r.not_found)
        ]
        await self.events.emit(
            view.podgroup, "Preempting", f"evicting {'; '.join(victims_text)}: {decision.message}"
        )
        if failed:
            raise RuntimeError(f"{len(failed)} evictions failed: {failed[0]}")
