"""Carry out the plan: record admissions, lift gates, roll back, evict victims, give up.

Every write goes through the ``Kube`` adapter. Order matters and is the point of this module:
an admission is recorded on the PodGroup (and assumed in the store) *before* any gate is lifted,
and gates are lifted for all members concurrently so the scheduler sees the whole gang at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from controller.api import records
from controller.api.admission_record import RECORD_LIMIT, AdmissionRecord, RecordTooLarge
from controller.api.kube import ApiError, Kube, gather_limited
from controller.api.resources import JOBS, PODS
from controller.api.store import Store
from controller.core import EventReason, GangKey, Pod, Preempt, RollBack, RollBackCause
from controller.core import messages as msg
from controller.pipeline.events import EventRecorder
from controller.pipeline.gangs import GangView
from controller.pipeline.metrics import ControllerMetrics, queue_label
from shared import constants
from shared.jsonread import JsonObject

log = logging.getLogger(__name__)
# On a Job that Phalanx suspended to re-queue its gang whole (value: why, e.g. "preempted",
# "rolled-back"); removed when Phalanx resumes the Job. Jobs labelled by earlier versions with
# ``phalanx.io/preempted=true`` are resumed the same way.
REQUEUED_LABEL = "phalanx.io/requeued"
# Written by versions before phalanx.io/requeued; Jobs that carry it are resumed the same way.
LEGACY_PREEMPTED_LABEL = "phalanx.io/preempted"
# The value of phalanx.io/requeued on a Job re-queued by a rollback, by the rollback's cause.
REQUEUED_BECAUSE = {RollBackCause.BIND_TIMEOUT: "rolled-back", RollBackCause.DEGRADED: "degraded"}


def _jobs_of(pods: list[Pod]) -> list[tuple[str, str]]:
    """(namespace, name) of the Jobs that own these pods."""
    return sorted({(p.namespace, p.owner.name) for p in pods if p.owner and p.owner.kind == "Job"})


def _failures(results: list[object]) -> list[BaseException]:
    return [
        r for r in results if isinstance(r, BaseException) and not (isinstance(r, ApiError) and r.not_found)
    ]


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
        # Jobs suspended to re-queue may wait to be resumed; checked at start, so a restart never
        # leaves them suspended.
        self.requeued_jobs = True

    # ---- admission ------------------------------------------------------------------------------
    async def record_admission(
        self, view: GangView, placement: Mapping[str, str | None], booked: Mapping[str, str]
    ) -> AdmissionRecord:
        """Write the admission on the PodGroup first; assume it in the store so no pass re-gives the room."""
        now = self.clock()
        live = {p.uid for p in view.members}
        key = view.podgroup.key
        # With an earlier admission the informer may not have delivered yet.
        existing = self.store.admission(view.podgroup)
        record = (existing or AdmissionRecord(now, {})).merged(placement, booked, keep=live, at=now)
        encoded = record.encode()
        if len(encoded) > RECORD_LIMIT:
            # Before anything is written or lifted: a gang admitted without its record could be
            # left torn by a restart.
            raise RecordTooLarge(len(record.placement), len(encoded))
        self.store.assume_admission(key, record)
        try:
            await self.kube.patch(
                view.podgroup.rt,
                key.namespace,
                key.name,
                {"metadata": {"annotations": {constants.ADMISSION_ANNOTATION: encoded}}},
            )
        except Exception:
            self.store.forget_admission(key)
            raise
        return record

    async def lift_gates(
        self,
        members: list[Pod],
        placement: Mapping[str, str | None],
        annotations: Mapping[str, str] | None = None,
    ) -> list[str]:
        """Remove our gate from every given member at once (pinning each, and setting
        ``annotations`` in the same patch); returns failures."""
        started = time.perf_counter()
        done_at: list[float] = []

        async def lift(pod: Pod) -> None:
            spec: dict[str, object] = {"schedulingGates": [{"$patch": "delete", "name": constants.GATE}]}
            node = placement.get(pod.uid)
            if node:
                # Pinned by node name, in the patch that lifts the gate (nodeSelectorTerms is an
                # atomic list: the pod's own terms go back unchanged, each with the pin added).
                terms = records.pinned_node_terms(pod, node)
                spec["affinity"] = {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
                    }
                }
            body: dict[str, object] = {"spec": spec}
            if annotations and not _overwrites(pod, annotations):
                # E.g. the ProvisioningRequest the pod consumes: set before the scheduler sees it.
                body["metadata"] = {"annotations": dict(annotations)}
            await self.kube.patch(PODS, pod.namespace, pod.name, body, patch_type="strategic")
            self.store.assume_lifted(pod.uid)
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
        self,
        view: GangView,
        placement: Mapping[str, str | None],
        booked: Mapping[str, str],
        message: str,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        first = not view.gang.admitted and view.gang.admitted_at is None
        await self.record_admission(view, placement, booked)
        members = [p for p in view.members if p.uid in placement]
        failures = await self.lift_gates(members, placement, annotations)
        # The admission stands once recorded (a retry finishes the lift): report it either way.
        if first:
            self.metrics.admissions.inc()
            queue = queue_label(view.gang.queue, self.store.queues.records())
            self.metrics.gang_wait.labels(queue=queue).observe(max(0.0, self.clock() - view.gang.wait_start))
            await self.events.emit(view.podgroup, EventReason.ADMITTED, message)
        else:
            await self.events.emit(view.podgroup, EventReason.MEMBERS_ADMITTED, message)
        if failures:
            raise RuntimeError(f"gates not lifted for {len(failures)} members: {'; '.join(failures[:3])}")

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
        self.store.forget_admission(key)
        await self.kube.patch(
            view.podgroup.rt,
            key.namespace,
            key.name,
            {"metadata": {"annotations": {constants.ADMISSION_ANNOTATION: None}}},
        )
        self.store.assume_admission_cleared(key)

    async def _requeue_jobs(self, jobs: list[tuple[str, str]], why: str) -> list[object]:
        """Suspend Jobs so their pods go away the way Kueue re-queues a workload: the Job controller
        deletes them without counting failures against ``backoffLimit`` or arming its backoff, and
        ``resume_requeued_jobs`` lets it recreate them, gated, once they are gone."""
        patches = [
            self.kube.patch(
                JOBS, ns, name, {"metadata": {"labels": {REQUEUED_LABEL: why}}, "spec": {"suspend": True}}
            )
            for ns, name in jobs
        ]
        self.requeued_jobs = self.requeued_jobs or bool(jobs)
        return list(await gather_limited(self.settings.concurrency, *patches))

    async def _delete_owned(self, view: GangView, except_kind: str | None = None) -> tuple[int, list[str]]:
        """Delete the members an owner recreates (gated); returns (how many, names of bare pods)."""
        owned = [
            p
            for p in view.members
            if p.owner is not None and p.owner.kind != except_kind and not p.finished and not p.terminating
        ]
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

    async def roll_back(self, view: GangView, rollback: RollBack) -> None:
        """Not all admitted members bound in time (or a running gang fell apart): restart the gang
        whole, through its owners. Jobs are suspended and resumed, as for preemption; other owners'
        pods are deleted and recreated gated."""
        live = [p for p in view.members if not p.finished and not p.terminating]
        jobs = _jobs_of(live)
        failed = _failures(await self._requeue_jobs(jobs, REQUEUED_BECAUSE[rollback.cause]))
        if failed:
            raise RuntimeError(f"{len(failed)} Jobs not suspended: {failed[0]}")
        deleted, bare = await self._delete_owned(view, except_kind="Job")
        await self._clear_admission(view)
        self.metrics.rollbacks.labels(reason=rollback.cause.value).inc()
        message = msg.rolled_back(rollback.message, len(jobs), deleted, bare)
        await self.events.emit(view.podgroup, EventReason.ROLLED_BACK, message, warning=True)

    async def give_up(self, view: GangView, message: str) -> None:
        """Schedule timeout with action "release": suspend the gang's Jobs, delete its other owned pods."""
        jobs = sorted({p.owner.name for p in view.members if p.owner is not None and p.owner.kind == "Job"})
        for job in jobs:
            try:
                await self.kube.patch(JOBS, view.gang.key.namespace, job, {"spec": {"suspend": True}})
            except ApiError as err:
                log.warning("could not suspend job", extra={"job": job, "error": str(err)})
        # A suspended Job removes its own pods; other owners recreate theirs, gated.
        deleted, _ = await self._delete_owned(view, except_kind="Job")
        await self.events.emit(
            view.podgroup, EventReason.GAVE_UP, msg.gave_up(message, jobs, deleted), warning=True
        )

    # ---- preemption -----------------------------------------------------------------------------
    async def preempt(self, view: GangView, decision: Preempt, views: Mapping[GangKey, GangView]) -> None:
        """Free the room the plan chose, whole victim at a time, or nothing at all.

        Every victim pod is first evicted as a dry run, so a PodDisruptionBudget the snapshot did
        not know about stops the preemption before anything is disturbed. Then pods owned by a Job
        are released the way Kueue does it -- the Job is suspended (its controller deletes the pods
        without counting failures or arming its pod-creation backoff) and resumed as soon as they
        are gone, so it recreates them gated and the gang re-queues whole; every other pod is
        evicted through the Eviction API (graceful, PDB-checked) and recreated by its owner. A
        victim that is only some pods of a gang with disruption mode Single keeps its admission:
        only those pods are evicted (a Job's too), and their replacements rejoin the running gang.
        """
        victim_pods, summary = self._victims(decision)
        if self.settings.dry_run_preemption:
            await self.events.emit(
                view.podgroup,
                EventReason.PREEMPTION_DRY_RUN,
                msg.preemption_dry_run(summary, decision.message),
            )
            return
        await self._check_evictions(view, victim_pods, summary)
        now = self.clock()
        key = view.podgroup.key
        gpu = decision.gpu_resource  # nvidia.com/gpu, or the DeviceClass whose devices are the GPUs
        cost = msg.preemption_cost(decision.gpus_evicted, decision.gpus_gained, gpu)
        single: set[str] = set()  # pods of victims that lose only those pods
        for victim in decision.victims:
            if not victim.whole:
                single.update(victim.pods)
            if victim.gang is not None and victim.gang in views:
                lost = msg.preempted_by if victim.whole else msg.preempted_pods_by
                if victim.whole:
                    # The victim re-queues whole: its old admission must not let its new pods trickle in.
                    await self._clear_admission(views[victim.gang])
                await self.events.emit(
                    views[victim.gang].podgroup,
                    EventReason.PREEMPTED,
                    lost(str(key), view.gang.priority, len(victim.pods), victim.gpus, gpu, cost),
                    warning=True,
                )
        self.metrics.preempted_gpu_seconds.inc(decision.gpu_seconds)
        self.metrics.preemptions.inc(len(decision.victims))
        self.metrics.preemption_gpus_evicted.inc(decision.gpus_evicted)
        self.metrics.preemption_gpus_gained.inc(decision.gpus_gained)
        self.store.hold(key, decision.placement, now)
        requeued = [p for p in victim_pods if p.owner and p.owner.kind == "Job" and p.uid not in single]
        by_job = {p.uid for p in requeued}
        evictions = [
            self.kube.evict(p.namespace, p.name, self.settings.eviction_grace_seconds)
            for p in victim_pods
            if p.uid not in by_job
        ]
        results = list(await gather_limited(self.settings.concurrency, *evictions))
        results += await self._requeue_jobs(_jobs_of(requeued), "preempted")
        failed = _failures(results)
        await self.events.emit(view.podgroup, EventReason.PREEMPTING, msg.evicting(summary, decision.message))
        if failed:
            raise RuntimeError(f"{len(failed)} evictions failed: {failed[0]}")

    def _victims(self, decision: Preempt) -> tuple[list[Pod], str]:
        """The victims' pods the store knows, and a summary naming each victim for Events."""
        victim_pods: list[Pod] = []
        names = []
        for victim in decision.victims:
            pods = [self.store.pods[uid] for uid in victim.pods if uid in self.store.pods]
            victim_pods.extend(pods)
            names.append(
                str(victim.gang) if victim.gang else ", ".join(f"{p.namespace}/{p.name}" for p in pods)
            )
        return victim_pods, "; ".join(names)

    async def _check_evictions(self, view: GangView, victim_pods: list[Pod], summary: str) -> None:
        """Dry-run every eviction first: a budget the snapshot did not know stops it all."""
        checks = await gather_limited(
            self.settings.concurrency,
            *(
                self.kube.evict(p.namespace, p.name, self.settings.eviction_grace_seconds, dry_run=True)
                for p in victim_pods
            ),
        )
        refused = [
            f"{p.name}: {r}"
            for p, r in zip(victim_pods, checks, strict=True)
            if isinstance(r, BaseException) and not (isinstance(r, ApiError) and r.not_found)
        ]
        if refused:
            await self.events.emit(
                view.podgroup,
                EventReason.PREEMPTION_BLOCKED,
                msg.preemption_refused(summary, refused[0]),
                warning=True,
            )
            raise RuntimeError(f"preemption refused for {len(refused)} victim pods: {refused[0]}")

    async def resume_requeued_jobs(self) -> int:
        """Resume Jobs suspended to re-queue their gang once their pods are gone; returns how many
        still wait."""
        jobs: dict[tuple[str, str], JsonObject] = {}
        for selector in (REQUEUED_LABEL, f"{LEGACY_PREEMPTED_LABEL}=true"):
            found, _ = await self.kube.list(JOBS, label_selector=selector)
            for job in found:
                meta = job.get("metadata") or {}
                jobs[(str(meta.get("namespace")), str(meta.get("name")))] = job
        waiting = 0
        for (namespace, name), job in sorted(jobs.items()):
            status = job.get("status") or {}
            if int(status.get("active") or 0) or int(status.get("terminating") or 0):
                waiting += 1
                continue
            await self.kube.patch(
                JOBS,
                namespace,
                name,
                {
                    "metadata": {"labels": {REQUEUED_LABEL: None, LEGACY_PREEMPTED_LABEL: None}},
                    "spec": {"suspend": False},
                },
            )
        self.requeued_jobs = waiting > 0
        return waiting


def _overwrites(pod: Pod, annotations: Mapping[str, str]) -> bool:
    """Would setting ``annotations`` change a value the pod already carries (its workload's own
    consume-provisioning-request, say)? Such a pod keeps its own: the admission policy refuses any
    other change to a pod's annotations in the lifting patch, and a refused lift would leave that
    member gated while the rest of its gang starts."""
    return any(pod.annotations.get(k, v) != v for k, v in annotations.items())
