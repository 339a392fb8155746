"""The level-triggered reconcile loop.

Watch events only mark gangs dirty (``on_change``); a pass re-reads everything from the store and
reads as snapshot -> plan -> execute -> status: the pure core decides over *all* gangs (order and
backfill need the global view) what to admit, preempt or wait for (``plan``) and what the clock
brings (``decide_timers``: rollbacks, timeouts, when to look again); the executor carries both
out, and each PodGroup's status is written where it changed. A failed pass is retried with backoff.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import Counter
from collections.abc import Callable, Hashable

from controller.api.admission_record import RecordTooLarge
from controller.api.kube import ApiError, Kube
from controller.api.store import Hold, Store
from controller.core import (
    UNANSWERED,
    Admit,
    AutoscalerNote,
    Decision,
    EventReason,
    GangKey,
    Plan,
    PlannerConfig,
    Preempt,
    ProvisioningConfig,
    ProvisioningPlan,
    ProvisioningRequestState,
    Reason,
    Recheck,
    Reject,
    RequestPhase,
    RollBack,
    Short,
    Snapshot,
    TimedOut,
    TimerConfig,
    TimerDecision,
    Wait,
    autoscaler_note,
    decide_provisioning,
    decide_timers,
    plan,
)
from controller.core import messages as msg
from controller.pipeline import gangs, native_status, status
from controller.pipeline.bypass import GateBypassDetector
from controller.pipeline.events import EventRecorder
from controller.pipeline.executor import Executor
from controller.pipeline.gangs import GangView
from controller.pipeline.gcpause import cyclic_gc_paused
from controller.pipeline.metrics import ControllerMetrics, queue_label
from controller.pipeline.podgroups import PodGroupFactory, Sizing, waiting_message
from controller.pipeline.provisioning import NOT_CREATED, Provisioner, consume_annotations
from controller.pipeline.queue_status import QueueStatusWriter
from controller.pipeline.workqueue import WorkQueue
from shared.podgroup import Phase, PodGroupStatus

log = logging.getLogger(__name__)
REPLAN = "*"  # queue key: capacity changed, no particular gang


# A status that only counts members (512 of them arriving, then binding) is written at most this
# often per gang; a change of phase, reason or condition is written at once.
STATUS_PROGRESS_SECONDS = 1.0
# A gang with fewer members than its minMember is planned at most this often while they arrive.
FILLING_PASS_SECONDS = 0.25


@dataclasses.dataclass(frozen=True, slots=True)
class StatusDue:
    """Queue key: a gang's held-back status is due. A batch of these alone writes what the last
    pass wanted, without planning again (any other change of the gang queues a pass of its own)."""

    gang: GangKey


@dataclasses.dataclass(frozen=True, slots=True)
class _Written:
    """A gang's desired status and what it was computed from. A written status changes the
    PodGroup record, hence the view, so an equal view and decision give the same status again."""

    view: GangView
    decision: Decision | None
    note: AutoscalerNote | None
    wanted: PodGroupStatus
    stale: bool  # differs from the stored status: to be written


class Reconciler:
    def __init__(
        self,
        kube: Kube,
        store: Store,
        queue: WorkQueue,
        executor: Executor,
        events: EventRecorder,
        metrics: ControllerMetrics,
        planner: PlannerConfig,
        timers: TimerConfig,
        clock: Callable[[], float],
        provisioning: ProvisioningConfig | None = None,
        provisioner: Provisioner | None = None,
    ) -> None:
        self.kube = kube
        self.store = store
        self.queue = queue
        self.executor = executor
        self.events = events
        self.metrics = metrics
        self.planner = planner
        self.clock = clock
        self.timers = timers
        self.provisioning = provisioning or ProvisioningConfig()
        self.provisioner = provisioner  # None: no ProvisioningRequests (--provisioning-requests off)
        self.podgroups = PodGroupFactory(kube, store)
        self.queue_status = QueueStatusWriter(kube, store, metrics)
        self.passes = 0
        # Gangs whose admission record did not fit on their PodGroup: (members then, why).
        self.unrecordable: dict[GangKey, tuple[int, str]] = {}
        # Gang views reused while their records stay the same (None: every pass builds all again).
        self.views: gangs.ViewCache | None = gangs.ViewCache()
        self._statuses: dict[GangKey, _Written] = {}  # each gang's status as the last pass saw it
        self._status_written_at: dict[GangKey, float] = {}
        self.bypass = GateBypassDetector(events, metrics)
        store.subscribe(self.on_change)

    def on_change(self, key: GangKey | None) -> None:
        if key is None:
            self.queue.add(REPLAN)
        elif self.store.filling(key):
            # Its members are still being created: one pass per FILLING_PASS_SECONDS, not one per
            # member (each costs time in the gang's size); the last member's comes at once.
            self.queue.add_after(key, FILLING_PASS_SECONDS)
        else:
            self.queue.add(key)

    async def run(self, leading: asyncio.Event) -> None:
        while True:
            batch = await self.queue.get_batch()
            self.metrics.queue_depth.set(self.queue.depth)
            if not leading.is_set():
                continue  # standby: informers stay warm, nothing is written
            try:
                failed = await self.reconcile(batch)
            except Exception:
                log.exception("reconcile pass failed")
                self.metrics.reconcile_errors.inc()
                self.queue.add_rate_limited(REPLAN)
                continue
            for key in failed:
                self.metrics.reconcile_errors.inc()
                self.queue.add_rate_limited(key)
            for key in batch:
                if key not in failed:
                    self.queue.forget(key)

    async def reconcile(self, batch: set[Hashable]) -> set[Hashable]:
        """One pass: snapshot -> plan -> execute -> status. Returns the keys whose work failed (to
        retry with backoff)."""
        failed: set[Hashable] = set()
        if batch and all(isinstance(k, StatusDue) for k in batch):
            await self._flush_statuses(batch, failed)
            return failed
        self.passes += 1
        # A REPLAN (resync, leadership gained) covers every gang, also those seen while on standby.
        full = REPLAN in batch
        targets = self.store.gang_keys() if full else {k for k in batch if isinstance(k, GangKey)}
        await self._ensure_podgroups(targets, failed)
        if full:
            self.podgroups.retain(targets)

        # snapshot -> plan: pure, from the store and the clock.
        now = self.clock()
        started = time.perf_counter()
        requests = await self._provisioning_requests()
        with cyclic_gc_paused():
            snapshot, views = gangs.snapshot(self.store, now, skip_settled=True, cache=self.views)
            snapshot = booked_first(snapshot, requests, now, self.provisioning.answer_seconds)
            snapshot = marked_unrecordable(snapshot, self.unrecordable)
            the_plan = plan(snapshot, self.planner)
        self.metrics.pass_duration.observe(time.perf_counter() - started)
        decisions: dict[GangKey, Decision] = {d.gang: d for d in the_plan.decisions}
        timed = decide_timers(snapshot.gangs, decisions, now, self.timers)
        provisioning = (
            decide_provisioning(snapshot.gangs, decisions, requests, self.provisioning, now)
            if requests is not None
            else None
        )

        await self._execute(views, decisions, timed, now, failed, full, provisioning)
        await self._provision(views, provisioning, decisions, failed)
        notes = self._autoscaler_notes(decisions, provisioning)
        await self._report(views, the_plan, self._with_notes(decisions, notes), now, failed, full, notes)
        return failed

    async def _provisioning_requests(self) -> list[ProvisioningRequestState] | None:
        """The ProvisioningRequests Phalanx made (None: requests off, or not readable now)."""
        if self.provisioner is None:
            return None
        try:
            return await self.provisioner.refresh()
        except ApiError as err:
            log.warning("ProvisioningRequests not listed", extra={"error": str(err)})
            return None

    async def _provision(
        self,
        views: dict[GangKey, GangView],
        provisioning: ProvisioningPlan | None,
        decisions: dict[GangKey, Decision],
        failed: set[Hashable],
    ) -> None:
        if self.provisioner is None or provisioning is None:
            return
        admitted = {key for key, decision in decisions.items() if isinstance(decision, Admit)}
        try:
            await self.provisioner.carry_out(provisioning, views, admitted)
        except ApiError as err:
            log.warning("ProvisioningRequests not written", extra={"error": str(err)})
            failed.add(REPLAN)
        # The autoscaler answers on the requests, which are not watched: look again soon while one
        # is unanswered or being consumed; slowly while the autoscaler retries by itself
        # (CapacityNotFound), a failed one awaits its backoff (recheck_in), or it was not created.
        for key, state in provisioning.gangs.items():
            view = views.get(key)
            consuming = not isinstance(decisions.get(key), Wait) or (
                view is not None and bool(view.gang.admitted)
            )
            soon = key not in self.provisioner.not_created and (state.phase in UNANSWERED or consuming)
            self.queue.add_after(
                key, self.provisioner.refresh_seconds if soon else self.provisioner.slow_refresh_seconds
            )
        if provisioning.recheck_in is not None:
            self.queue.add_after(REPLAN, provisioning.recheck_in)

    def _autoscaler_notes(
        self, decisions: dict[GangKey, Decision], provisioning: ProvisioningPlan | None
    ) -> dict[GangKey, AutoscalerNote]:
        """Each gang's CapacityRequested condition: its request, why its request could not be
        created, or (requests off) that a gang waiting for capacity is invisible to a
        cluster-autoscaler."""
        enabled = self.provisioner is not None
        keys = set(decisions) | set(provisioning.gangs if provisioning is not None else ())
        carried_out = self.provisioner is not None and provisioning is not None
        not_created = self.provisioner.not_created if self.provisioner is not None and carried_out else {}
        notes = {}
        for key in keys:
            unmade = not_created.get(key)
            if unmade is not None:  # planned, but the autoscaler was not asked: say why
                notes[key] = AutoscalerNote(
                    False, NOT_CREATED, msg.provisioning_not_created(unmade.request, unmade.why)
                )
                continue
            state = provisioning.gangs.get(key) if provisioning is not None else None
            note = autoscaler_note(decisions.get(key), state, enabled, served=provisioning is not None)
            if note is not None:
                notes[key] = note
        return notes

    @staticmethod
    def _with_notes(
        decisions: dict[GangKey, Decision], notes: dict[GangKey, AutoscalerNote]
    ) -> dict[GangKey, Decision]:
        """A gang waiting on its ProvisioningRequest says so in its message too."""
        out = dict(decisions)
        for key, note in notes.items():
            decision = decisions.get(key)
            if (note.requested or note.reason == NOT_CREATED) and isinstance(decision, Wait):
                out[key] = dataclasses.replace(
                    decision, message=msg.with_provisioning(decision.message, note.message)
                )
        return out

    async def _execute(
        self,
        views: dict[GangKey, GangView],
        decisions: dict[GangKey, Decision],
        timed: tuple[TimerDecision, ...],
        now: float,
        failed: set[Hashable],
        full: bool,
        provisioning: ProvisioningPlan | None = None,
    ) -> None:
        """Carry out the plan and the timers' decisions, then let go of what no longer needs holding."""
        await self._act(views, decisions, failed, provisioning)
        await self.bypass.check(views)
        await self._act_on_timers(views, timed, now, failed)
        self._release_stale_holds(views, decisions, now)
        await self._resume_requeued_jobs(full)

    async def _report(
        self,
        views: dict[GangKey, GangView],
        the_plan: Plan,
        decisions: dict[GangKey, Decision],
        now: float,
        failed: set[Hashable],
        full: bool,
        notes: dict[GangKey, AutoscalerNote] | None = None,
    ) -> None:
        """Status of every PodGroup and queue, and the Events of members no plan could include."""
        await self._write_statuses(views, decisions, now, failed, notes or {})
        await self.queue_status.write(the_plan, the_plan.decisions)
        # A member whose spec cannot be read is not part of any plan: say so where people look.
        for owner_key, problem in self.store.invalid_pods.values():
            if owner_key is not None and owner_key in views:
                await self.events.emit(
                    views[owner_key].podgroup, EventReason.INVALID_MEMBER, problem, warning=True
                )
        if full:
            self.events.retain({v.podgroup.uid for v in views.values()} | set(self.store.pods))

    async def _ensure_podgroups(self, targets: set[GangKey], failed: set[Hashable]) -> None:
        unsized: dict[GangKey, Sizing] = {}
        for key in sorted(targets, key=str):
            try:
                sizing = await self.podgroups.ensure(key)
            except ApiError as err:
                log.warning("podgroup not created", extra={"gang": str(key), "error": str(err)})
                failed.add(key)
            else:
                if sizing is not None:
                    unsized[key] = sizing
        await self._report_unsized(unsized)

    async def _act(
        self,
        views: dict[GangKey, GangView],
        decisions: dict[GangKey, Decision],
        failed: set[Hashable],
        provisioning: ProvisioningPlan | None = None,
    ) -> None:
        """Finish admissions a crash left half done, then carry out this pass's decisions."""
        for key, view in views.items():
            try:
                await self.executor.finish_admission(view)
            except Exception as err:
                log.warning("finishing admission failed", extra={"gang": str(key), "error": str(err)})
                failed.add(key)
        for key, decision in decisions.items():
            target = views.get(key)
            if target is None:
                continue
            try:
                if isinstance(decision, Admit):
                    await self.executor.admit(
                        target,
                        decision.placement,
                        decision.booked,
                        decision.message,
                        consume_annotations(provisioning, key),
                    )
                elif isinstance(decision, Preempt):
                    await self.executor.preempt(target, decision, views)
            except RecordTooLarge as err:
                why = str(err)
                self.unrecordable[key] = (len(target.members), why)
                decisions[key] = Reject(key, Reason.INVALID_SPEC, why)  # reported so by this pass
            except Exception as err:
                log.warning("executing decision failed", extra={"gang": str(key), "error": str(err)})
                failed.add(key)

    async def _resume_requeued_jobs(self, full: bool) -> None:
        if full and self.executor.requeued_jobs:
            try:
                await self.executor.resume_requeued_jobs()
            except ApiError as err:
                log.warning("resuming re-queued jobs failed", extra={"error": str(err)})
        if self.executor.requeued_jobs:
            self.queue.add_after(REPLAN, 0.5)  # resume the suspended Jobs once their pods are gone

    async def _report_unsized(self, unsized: dict[GangKey, Sizing]) -> None:
        """Gated pods that name a group nobody has created yet: they have no PodGroup to carry a
        status, so each says why it waits in an Event of its own (once)."""
        for key, sizing in unsized.items():
            reason = (
                EventReason.WAITING_FOR_WORKLOAD
                if sizing.workload is not None
                else EventReason.WAITING_FOR_POD_GROUP
            )
            message = waiting_message(sizing)
            for pod in self.store.members(key):
                if pod.gated and not pod.terminating:
                    await self.events.emit_on_pod(pod, reason, message)

    async def _act_on_timers(
        self,
        views: dict[GangKey, GangView],
        timed: tuple[TimerDecision, ...],
        now: float,
        failed: set[Hashable],
    ) -> None:
        """Roll back, report timeouts, and come back to gangs whose timeout is not due yet."""
        for decision in timed:
            view = views.get(decision.gang)
            if view is None:
                continue
            if isinstance(decision, Recheck):
                self.queue.add_after(decision.gang, decision.at - now)
            elif isinstance(decision, RollBack):
                try:
                    await self.executor.roll_back(view, decision)
                except Exception as err:
                    log.warning(
                        "rollback failed",
                        extra={"gang": str(decision.gang), "why": decision.cause, "error": str(err)},
                    )
                    failed.add(decision.gang)
            elif isinstance(decision, TimedOut):
                await self._timed_out(view, decision)

    async def _timed_out(self, view: GangView, decision: TimedOut) -> None:
        # Once per wait: a gang that waits again (preempted, recreated) can time out again.
        episode = f"{EventReason.TIMED_OUT}@{status.iso(decision.since)}"
        if self.events.seen(view.podgroup, EventReason.TIMED_OUT, episode):
            return
        known = self.store.queues.records()
        self.metrics.timeouts.labels(queue=queue_label(view.gang.queue, known)).inc()
        await self.events.emit(
            view.podgroup, EventReason.TIMED_OUT, decision.message, warning=True, dedupe=episode
        )
        if decision.release is not None:
            await self.executor.give_up(view, decision.release)

    async def _write_statuses(
        self,
        views: dict[GangKey, GangView],
        decisions: dict[GangKey, Decision],
        now: float,
        failed: set[Hashable],
        notes: dict[GangKey, AutoscalerNote],
    ) -> None:
        pending: Counter[tuple[str, str]] = Counter()
        oldest: dict[str, float] = {}  # queue label -> the earliest wait start of a Pending gang
        known = self.store.queues.records()
        kept: dict[GangKey, _Written] = {}
        for key, view in views.items():
            decision = decisions.get(key)
            note = notes.get(key)
            last = self._statuses.get(key)
            reuse = last is not None and self.views is not None and last.view is view
            if last is not None and reuse and last.decision == decision and last.note == note:
                wanted, stale = last.wanted, last.stale  # same records, same decision: same status
            else:
                wanted = status.desired(view, decision, now, note)
                stale = status.differs(view.podgroup.status, wanted)
            kept[key] = _Written(view, decision, note, wanted, stale)
            if wanted.phase in (Phase.PENDING, Phase.FAILED) and not isinstance(decision, Admit):
                queue = queue_label(view.gang.queue, known)
                pending[(str(wanted.reason), queue)] += 1
                if wanted.phase == Phase.PENDING:
                    oldest[queue] = min(oldest.get(queue, now), view.gang.wait_start)
            if isinstance(decision, (Wait, Short, Reject)) and not decision_timed_out(decision):
                await self.events.emit(
                    view.podgroup,
                    # The same word as the condition's reason: InvalidSpec.
                    EventReason.INVALID_SPEC if isinstance(decision, Reject) else EventReason.WAITING,
                    decision.message,
                    warning=isinstance(decision, Reject),
                    dedupe=decision.reason.value,
                )
            await self._tell_native_podgroup(view, wanted, now)
            if not stale:
                continue
            if not self._progress_too_soon(key, view, wanted, now):
                await self._write_status(key, view, wanted, now, failed)
        self._statuses = kept
        for gone in self._status_written_at.keys() - views.keys():
            del self._status_written_at[gone]
        self.metrics.pending.clear()
        for (reason, queue), count in pending.items():
            self.metrics.pending.labels(reason=reason, queue=queue).set(count)
        self.metrics.oldest_pending.clear()  # a queue with no Pending gang has no series
        for queue, since in oldest.items():
            self.metrics.oldest_pending.labels(queue=queue).set(max(0.0, now - since))

    async def _write_status(
        self, key: GangKey, view: GangView, wanted: PodGroupStatus, now: float, failed: set[Hashable]
    ) -> None:
        body = wanted.to_json()
        try:
            await self.kube.patch(
                view.podgroup.rt, key.namespace, key.name, {"status": body}, subresource="status"
            )
            self.metrics.status_writes.inc()
            self._status_written_at[key] = now
            self.store.assume_status(view.podgroup, body)  # no rewrite before the informer catches up
        except ApiError as err:
            if not err.not_found:
                log.warning("status not written", extra={"gang": str(key), "error": str(err)})
                failed.add(key)

    async def _flush_statuses(self, due: set[Hashable], failed: set[Hashable]) -> None:
        """Write the held-back statuses that are still what the last pass wanted."""
        now = self.clock()
        for marker in due:
            assert isinstance(marker, StatusDue)
            key = marker.gang
            last = self._statuses.get(key)
            if last is None or not last.stale or last.view.podgroup is not self.store.podgroup(key):
                continue  # written since, gone, or its PodGroup changed: a pass of its own follows
            if not self._progress_too_soon(key, last.view, last.wanted, now):
                await self._write_status(key, last.view, last.wanted, now, failed)
                self._statuses[key] = dataclasses.replace(last, stale=False)

    def _progress_too_soon(self, key: GangKey, view: GangView, wanted: PodGroupStatus, now: float) -> bool:
        """Counts alone changed and this gang's status was written under a second ago: write it
        once that second is over (as a StatusDue: no planning pass for it)."""
        last = self._status_written_at.get(key)
        if last is None or now - last >= STATUS_PROGRESS_SECONDS:
            return False
        if not status.progress_only(view.podgroup.status, wanted):
            return False
        self.queue.add_after(StatusDue(key), STATUS_PROGRESS_SECONDS - (now - last))
        return True

    async def _tell_native_podgroup(self, view: GangView, wanted: PodGroupStatus, now: float) -> None:
        """The native PodGroup this gang was made for says in upstream's words whether it is placed."""
        name = native_status.native_owner(view.podgroup)
        native = self.store.native_podgroups.get((view.gang.key.namespace, name)) if name else None
        if native is None:
            return
        condition = native_status.wanted_condition(wanted, native)
        if condition is not None:
            api_version = self.store.native_podgroup_api_version
            if await native_status.write(self.kube, api_version, native, condition, status.iso(now)):
                self.metrics.status_writes.inc()

    def _release_stale_holds(
        self, views: dict[GangKey, GangView], decisions: dict[GangKey, Decision], now: float
    ) -> None:
        def stale(key: GangKey, hold: Hold) -> bool:
            admitted = key in views and bool(views[key].gang.admitted)
            expired = now - hold.at > self.planner.hold_expiry_seconds
            return admitted or key not in views or expired or isinstance(decisions.get(key), Admit)

        self.store.release_holds(stale)


def marked_unrecordable(snapshot: Snapshot, unrecordable: dict[GangKey, tuple[int, str]]) -> Snapshot:
    """The snapshot with every gang whose admission record did not fit marked so, while it keeps
    the members it had then (one that shrinks may fit: it is tried again). Drops stale marks."""
    if not unrecordable:
        return snapshot
    live = {g.key: g for g in snapshot.gangs}
    for key in [k for k in unrecordable if k in live and len(live[k].members) != unrecordable[k][0]]:
        del unrecordable[key]
    marked = tuple(
        dataclasses.replace(g, unrecordable=unrecordable[g.key][1]) if g.key in unrecordable else g
        for g in snapshot.gangs
    )
    return dataclasses.replace(snapshot, gangs=marked)


def booked_first(
    snapshot: Snapshot,
    requests: list[ProvisioningRequestState] | None,
    now: float,
    answer_seconds: float,
) -> Snapshot:
    """The snapshot with every gang whose ProvisioningRequest is Provisioned marked as booked (the
    core plans it first, and holds the nodes registered since the request for it while it does not
    fit), and every gang whose request is still unanswered marked as awaiting it (it does not take
    nodes registered since it asked, which may be another gang's); both with the request's time."""
    booked: set[GangKey] = set()
    awaited: set[GangKey] = set()
    since: dict[GangKey, float] = {}
    for r in requests or ():
        if r.phase == RequestPhase.PROVISIONED:
            booked.add(r.gang)
        elif r.phase in UNANSWERED and now - r.created < answer_seconds:
            awaited.add(r.gang)
        else:
            continue
        since[r.gang] = max(since.get(r.gang, 0.0), r.created)
    if not since:
        return snapshot
    marked = tuple(
        dataclasses.replace(
            g,
            capacity_booked=g.key in booked,
            capacity_awaited=g.key in awaited,
            capacity_since=since[g.key] or None,
        )
        if g.key in since
        else g
        for g in snapshot.gangs
    )
    return dataclasses.replace(snapshot, gangs=marked)


def decision_timed_out(decision: Decision) -> bool:
    return isinstance(decision, Wait) and decision.timed_out
