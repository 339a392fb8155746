"""One table per scenario: each system's figures and Phalanx ÷ the best peer (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LOWER, HIGHER = "lower", "higher"
# The stock kube-scheduler's own gang scheduling (tests/localcluster/peers.py NativeGangSystem).
NATIVE = "native"
# No gang scheduler at all (FloorSystem): the reference, never "the best peer".
FLOOR = "floor"


@dataclass(frozen=True)
class Metric:
    key: str  # dotted path into a system's figures
    label: str
    better: str


COST = (
    Metric("cost.cpu_s", "CPU s (own processes)", LOWER),
    Metric("cost.peak_rss_mb", "peak RSS MB (own processes)", LOWER),
    Metric("cost.api_requests", "API requests (all clients)", LOWER),
    Metric("cost.stock_kube_scheduler_cpu_s", "stock kube-scheduler CPU s", LOWER),
)

# One gang's start: the whole of it, then split where the Job controller's part ends.
ONE_GANG = (
    Metric("apply_to_last_bound_s", "apply → all bound s", LOWER),
    Metric("apply_to_last_created_s", "apply → last member created s", LOWER),
    Metric("last_created_to_last_bound_s", "last member created → all bound s", LOWER),
    Metric("last_created_to_last_schedulable_s", "… → last gate lifted s", LOWER),
    Metric("last_schedulable_to_last_bound_s", "last gate lifted → all bound s", LOWER),
    Metric("partial_gpu_seconds", "partial GPU-s", LOWER),
)

METRICS: dict[str, tuple[Metric, ...]] = {
    "deadlock": (
        Metric("gangs_completed", "gangs completed", HIGHER),
        Metric("partial_gpu_seconds", "partial GPU-s", LOWER),
        Metric("apply_to_last_completed_s", "apply → all have run s", LOWER),
        Metric("wait_p50_s", "per-gang wait p50 s", LOWER),
    ),
    "burst": (
        Metric("apply_to_last_bound_s", "apply → last bound s", LOWER),
        Metric("wait_p50_s", "per-gang wait p50 s", LOWER),
        Metric("wait_p99_s", "per-gang wait p99 s", LOWER),
        Metric("partial_gpu_seconds", "partial GPU-s", LOWER),
        Metric("gangs_completed", "gangs completed", HIGHER),
    ),
    "starvation": (
        Metric("focus_wait_s", "big gang's wait s", LOWER),
        Metric("others.wait_p50_s", "small gangs' wait p50 s", LOWER),
        Metric("others.wait_p99_s", "small gangs' wait p99 s", LOWER),
        Metric("partial_gpu_seconds", "partial GPU-s", LOWER),
        Metric("gangs_completed", "gangs completed", HIGHER),
    ),
    "large": ONE_GANG,
    "large-1k": ONE_GANG,
    "large-5k": ONE_GANG,
    "topology": (
        Metric("inside_one_domain_pct", "gangs inside one rack %", HIGHER),
        Metric("wait_p50_s", "per-gang wait p50 s", LOWER),
        Metric("wait_p99_s", "per-gang wait p99 s", LOWER),
        Metric("gangs_completed", "gangs completed", HIGHER),
        Metric("gpu_allocation_pct", "GPU allocation %", HIGHER),
    ),
    "trace": (
        Metric("wait_mean_s", "wait mean s", LOWER),
        Metric("wait_p99_s", "wait p99 s", LOWER),
        Metric("gpu_allocation_pct", "GPU allocation %", HIGHER),
        Metric("partial_gpu_seconds", "partial GPU-s", LOWER),
        Metric("gangs_completed", "jobs completed", HIGHER),
    ),
}


def lookup(figures: dict[str, Any], key: str) -> float | None:
    value: Any = figures
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return None if value is None or isinstance(value, bool) else float(value)


def ratio(phalanx: float | None, peers: list[float | None], better: str, versus: str = "best peer") -> str:
    """Phalanx ÷ the best peer's figure, as text; below 1 is better for "lower" metrics."""
    known = [p for p in peers if p is not None]
    if phalanx is None or not known:
        return "—"
    best = min(known) if better == LOWER else max(known)
    if best == 0:
        return "= (both 0)" if phalanx == 0 else f"∞ ({versus} 0)"
    return f"{phalanx / best:.2f}"


def _cell(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.0f}" if abs(value) >= 100 or value == int(value) else f"{value:.2f}"


def table(title: str, results: dict[str, dict[str, Any]], metrics: tuple[Metric, ...]) -> str:
    """A Markdown table: one row per metric, one column per system, then Phalanx ÷ best peer (and
    Phalanx ÷ the stock scheduler's own gangs, when those ran: the question "why not just that?";
    and Phalanx ÷ the floor, no gang scheduler at all, when it ran)."""
    names = ("phalanx", "coscheduling", "kueue", "volcano", "kai", NATIVE, FLOOR)
    order = {name: i for i, name in enumerate(names)}
    systems = sorted(results, key=lambda s: (order.get(s, len(order)), s))
    # phalanx-* are Phalanx variants; the floor is the reference, not a peer.
    peers = [s for s in systems if not s.startswith("phalanx") and s != FLOOR]
    against = [s for s in (NATIVE, FLOOR) if s in systems]
    header = ["metric", *systems, "Phalanx ÷ best peer", *(f"Phalanx ÷ {s}" for s in against)]
    lines = [f"**{title}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for metric in metrics:
        values = {s: None if "error" in results[s] else lookup(results[s], metric.key) for s in systems}
        row = [f"{metric.label} ({metric.better} is better)"]
        row += [_cell(values[s]) if "error" not in results[s] else "failed" for s in systems]
        row.append(ratio(values.get("phalanx"), [values[p] for p in peers], metric.better))
        row += [ratio(values.get("phalanx"), [values[s]], metric.better, s) for s in against]
        lines.append("| " + " | ".join(row) + " |")
    failures = {s: r["error"] for s, r in results.items() if "error" in r}
    for system, error in failures.items():
        lines.append(f"\n{system} failed: {error}")
    timeouts = [s for s, r in results.items() if r.get("timed_out")]
    if timeouts:
        lines.append(f"\ntimed out (figures up to the timeout): {', '.join(timeouts)}")
    return "\n".join(lines)
