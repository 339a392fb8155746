"""The policies compared on one trace.

- ``phalanx``: the real core. Every cycle builds a ``Snapshot`` (nodes; every pod: running ones
  bound, pending gang members gated; every gang) from records kept between cycles, and calls
  ``controller.core.plan()``. ``Admit`` binds the members to the planned nodes (they start at once);
  ``Preempt`` evicts the victims whole (they re-queue with new, gated pods and restart from scratch;
  their PodGroup keeps its creation time, their wait starts anew) and holds the planned room for
  the preemptor as the controller does (until it is admitted, or for 300 s); ``Wait`` with
  ``timed_out`` counts a timeout once per gang, and the gang keeps waiting (the controller's
  ``timeout_action: report``).
- ``greedy-per-pod``: the default scheduler without gangs. Pending pods (priority, then submission
  order) start one by one wherever one fits (best fit); a partial gang holds its GPUs until its last
  pod starts. It can deadlock.
- ``summed-quota``: admission when the cluster-wide free GPU sum covers the gang (Kueue's quota with
  best-effort FIFO, Coscheduling's ``minResources``): the admitted gang's GPUs count as used from
  then on; its pods are then placed one by one like ``greedy-per-pod`` and may not fit
  (fragmentation), holding partial room meanwhile. Gangs admitted while they could not be placed
  whole are counted as *stranded*.
- ``fifo-no-backfill``: strict order, all-or-nothing; the head blocks everything behind it.
- ``sjf-oracle``: shortest job first, durations known in advance, all-or-nothing with backfill: a
  reference point, not a real policy.

The baselines use best fit (the node with the least free GPUs that still fits the pod) so that the
comparison is about gang admission, not about packing.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from dataclasses import replace

from controller.core.config import PlannerConfig
from controller.core.model import (
    Admit,
    Gang,
    GangKey,
    Node,
    Plan,
    Pod,
    Preempt,
    Reason,
    Reject,
    Snapshot,
    Wait,
)
from controller.core.ordering import gang_order
from controller.core.planner import plan
from shared.constants import GPU_RESOURCE
from tests.simulation.engine import Engine, Policy, Run
from tests.simulation.pruning import FIRST_PREFIX, PassOrder, pod_bounds

HOLD_SECONDS = 300.0  # the controller drops a preemptor's held room after this long (reconciler)


class PhalanxPolicy:
    """Drives the real ``controller.core.plan()``.

    Records are kept between cycles (one ``Gang`` and its ``Pod`` tuple per job, replaced when the
    job is admitted, evicted or finishes); a cycle only concatenates them into the snapshot's
    tuples. Two shortcuts keep it fast without changing any decision:

    - no pending gang: no ``plan()`` call (the core decides nothing for running gangs that have no
      new members);
    - when every job has the same priority, running gangs are left out of ``Snapshot.gangs`` (their
      pods stay in ``Snapshot.pods``, so their room is counted): the core reads running gangs'
      records only to find preemption victims, and preemption needs a higher priority.
      ``all_gangs=True`` keeps them (a test checks both give the same result);
    - where ``tests/simulation/pruning.py`` proves that a pending gang would wait and touch nothing,
      it is left out of the pass (no plan() call at all when that is every gang). ``prune=False``
      plans every pending gang at every pass (a test checks both give the same result).
    """

    def __init__(
        self,
        config: PlannerConfig | None = None,
        name: str = "phalanx",
        all_gangs: bool = False,
        prune: bool = True,
    ) -> None:
        self.name = name
        self.config = config or PlannerConfig()
        self.all_gangs = all_gangs
        self.prune = prune
        self.order = PassOrder()  # pending gangs in the core's pass order (for pruning)
        self.holding: set[int] = set()  # pending runs with room held by a preemption
        self._running_pods: tuple[Pod, ...] | None = None  # members of running gangs (cached)
        self.left_out = 0  # pending gangs pruning left out of passes, summed over passes
        self.longer_passes = 0  # passes planned again with a longer prefix
        self.engine: Engine | None = None
        self.pending: dict[int, Gang] = {}  # run index -> gang record, not admitted
        self.running: dict[int, Gang] = {}  # run index -> gang record, admitted and bound
        self.members: dict[int, tuple[Pod, ...]] = {}
        self.by_key: dict[GangKey, Run] = {}
        self.node_index: dict[str, int] = {}
        self.nodes: tuple[Node, ...] = ()
        self.namespaces: frozenset[str] = frozenset()
        self.priorities: set[int] = set()
        self.clock = time.perf_counter
        self.plan_seconds = 0.0
        self.snapshot_seconds = 0.0
        self.planned = 0
        self.max_pending = 0
        self.timeouts = 0
        self.decisions: dict[str, int] = {}
        # starvation reservations: nodes reserved by the last pass, their free GPUs then
        self._reserved_nodes: tuple[int, ...] = ()
        self._reserved_free = 0
        self._last_cycle = 0.0
        self.reserved_idle_gpu_seconds = 0.0  # free GPUs on reserved nodes × time (draining)
        self.reserved_since: dict[int, float] = {}  # run index -> first pass that reserved for it
        self.reserved_waits: list[float] = []  # reservation -> admission, per gang that had one

    def attach(self, engine: Engine) -> None:
        self.engine = engine
        nodes = engine.spec.core_nodes()
        self.nodes = nodes
        self.node_index = {node.name: i for i, node in enumerate(nodes)}
        self.priorities = {run.job.priority for run in engine.runs}
        self.namespaces = frozenset(run.job.team for run in engine.runs)
        self.all_gangs = self.all_gangs or len(self.priorities) > 1

    # ---- records -----------------------------------------------------------------------------

    def _key(self, run: Run) -> GangKey:
        return GangKey(run.job.team, f"job-{run.job.id}")

    def _pending(self, run: Run, now: float) -> None:
        """(Re)create the gang with gated members, as the webhook leaves them."""
        job = run.job
        key = self._key(run)
        members = tuple(
            Pod(
                uid=f"{job.id}.{run.epoch}.{k}",
                namespace=key.namespace,
                name=f"{key.name}-{run.epoch}-{k}",
                requests={GPU_RESOURCE: run.shape.per_pod},
                priority=job.priority,
                created=now,
                gated=True,
                group=key.name,
            )
            for k in range(run.shape.pods)
        )
        self.members[run.index] = members
        self.running.pop(run.index, None)
        self._running_pods = None
        gang = Gang(
            key=key,
            min_member=run.shape.pods,
            members=members,
            priority=job.priority,
            created=job.submit,
            waiting_since=now,  # a victim waits again from its eviction, as status.scheduleStartTime says
        )
        self.pending[run.index] = gang
        self.order.add(gang_order(gang), run.index, run.shape.pods, run.shape.per_pod)
        self.by_key[key] = run

    def on_arrival(self, run: Run, now: float) -> None:
        engine = self.engine
        assert engine is not None
        self._pending(run, now)
        config = self.config

        def waiting() -> bool:
            return run.index in self.pending

        if config.starvation_age_seconds is not None:
            engine.wake_after(run.job.submit + config.starvation_age_seconds, waiting)
        if config.default_schedule_timeout is not None:
            engine.wake_after(run.job.submit + config.default_schedule_timeout, waiting)

    def on_complete(self, run: Run, now: float) -> None:
        del self.running[run.index]
        del self.members[run.index]
        del self.by_key[self._key(run)]
        self._running_pods = None

    # ---- a cycle -------------------------------------------------------------------------------

    def snapshot(self, now: float) -> Snapshot:
        pods: list[Pod] = []
        for members in self.members.values():
            pods.extend(members)
        gangs = list(self.pending.values())
        if self.all_gangs:
            gangs.extend(self.running.values())
        return Snapshot(
            nodes=self.nodes,
            pods=tuple(pods),
            gangs=tuple(gangs),
            now=now,
            opted_in_namespaces=self.namespaces,
        )

    def prunable(self) -> bool:
        """Do the conditions of ``tests/simulation/pruning.py`` hold for this replay?"""
        config = self.config
        return (
            self.prune
            and not self.all_gangs  # one priority: no preemption, no held room (and no queues)
            and config.default_schedule_timeout is None
            and config.starvation_age_seconds is None
        )

    def cycle(self, now: float) -> None:
        engine = self.engine
        assert engine is not None
        if self._reserved_nodes:  # idle GPUs on reserved nodes × time since the last pass
            self.reserved_idle_gpu_seconds += self._reserved_free * (now - self._last_cycle)
            self._reserved_nodes = ()
        if not self.pending:
            return
        self.max_pending = max(self.max_pending, len(self.pending))
        result = self._plan_pruned(now) if self.prunable() else self._plan(self._full_snapshot(now))
        changed = result is not None and self._apply(result, now)
        if self._release_stale_holds(now) or changed:
            engine.changed()
        self._last_cycle = now
        self._reserved_free = sum(engine.free.free[i] for i in set(self._reserved_nodes))

    def _full_snapshot(self, now: float) -> Snapshot:
        started = self.clock()
        snapshot = self.snapshot(now)
        self.snapshot_seconds += self.clock() - started
        return snapshot

    def _plan(self, snapshot: Snapshot) -> Plan:
        started = self.clock()
        result = plan(snapshot, self.config)
        self.plan_seconds += self.clock() - started
        self.planned += 1
        return result

    def _plan_pruned(self, now: float) -> Plan | None:
        """The plan of the gangs the pass must see (None: every gang would wait, untouched)."""
        engine = self.engine
        assert engine is not None
        free = engine.free
        bound = pod_bounds([len(nodes) for nodes in free.buckets])
        count = FIRST_PREFIX + free.total_free  # each Admit takes at least one free GPU
        while True:
            chosen, rest = self.order.first_live(bound, count)
            if not chosen:
                self.left_out += len(self.pending)
                return None
            result = self._plan(self._snapshot_of(now, chosen))
            if rest == len(self.order) or self.order.all_wait_from(rest, self._bound_after(result)):
                self.left_out += len(self.pending) - len(chosen)
                return result
            count *= 4  # a later gang might start: plan a longer prefix of the same pass
            self.longer_passes += 1

    def _bound_after(self, result: Plan) -> list[int]:
        """``pod_bounds`` of the free GPUs the Admits of ``result`` would leave."""
        engine = self.engine
        assert engine is not None
        free = engine.free
        left: dict[int, int] = {}
        for decision in result.decisions:
            if isinstance(decision, Admit):
                per_pod = self.by_key[decision.gang].shape.per_pod
                for node in decision.booked.values():
                    i = self.node_index[node]
                    left[i] = left.get(i, free.free[i]) - per_pod
        counts = [len(nodes) for nodes in free.buckets]
        for i, gpus in left.items():
            counts[free.free[i]] -= 1
            counts[gpus] += 1
        return pod_bounds(counts)

    def _snapshot_of(self, now: float, chosen: list[int]) -> Snapshot:
        """The snapshot of a pruned pass: every pod that holds room, the chosen pending gangs."""
        started = self.clock()
        if self._running_pods is None:
            self._running_pods = tuple(p for index in self.running for p in self.members[index])
        pods = list(self._running_pods)
        for index in chosen:
            pods.extend(self.members[index])
        snapshot = Snapshot(
            nodes=self.nodes,
            pods=tuple(pods),
            gangs=tuple(self.pending[index] for index in chosen),
            now=now,
            opted_in_namespaces=self.namespaces,
        )
        self.snapshot_seconds += self.clock() - started
        return snapshot

    def _apply(self, result: Plan, now: float) -> bool:
        """Carry out the plan. Does the next pass need to run even if nothing else happens?

        A next pass can only decide differently if this one changed the cluster *and* the outcome
        is not a fixed point: an admit-only pass is (every gang that waited failed on more room than
        the next pass starts with, and a single-shape gang's fit is monotone in the room), a pass
        with a preemption or a starvation reservation is not (reservations are recomputed from the
        new free room; a preemptor is admitted on the held room)."""
        admitted = preempted = reserved = False
        for decision in result.decisions:
            kind = type(decision).__name__
            run = self.by_key[decision.gang]
            if isinstance(decision, Admit):
                self._admit(run, decision, now)
                admitted = True
            elif isinstance(decision, Preempt):
                self._preempt(run, decision, now)
                preempted = True
            elif isinstance(decision, Wait):
                kind = f"Wait/{decision.reason.value}"
                reserved = self._waits(run, decision, now) or reserved
            elif isinstance(decision, Reject):  # pragma: no cover - the simulation makes valid gangs
                raise AssertionError(f"{decision.gang}: rejected: {decision.message}")
            self.decisions[kind] = self.decisions.get(kind, 0) + 1
        return preempted or (admitted and reserved)

    def _waits(self, run: Run, decision: Wait, now: float) -> bool:
        """Record a Wait (reservation, timeout). Does it involve a starvation reservation?"""
        if decision.reserved_nodes:
            self._reserved_nodes += tuple(self.node_index[n] for n in decision.reserved_nodes)
            if run.index not in self.reserved_since:
                self.reserved_since[run.index] = now
        if decision.timed_out and not run.timed_out:
            run.timed_out = True
            self.timeouts += 1
        return bool(decision.reserved_nodes) or decision.reason == Reason.BLOCKED_BY_RESERVATION

    def _release_stale_holds(self, now: float) -> bool:
        """The controller forgets a preemptor's held room once it is stale. Any forgotten?"""
        released = False
        for index in sorted(self.holding):
            gang = self.pending[index]
            if gang.held_since is not None and now - gang.held_since > HOLD_SECONDS:
                self.pending[index] = replace(gang, held={}, held_since=None)
                self.holding.discard(index)
                released = True
        return released

    def _admit(self, run: Run, decision: Admit, now: float) -> None:
        engine = self.engine
        assert engine is not None
        gang = self.pending.pop(run.index, None)
        if gang is None:
            raise AssertionError(f"{decision.gang}: admitted twice (the simulation creates no new members)")
        self.order.remove(gang_order(gang), run.index)
        self.holding.discard(run.index)
        self._running_pods = None
        members = self.members[run.index]
        if len(decision.placement) != len(members):
            raise AssertionError(f"{gang.key}: {len(decision.placement)} of {len(members)} members admitted")
        nodes: list[int] = []
        bound: list[Pod] = []
        for pod in members:
            node = decision.placement[pod.uid] or decision.booked[pod.uid]
            nodes.append(self.node_index[node])
            bound.append(replace(pod, gated=False, node_name=node, phase="Running", started=now))
        engine.place_gang(run, nodes)
        since = self.reserved_since.pop(run.index, None)
        if since is not None:
            self.reserved_waits.append(now - since)
        self.members[run.index] = tuple(bound)
        self.running[run.index] = replace(
            gang,
            members=tuple(bound),
            admitted={p.uid: p.node_name for p in bound},
            admitted_at=now,
            held={},
            held_since=None,
        )
        config = self.config
        if config.preemption and len(self.priorities) > 1:
            epoch = run.epoch
            engine.wake_at(
                now + config.preemption_min_runtime_seconds,
                lambda: run.running and run.epoch == epoch and bool(self.pending),
            )

    def _preempt(self, run: Run, decision: Preempt, now: float) -> None:
        engine = self.engine
        assert engine is not None
        for victim in decision.victims:
            if victim.gang is None:  # pragma: no cover - every simulated pod belongs to a gang
                raise AssertionError(f"non-gang victim {victim.pods}")
            loser = self.by_key[victim.gang]
            uids = {p.uid for p in self.members[loser.index]}
            if set(victim.pods) != uids:
                raise AssertionError(
                    f"{victim.gang}: partial eviction {sorted(victim.pods)} of {sorted(uids)}"
                )
            engine.evict(loser)
            self._pending(loser, now)
        self.pending[run.index] = replace(
            self.pending[run.index], held=dict(decision.placement), held_since=now
        )
        self.holding.add(run.index)
        engine.wake_after(now + HOLD_SECONDS, lambda: bool(self.pending.get(run.index, _NO_GANG).held))

    def stats(self) -> dict[str, float | int]:
        out: dict[str, float | int] = {
            "plan_calls": self.planned,
            "gangs_left_out": self.left_out,
            "longer_passes": self.longer_passes,
            "plan_seconds": round(self.plan_seconds, 3),
            "snapshot_seconds": round(self.snapshot_seconds, 3),
            "max_pending_gangs": self.max_pending,
            "timeouts": self.timeouts,
        }
        for kind, n in sorted(self.decisions.items()):
            out[f"decisions.{kind}"] = n
        if self.engine is not None:
            out["skipped_wakes"] = self.engine.skipped_wakes
        out["reserved_gangs"] = len(self.reserved_waits) + len(self.reserved_since)
        out["reserved_idle_gpu_h"] = round(self.reserved_idle_gpu_seconds / 3600, 3)
        if self.reserved_waits:
            out["reservation_to_start_max_h"] = round(max(self.reserved_waits) / 3600, 3)
            out["reservation_to_start_avg_h"] = round(
                sum(self.reserved_waits) / len(self.reserved_waits) / 3600, 3
            )
        return out


_NO_GANG = Gang(key=GangKey("", ""), min_member=1, members=())


# ---- baselines -------------------------------------------------------------------------------------


class _Queue:
    """Runs kept sorted by a key (insertion by bisect, removal by rebuild)."""

    def __init__(self, key: Callable[[Run], tuple[float, ...]]) -> None:
        self.key = key
        self.keys: list[tuple[float, ...]] = []
        self.runs: list[Run] = []

    def add(self, run: Run) -> None:
        k = self.key(run)
        i = bisect.bisect_right(self.keys, k)
        self.keys.insert(i, k)
        self.runs.insert(i, run)

    def keep(self, alive: Callable[[Run], bool]) -> None:
        pairs = [(k, r) for k, r in zip(self.keys, self.runs, strict=True) if alive(r)]
        self.keys = [k for k, _ in pairs]
        self.runs = [r for _, r in pairs]

    def __len__(self) -> int:
        return len(self.runs)


POD_STAGGER = 0.01  # seconds between the creation of two members of a gang (the Job controller)


class _PodQueue:
    """Pending pods in the scheduler's order: priority (high first), then creation time. A gang's
    members are created ``POD_STAGGER`` apart, so the members of gangs created at the same moment
    interleave in the queue, as they do in kube-scheduler's active queue."""

    def __init__(self) -> None:
        self.keys: list[tuple[int, float, int, int]] = []
        self.runs: list[Run] = []

    def add(self, run: Run, created: float) -> None:
        for k in range(len(run.nodes), run.shape.pods):
            key = (-run.job.priority, created + k * POD_STAGGER, run.index, k)
            i = bisect.bisect_right(self.keys, key)
            self.keys.insert(i, key)
            self.runs.insert(i, run)

    def __len__(self) -> int:
        return len(self.runs)

    def place(self, engine: Engine) -> None:
        """Start pending pods one by one in order, best fit, wherever one fits."""
        free = engine.free
        failed = 1 << 30  # smallest per-pod size that failed in this pass: capacity only shrinks
        placed: list[int] = []
        for i, run in enumerate(self.runs):
            per_pod = run.shape.per_pod
            if per_pod >= failed:
                if failed <= 1:
                    break
                continue
            node = free.best_fit(per_pod)
            if node is None:
                failed = per_pod
                continue
            engine.place(run, node)
            placed.append(i)
        if placed:
            gone = set(placed)
            self.keys = [k for i, k in enumerate(self.keys) if i not in gone]
            self.runs = [r for i, r in enumerate(self.runs) if i not in gone]


class GreedyPerPod:
    name = "greedy-per-pod"

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.pods = _PodQueue()

    def attach(self, engine: Engine) -> None:
        self.engine = engine

    def on_arrival(self, run: Run, now: float) -> None:
        self.pods.add(run, run.job.submit)

    def on_complete(self, run: Run, now: float) -> None:
        pass

    def cycle(self, now: float) -> None:
        assert self.engine is not None
        self.pods.place(self.engine)

    def stats(self) -> dict[str, float | int]:
        return {}


class SummedQuota:
    name = "summed-quota"

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.waiting = _Queue(lambda r: r.order)
        self.pods = _PodQueue()  # pods of admitted gangs, not started yet
        self.quota_used = 0
        self.admitted_ids: set[int] = set()
        self.admitted = 0

    def attach(self, engine: Engine) -> None:
        self.engine = engine

    def on_arrival(self, run: Run, now: float) -> None:
        self.waiting.add(run)

    def on_complete(self, run: Run, now: float) -> None:
        self.quota_used -= run.shape.gpus

    def cycle(self, now: float) -> None:
        engine = self.engine
        assert engine is not None
        total = engine.spec.total_gpus
        failed = 1 << 30  # smallest demand refused in this pass: the quota only shrinks
        admitted: list[Run] = []
        for run in self.waiting.runs:
            free_quota = total - self.quota_used
            if free_quota <= 0:
                break
            demand = run.shape.gpus
            if demand >= failed:
                continue
            if demand > free_quota:
                failed = demand
                continue
            self.quota_used += demand
            self.admitted += 1
            self.admitted_ids.add(run.index)
            admitted.append(run)
            self.pods.add(run, now)  # the workload's pods are created once it is admitted
        if admitted:
            self.waiting.keep(lambda r: r.index not in self.admitted_ids)
        if self.pods:
            self.pods.place(engine)
        for run in admitted:
            if len(run.nodes) < run.shape.pods:
                run.stranded = True  # admitted, but its pods could not all be placed

    def stats(self) -> dict[str, float | int]:
        return {"admitted": self.admitted}


class _AllOrNothing:
    """Whole gangs in queue order, each placed best-fit all or nothing."""

    name = ""
    backfill = True

    def __init__(self) -> None:
        self.engine: Engine | None = None
        self.waiting = _Queue(self.key)

    @staticmethod
    def key(run: Run) -> tuple[float, ...]:
        return run.order

    def attach(self, engine: Engine) -> None:
        self.engine = engine

    def on_arrival(self, run: Run, now: float) -> None:
        self.waiting.add(run)

    def on_complete(self, run: Run, now: float) -> None:
        pass

    def cycle(self, now: float) -> None:
        engine = self.engine
        assert engine is not None
        free = engine.free
        started = False
        failed: dict[int, int] = {}  # per-pod GPUs -> fewest pods that did not fit in this pass
        for run in self.waiting.runs:
            shape = run.shape
            if shape.pods >= failed.get(shape.per_pod, 1 << 30):
                if not self.backfill:
                    break
                continue
            nodes = free.place_all(shape)
            if nodes is None:
                if not self.backfill:
                    break
                failed[shape.per_pod] = shape.pods
                if free.max_free() == 0:
                    break
                continue
            for node in nodes:  # give back: the engine books them
                free.give(node, shape.per_pod)
            engine.place_gang(run, nodes)
            started = True
            if free.max_free() == 0:
                break
        if started:
            self.waiting.keep(lambda r: r.started is None)

    def stats(self) -> dict[str, float | int]:
        return {}


class FifoNoBackfill(_AllOrNothing):
    name = "fifo-no-backfill"
    backfill = False


class SjfOracle(_AllOrNothing):
    name = "sjf-oracle"

    @staticmethod
    def key(run: Run) -> tuple[float, ...]:
        return (-run.job.priority, run.job.duration, run.job.submit, run.index)


POLICIES: dict[str, Callable[[PlannerConfig], Policy]] = {
    "phalanx": PhalanxPolicy,
    # The same, with every pending gang in every pass (no pruning): slow, and decides the same.
    "phalanx-full": lambda config: PhalanxPolicy(config, name="phalanx-full", prune=False),
    # The same core with starvation reservations after 30 minutes of waiting (off by default).
    "phalanx-reserve-30m": lambda config: PhalanxPolicy(
        replace(config, starvation_age_seconds=1800.0), name="phalanx-reserve-30m"
    ),
    # The same core blind to topology: no level is tried before the whole cluster.
    "phalanx-no-topology": lambda config: PhalanxPolicy(
        replace(config, topologies=(("default", ()),)), name="phalanx-no-topology"
    ),
    "greedy-per-pod": lambda config: GreedyPerPod(),
    "summed-quota": lambda config: SummedQuota(),
    "fifo-no-backfill": lambda config: FifoNoBackfill(),
    "sjf-oracle": lambda config: SjfOracle(),
}
