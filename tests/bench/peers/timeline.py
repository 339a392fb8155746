"""What happened to every gang, from pod timestamps: waits, partial holding, allocation (pure)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass
class PodRecord:
    gang: str
    gpus: int
    created: float | None = None  # when the watch first saw it
    schedulable: float | None = None  # when the watch first saw it with no scheduling gate
    bound: float | None = None
    finished: float | None = None
    succeeded: bool = False
    node: str | None = None  # where it was bound


@dataclass
class GangRecord:
    name: str
    size: int
    gpus_per_pod: int
    submitted: float
    pods: list[PodRecord] = field(default_factory=list)

    def _events(self, end: float) -> list[tuple[float, int]]:
        """(time, +1 bound / -1 released) for every member, released at most at ``end``."""
        events = []
        for pod in self.pods:
            if pod.bound is None:
                continue
            events.append((pod.bound, 1))
            if pod.finished is not None:
                events.append((max(pod.finished, pod.bound), -1))
        return sorted(events, key=lambda e: (e[0], -e[1]))

    def all_bound_at(self, end: float) -> float | None:
        """The first moment all ``size`` members held their nodes at once."""
        running = 0
        for at, step in self._events(end):
            running += step
            if running >= self.size:
                return at
        return None

    def partial_gpu_seconds(self, end: float) -> float:
        """GPU-seconds held by members before the whole gang was placed (until ``end`` if never)."""
        until = self.all_bound_at(end)
        until = end if until is None else until
        total, running, last = 0.0, 0, None
        for at, step in self._events(end):
            if at > until:
                break
            if last is not None:
                total += running * (at - last)
            running += step
            last = at
        if last is not None:
            total += running * (until - last)
        return total * self.gpus_per_pod

    def completed(self) -> bool:
        return sum(1 for p in self.pods if p.succeeded) >= self.size

    def completed_at(self) -> float | None:
        done = sorted(p.finished for p in self.pods if p.succeeded and p.finished is not None)
        return done[self.size - 1] if len(done) >= self.size else None

    def gpu_seconds_used(self, start: float, end: float) -> float:
        used = 0.0
        for pod in self.pods:
            if pod.bound is None:
                continue
            lo = max(pod.bound, start)
            hi = min(pod.finished if pod.finished is not None else end, end)
            used += max(0.0, hi - lo) * pod.gpus
        return used


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summarize(
    gangs: list[GangRecord], start: float, end: float, total_gpus: int
) -> dict[str, float | int | None]:
    """The figures every scenario reports, over gangs submitted from ``start`` and watched to ``end``."""
    waits = []
    for gang in gangs:
        at = gang.all_bound_at(end)
        if at is not None:
            waits.append(at - gang.submitted)
    bound_times = [g.all_bound_at(end) for g in gangs]
    created = [p.created for g in gangs for p in g.pods if p.created is not None]
    last_created = max(created) - start if created else None
    schedulable = [p.schedulable for g in gangs for p in g.pods]
    last_schedulable = (
        max(t for t in schedulable if t is not None) - start
        if schedulable and all(t is not None for t in schedulable)
        else None
    )
    last_bound = (
        max(t for t in bound_times if t is not None) - start
        if all(t is not None for t in bound_times) and bound_times
        else None
    )
    completions = [g.completed_at() for g in gangs]
    done = [c for c in completions if c is not None]
    span = max(end - start, 1e-9)
    return {
        "gangs": len(gangs),
        "gangs_placed": len(waits),
        "gangs_completed": len(done),
        "wait_mean_s": round(statistics.fmean(waits), 3) if waits else None,
        "wait_p50_s": _round(pct(waits, 0.5)),
        "wait_p99_s": _round(pct(waits, 0.99)),
        "apply_to_last_bound_s": _round(last_bound),
        # The Job controller's share (the same for every system) and the gang scheduler's after it.
        "apply_to_last_created_s": _round(last_created),
        "last_created_to_last_bound_s": _between(last_created, last_bound),
        # ... and the gang scheduler's part split: its own (the last gate lifted) and the binding.
        "last_created_to_last_schedulable_s": _between(last_created, last_schedulable),
        "last_schedulable_to_last_bound_s": _between(last_schedulable, last_bound),
        "apply_to_last_completed_s": (
            round(max(done) - start, 3) if len(done) == len(gangs) and done else None
        ),
        "partial_gpu_seconds": round(sum(g.partial_gpu_seconds(end) for g in gangs), 1),
        "gpu_allocation_pct": round(
            100 * sum(g.gpu_seconds_used(start, end) for g in gangs) / (total_gpus * span), 1
        ),
    }


def _between(earlier: float | None, later: float | None) -> float | None:
    return None if earlier is None or later is None else _round(later - earlier)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def inside_one_domain(
    gangs: list[GangRecord], domain_of: dict[str, str], end: float
) -> dict[str, float | int | None]:
    """Of the gangs that were placed whole, how many ran inside one domain (``domain_of``: node ->
    its domain; a node without one counts as a domain of its own): at no moment did the members
    holding nodes at once span two domains. A gang moved whole (its members evicted, then made
    again by its Job and placed in another domain, as KAI's consolidation does) stayed inside one."""
    placed = [g for g in gangs if g.all_bound_at(end) is not None]
    inside = sum(1 for gang in placed if _never_spread(gang, domain_of))
    return {
        "gangs_inside_one_domain": inside,
        "gangs_spread": len(placed) - inside,
        "inside_one_domain_pct": round(100 * inside / len(placed), 1) if placed else None,
    }


def _never_spread(gang: GangRecord, domain_of: dict[str, str]) -> bool:
    # (time, 0 released / 1 bound, domain): at the same moment a member leaves before one arrives.
    events = []
    for pod in gang.pods:
        if pod.bound is None or pod.node is None:
            continue
        domain = domain_of.get(pod.node, f"node:{pod.node}")
        events.append((pod.bound, 1, domain))
        if pod.finished is not None:
            events.append((max(pod.finished, pod.bound), 0, domain))
    holding: dict[str, int] = {}
    for _, bound, domain in sorted(events):
        holding[domain] = holding.get(domain, 0) + (1 if bound else -1)
        if sum(1 for count in holding.values() if count > 0) > 1:
            return False
    return True
