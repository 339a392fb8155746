"""The discrete-event loop: virtual time, one policy, one list of jobs.

Events (a heap; at equal times completions come first, then arrivals, then the planning cycle):

- ``arrival``: the job's gang is created (every member at once, gated for Phalanx) and handed to
  the policy;
- ``completion``: a running gang's ``duration`` is over: all its pods end and give their GPUs back;
- ``cycle``: the policy decides (for Phalanx: a ``Snapshot`` goes to the real ``plan()``).

Cycles run on a grid of ``period`` seconds of virtual time (default 1 s), like a controller that
batches the watch events of one period into one pass: an arrival or a completion at time t asks for
the cycle at the first tick >= t; a cycle that changed something asks for the next tick. A tick
at which nothing changed is skipped: its snapshot would differ from the previous one only in
``now``, so its plan could differ only where a time threshold was crossed -- the policy asks for
those ticks explicitly (``wake_after``/``wake_at``: schedule timeout, starvation age, minimum
runtime before preemption, stale preemption holds). ``every_tick=True`` runs every tick while work
is pending instead (for up to ``IDLE_HORIZON`` after the last arrival or completion), which gives the
same result, only slower (a test checks that).

The engine owns the free GPUs (``FreeGpus``) and all accounting; a policy only says which pod goes
where (``place``), which gang starts (``place_gang``) and which gang is evicted (``evict``). A gang
runs -- and its ``duration`` starts -- when all of its pods have started. Placing beyond a node's
free GPUs raises: whatever a policy (or the core) decides is checked.

Accounting is integrated over time: allocated GPUs (every started pod), GPUs held by partial gangs
(some but not all pods started), queue length (jobs submitted and not yet running). When the heap is
empty, every job that has not finished is stuck forever (nothing runs that could free room, and no
job will arrive): a deadlock for the per-pod baselines, a bug for the all-or-nothing policies.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from tests.simulation.cluster import ClusterSpec, FreeGpus
from tests.simulation.trace import GangShape, Job, gang_shape

COMPLETION, ARRIVAL, CYCLE = 0, 1, 2
# every_tick: once no arrival or completion is left, keep ticking this long (virtual seconds) for
# time thresholds, then stop (a deadlock would tick forever).
IDLE_HORIZON = 7200.0


@dataclass(slots=True, eq=False)
class Run:
    """One job as the simulation follows it."""

    index: int  # position in the job list (sorted by submission)
    job: Job
    shape: GangShape
    nodes: list[int] = field(default_factory=list)  # nodes of the started pods
    started: float | None = None  # when the last pod started (the gang runs)
    first_start: float | None = None
    finish: float | None = None
    restarts: int = 0  # times evicted and re-queued whole
    epoch: int = 0  # bumped on eviction: stale completion events are ignored
    timed_out: bool = False
    stranded: bool = False  # admitted by a policy while it could not place all its pods
    evicted_gpu_seconds: float = 0.0
    # The narrowest domain its pods ran in, at its last start: node, nvlink, rack, zone or cluster.
    inside: str | None = None

    @property
    def running(self) -> bool:
        return self.started is not None and self.finish is None

    @property
    def partial(self) -> bool:
        return 0 < len(self.nodes) < self.shape.pods

    @property
    def order(self) -> tuple[int, float, int]:
        """Queue order of the baselines: priority (high first), submission, job order."""
        return (-self.job.priority, self.job.submit, self.index)


class Policy(Protocol):
    name: str

    def attach(self, engine: Engine) -> None: ...

    def on_arrival(self, run: Run, now: float) -> None: ...

    def on_complete(self, run: Run, now: float) -> None: ...

    def cycle(self, now: float) -> None: ...

    def stats(self) -> dict[str, float | int]: ...


@dataclass(slots=True)
class Timeline:
    """Step functions, one point per change: (t, jobs queued, GPUs allocated, GPUs of partial gangs)."""

    t: list[float] = field(default_factory=list)
    queue: list[int] = field(default_factory=list)
    alloc: list[int] = field(default_factory=list)
    partial: list[int] = field(default_factory=list)

    def add(self, t: float, queue: int, alloc: int, partial: int) -> None:
        if self.t and self.t[-1] == t:
            self.queue[-1], self.alloc[-1], self.partial[-1] = queue, alloc, partial
            if len(self.t) > 1 and (self.queue[-2], self.alloc[-2], self.partial[-2]) == (
                queue,
                alloc,
                partial,
            ):
                self.t.pop()
                self.queue.pop()
                self.alloc.pop()
                self.partial.pop()
            return
        if self.t and (self.queue[-1], self.alloc[-1], self.partial[-1]) == (queue, alloc, partial):
            return
        self.t.append(t)
        self.queue.append(queue)
        self.alloc.append(alloc)
        self.partial.append(partial)


@dataclass(slots=True)
class RunResult:
    policy: str
    spec: ClusterSpec
    runs: list[Run]
    timeline: Timeline
    first_arrival: float
    end: float  # time of the last event
    alloc_gpu_seconds: float
    partial_gpu_seconds: float
    lost_gpu_seconds: float
    queue_job_seconds: float
    preemptions: int
    cycles: int
    wall_seconds: float
    policy_stats: dict[str, float | int]
    window_seconds: float
    window_alloc_gpu_seconds: float  # allocated GPU-seconds inside [0, window_seconds]


Progress = Callable[[str, float, int, int, int, int], None]  # policy, t, done, total, queue, cycles


class Engine:
    def __init__(
        self,
        jobs: Sequence[Job],
        spec: ClusterSpec,
        policy: Policy,
        period: float = 1.0,
        every_tick: bool = False,
        window_seconds: float = 0.0,
        progress: Progress | None = None,
        progress_every: float = 5.0,
    ) -> None:
        if period <= 0:
            raise ValueError("the planning period must be > 0")
        self.spec = spec
        self.policy = policy
        self.period = period
        self.every_tick = every_tick
        self.window = window_seconds
        self.free = FreeGpus(spec.nodes, spec.gpus_per_node)
        self.runs = [Run(i, job, gang_shape(job.gpus, spec.gpus_per_node)) for i, job in enumerate(jobs)]
        for run in self.runs:
            if not spec.fits_empty(run.shape):
                raise ValueError(f"job {run.job.id} ({run.job.gpus} GPUs) can never fit this cluster")
        self.now = 0.0
        self._heap: list[tuple[float, int, int, int]] = []  # (time, kind, seq, payload)
        self._seq = 0
        self._events = 0  # arrivals and completions in the heap
        self._last_event = 0.0
        # ticks with a cycle in the heap -> None (unconditional) or the conditions it runs under
        self._scheduled: dict[int, list[Callable[[], bool]] | None] = {}
        self._last_tick = -(1 << 62)
        self._epochs: dict[int, int] = {}  # completion seq -> epoch it was scheduled for
        # accounting
        self.queued = 0
        self.allocated = 0
        self.partial_gpus = 0
        self.done = 0
        self.preemptions = 0
        self.lost_gpu_seconds = 0.0
        self._last_t: float | None = None
        self._alloc_area = 0.0
        self._partial_area = 0.0
        self._queue_area = 0.0
        self._window_alloc = 0.0
        self.timeline = Timeline()
        self.cycles = 0
        self.skipped_wakes = 0  # conditional cycles whose conditions no longer held
        self.progress = progress
        self.progress_every = progress_every

    # ---- scheduling of events ---------------------------------------------------------------

    def _push(self, t: float, kind: int, payload: int) -> int:
        self._seq += 1
        if kind != CYCLE:
            self._events += 1
        heapq.heappush(self._heap, (t, kind, self._seq, payload))
        return self._seq

    def _request_tick(self, tick: int, still: Callable[[], bool] | None = None) -> None:
        """Ask for a cycle at `tick` (or the next tick not yet run). With `still`, the cycle is
        conditional: it runs only if `still()` is true when the tick comes, or another request for
        that tick is unconditional."""
        tick = max(tick, self._last_tick + 1)
        if tick not in self._scheduled:
            self._scheduled[tick] = None if still is None else [still]
            self._push(tick * self.period, CYCLE, tick)
            return
        conditions = self._scheduled[tick]
        if conditions is None:
            return
        if still is None:
            self._scheduled[tick] = None
        else:
            conditions.append(still)

    def request_cycle(self, t: float | None = None) -> None:
        """Plan at the first tick >= t (default: now; the next tick when called from a cycle)."""
        t = self.now if t is None else t
        self._request_tick(self._tick_at_or_after(t))

    def _tick_at_or_after(self, t: float) -> int:
        tick = math.ceil(t / self.period)
        while tick * self.period < t:
            tick += 1
        while (tick - 1) * self.period >= t:
            tick -= 1
        return tick

    def changed(self) -> None:
        """The policy changed the cluster in a cycle: plan again at the next tick."""
        self._request_tick(self._last_tick + 1)

    def wake_after(self, threshold: float, still: Callable[[], bool] | None = None) -> None:
        """Plan at the first tick strictly after `threshold` (a `now > threshold` test turns true),
        if `still()` then holds (see ``_request_tick``)."""
        tick = self._tick_at_or_after(threshold)
        if tick * self.period <= threshold:
            tick += 1
        self._request_tick(tick, still)

    def wake_at(self, threshold: float, still: Callable[[], bool] | None = None) -> None:
        """Plan at the first tick at or after `threshold` (a `now >= threshold` test turns true)."""
        self._request_tick(self._tick_at_or_after(threshold), still)

    # ---- what policies do --------------------------------------------------------------------

    def place(self, run: Run, node: int) -> None:
        """Start one pod of `run` on `node`; the gang runs once all of its pods have started."""
        if run.finish is not None or len(run.nodes) >= run.shape.pods:
            raise AssertionError(f"job {run.job.id}: no pod left to place")
        per_pod = run.shape.per_pod
        pods = run.shape.pods
        self.free.take(node, per_pod)
        before = len(run.nodes)
        run.nodes.append(node)
        self.allocated += per_pod
        after = before + 1
        self.partial_gpus += (per_pod * after if after < pods else 0) - (per_pod * before if before else 0)
        if after == pods:
            self._start(run)

    def place_gang(self, run: Run, nodes: Sequence[int]) -> None:
        """Start every pod of `run` at once (all-or-nothing policies)."""
        if run.nodes or len(nodes) != run.shape.pods:
            raise AssertionError(f"job {run.job.id}: a gang of {run.shape.pods} pods, {len(nodes)} nodes")
        per_pod = run.shape.per_pod
        for node in nodes:
            self.free.take(node, per_pod)
        run.nodes.extend(nodes)
        self.allocated += per_pod * len(nodes)
        self._start(run)

    def _start(self, run: Run) -> None:
        run.inside = self.spec.narrowest(run.nodes)
        run.started = self.now
        if run.first_start is None:
            run.first_start = self.now
        self.queued -= 1
        seq = self._push(self.now + run.job.duration, COMPLETION, run.index)
        self._epochs[seq] = run.epoch

    def evict(self, run: Run) -> None:
        """Evict every pod of `run` (whole-gang preemption): it re-queues and restarts from scratch."""
        if run.finish is not None or not run.nodes:
            raise AssertionError(f"job {run.job.id}: nothing to evict")
        per_pod = run.shape.per_pod
        if run.started is not None:
            lost = per_pod * len(run.nodes) * (self.now - run.started)
            self.lost_gpu_seconds += lost
            run.evicted_gpu_seconds += lost
            self.queued += 1
        elif run.partial:
            self.partial_gpus -= per_pod * len(run.nodes)
        for node in run.nodes:
            self.free.give(node, per_pod)
        self.allocated -= per_pod * len(run.nodes)
        run.nodes.clear()
        run.started = None
        run.restarts += 1
        run.epoch += 1
        self.preemptions += 1

    def _complete(self, run: Run) -> None:
        per_pod = run.shape.per_pod
        for node in run.nodes:
            self.free.give(node, per_pod)
        self.allocated -= per_pod * len(run.nodes)
        run.finish = self.now
        self.done += 1

    # ---- the loop -------------------------------------------------------------------------------

    def _advance(self, t: float) -> None:
        last = self._last_t
        if last is not None and t > last:
            dt = t - last
            self._alloc_area += self.allocated * dt
            self._partial_area += self.partial_gpus * dt
            self._queue_area += self.queued * dt
            if self.window > 0 and last < self.window:
                self._window_alloc += self.allocated * (min(t, self.window) - last)
        self._last_t = t
        self.now = t

    def run(self) -> RunResult:
        wall = time.perf_counter()
        for run in self.runs:
            self._push(run.job.submit, ARRIVAL, run.index)
        self.policy.attach(self)
        first = self.runs[0].job.submit if self.runs else 0.0
        next_report = wall + self.progress_every
        if self.progress is not None:
            self.progress(self.policy.name, first, 0, len(self.runs), 0, 0)
        while self._heap:
            t, kind, seq, payload = heapq.heappop(self._heap)
            self._advance(t)
            if kind != CYCLE:
                self._events -= 1
                self._last_event = t
            if not self._handle(t, kind, seq, payload):
                continue  # nothing happened: a stale completion, a wake-up no longer needed
            self.timeline.add(t, self.queued, self.allocated, self.partial_gpus)
            if self.progress is not None and self.cycles % 64 == 0 and time.perf_counter() >= next_report:
                next_report = time.perf_counter() + self.progress_every
                self.progress(self.policy.name, t, self.done, len(self.runs), self.queued, self.cycles)
        if self.progress is not None:
            self.progress(self.policy.name, self.now, self.done, len(self.runs), self.queued, self.cycles)
        self._advance(self.now)
        return self._result(first, time.perf_counter() - wall)

    def _handle(self, t: float, kind: int, seq: int, payload: int) -> bool:
        """Carry out one event. Did it happen (a completion of an evicted run, or a conditional
        cycle whose conditions no longer hold, does not)?"""
        if kind == COMPLETION:
            run = self.runs[payload]
            if self._epochs.pop(seq) != run.epoch:
                return False  # the run it was for was evicted
            self._complete(run)
            self.policy.on_complete(run, t)
            self.request_cycle(t)
        elif kind == ARRIVAL:
            run = self.runs[payload]
            self.queued += 1
            self.policy.on_arrival(run, t)
            self.request_cycle(t)
        else:
            conditions = self._scheduled.pop(payload)
            if conditions is not None and not any(still() for still in conditions):
                self.skipped_wakes += 1
                return False
            self._last_tick = payload
            self.cycles += 1
            self.policy.cycle(t)
            if self.every_tick and self.queued > 0 and (self._events or t < self._last_event + IDLE_HORIZON):
                self._request_tick(payload + 1)
        return True

    def _result(self, first: float, wall_seconds: float) -> RunResult:
        return RunResult(
            policy=self.policy.name,
            spec=self.spec,
            runs=self.runs,
            timeline=self.timeline,
            first_arrival=first,
            end=self.now,
            alloc_gpu_seconds=self._alloc_area,
            partial_gpu_seconds=self._partial_area,
            lost_gpu_seconds=self.lost_gpu_seconds,
            queue_job_seconds=self._queue_area,
            preemptions=self.preemptions,
            cycles=self.cycles,
            wall_seconds=wall_seconds,
            policy_stats=self.policy.stats(),
            window_seconds=self.window,
            window_alloc_gpu_seconds=self._window_alloc,
        )
