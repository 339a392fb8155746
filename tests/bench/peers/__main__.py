"""`make bench-peers`: Phalanx side by side with Coscheduling, Kueue, Volcano, KAI and the stock
kube-scheduler's own gang scheduling (``native``, Kubernetes 1.36 and later).

Builds the peers that are missing (``tests/localcluster/build-peers.sh``, cache outside the repo),
then runs every scenario for every system, each alone on a fresh local cluster, writes
``out/bench/peers/<scenario>.json`` (plus ``cost.json`` and ``summary.md``) and prints one table per
scenario with Phalanx ÷ the best peer. Not part of ``make test``.

    python -m tests.bench.peers                       # full sizes (for the published quiet run)
    python -m tests.bench.peers --size small          # every scenario end to end, a few minutes each
    python -m tests.bench.peers --systems phalanx,kueue --scenarios burst
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from tests.bench.peers import report
from tests.bench.peers.runner import run_one
from tests.bench.peers.scenarios import BUILDERS, scenario, trace_path
from tests.localcluster.cluster import REPO
from tests.localcluster.peers import BUILT_IN, PEER_NAMES, SYSTEMS, TOPOLOGY_BUILDS, blocker, build_peers

OUT = REPO / "out" / "bench" / "peers"
# Phalanx settings worth seeing beside the default in one scenario (a default run includes them).
# The floor (no gang scheduler) runs where a gang's start time is the figure.
VARIANTS = {
    "starvation": ["phalanx-reserve"],
    "large": ["floor"],
    "large-1k": ["floor"],
    "large-5k": ["floor"],
    "topology": ["floor"],  # the same gangs with no topology at all: how often they fit one rack anyway
}
VERSIONS = {
    "coscheduling": "sigs.k8s.io/scheduler-plugins v0.34.7",
    "kueue": "sigs.k8s.io/kueue v0.15.0",
    "volcano": "volcano.sh/volcano v1.10.0",
    "volcano-topology": "volcano.sh/volcano v1.12.2 (the topology scenario)",
    "kai": "github.com/NVIDIA/KAI-scheduler v0.12.0",
    "native": "kube-scheduler of the cluster (GenericWorkload + GangScheduling)",
    "floor": "kube-scheduler of the cluster, no gang scheduling (the reference)",
}


def machine() -> dict[str, Any]:
    load = os.getloadavg()
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": cpu,
        "load_average_1_5_15": [round(x, 2) for x in load],
        "python": platform.python_version(),
        "kernel": platform.release(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench.peers",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--size", choices=["small", "full"], default="full")
    parser.add_argument("--systems", default="", help=f"default: {','.join(PEER_NAMES)} (+ variants)")
    parser.add_argument("--scenarios", default=",".join(BUILDERS))
    parser.add_argument("--report-only", action="store_true", help="print the tables from out/bench/peers")
    args = parser.parse_args(argv)
    systems = [s for s in args.systems.split(",") if s] or list(PEER_NAMES)
    variants = VARIANTS if not args.systems else {}
    names = [s for s in args.scenarios.split(",") if s]
    OUT.mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        run(systems, names, args.size == "full", variants)
    return print_report(names)


def builds(systems: list[str], with_topology: list[bool]) -> tuple[str, ...]:
    """The peer builds a run needs, given which of its scenarios ask for a topology. A peer that
    cannot say a topology request is not built for the topology scenario alone; one that says it
    with another build (TOPOLOGY_BUILDS) gets that build too, or only that one."""
    peers = [s for s in systems if not s.startswith("phalanx") and s not in BUILT_IN]
    wanted = [s for s in peers if not all(with_topology)] + [
        TOPOLOGY_BUILDS.get(s, s) for s in peers if any(with_topology) and not SYSTEMS[s].topology_unsupported
    ]
    return tuple(dict.fromkeys(wanted))


def run(systems: list[str], names: list[str], full: bool, variants: dict[str, list[str]]) -> None:
    built = build_peers(builds(systems, [scenario(name, full).topology is not None for name in names]))
    if "trace" in names and trace_path() is None:
        print("trace scenario skipped: no trace slice (set PHALANX_PEERS_TRACE to a Philly-format CSV)")
        names = [n for n in names if n != "trace"]
    started = machine()
    for name in names:
        sc = scenario(name, full)
        path = OUT / f"{name}.json"
        running = [*systems, *variants.get(name, [])]
        doc: dict[str, Any] = {
            "scenario": name,
            "title": sc.title,
            "size": "full" if full else "small",
            "notes": sc.notes,
            "fleet": {"gpu_nodes": sc.fleet.gpu_nodes, "gpus_per_node": sc.fleet.gpus_per_node},
            "gangs": len(sc.arrivals),
            "pods": sum(a.size for a in sc.arrivals),
            "machine_at_start": started,
            "versions": VERSIONS,
            "systems": {},
            "not_run": {},
        }
        if path.is_file():  # keep the other systems' figures from an earlier run of the same size
            earlier = json.loads(path.read_text())
            if earlier.get("size") == doc["size"] and earlier.get("title") == doc["title"]:
                doc["systems"] = {k: v for k, v in earlier.get("systems", {}).items() if k not in running}
        for system in running:
            unsupported = SYSTEMS[system].topology_unsupported if sc.topology else None
            if unsupported:
                doc["not_run"][system] = unsupported
                continue
            build = TOPOLOGY_BUILDS.get(system, system) if sc.topology else system
            if not system.startswith("phalanx") and system not in BUILT_IN and built.get(build) is None:
                doc["not_run"][system] = blocker(build) or "not built"
                continue
            try:
                doc["systems"][system] = run_one(sc, system, built.get(build))
                doc["systems"][system]["measured"] = {
                    "at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                    "load_average_1_5_15": machine()["load_average_1_5_15"],
                }
            except Exception as err:  # one system failing must not lose the others' figures
                traceback.print_exc()
                doc["systems"][system] = {"error": f"{type(err).__name__}: {err}"[:500]}
            doc["machine_at_end"] = machine()
            path.write_text(json.dumps(doc, indent=1) + "\n")
        path.write_text(json.dumps(doc, indent=1) + "\n")  # the systems not run, when they come last


def _blocker_summary(system: str, text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return f"{system}: not built"
    if len(lines) == 1:
        return f"{system}: {lines[0]}"
    return f"{system}: {len(lines)} versions tried, e.g. {lines[-1]}"


def print_report(names: list[str]) -> int:
    sections: list[str] = []
    cost_rows: dict[str, dict[str, float]] = {}
    for name in names:
        path = OUT / f"{name}.json"
        if not path.is_file():
            continue
        doc = json.loads(path.read_text())
        if not doc["systems"]:
            continue
        title = f"{doc['title']} ({'; '.join(x for x in (doc['size'], doc['notes']) if x)})"
        sections.append(report.table(title, doc["systems"], report.METRICS[name]))
        sections.append(report.table(f"Cost during: {doc['title']}", doc["systems"], report.COST))
        for system, figures in doc["systems"].items():
            if "error" in figures:
                continue
            row = cost_rows.setdefault(system, {"cpu_s": 0.0, "peak_rss_mb": 0.0, "api_requests": 0.0})
            cost = figures.get("cost") or {}
            row["cpu_s"] += cost.get("cpu_s", 0.0)
            row["peak_rss_mb"] = max(row["peak_rss_mb"], cost.get("peak_rss_mb", 0.0))
            row["api_requests"] += cost.get("api_requests", 0)
        blocked = {**doc.get("not_run", {})}
        if blocked:
            sections.append("not run here: " + "; ".join(_blocker_summary(s, t) for s, t in blocked.items()))
    if cost_rows:
        totals = {s: {"cost": row} for s, row in cost_rows.items()}
        sections.append(
            report.table(
                "Cost over every scenario (CPU summed, RSS the largest)",
                totals,
                (
                    report.Metric("cost.cpu_s", "CPU s (own processes)", report.LOWER),
                    report.Metric("cost.peak_rss_mb", "peak RSS MB (own processes)", report.LOWER),
                    report.Metric("cost.api_requests", "API requests (all clients)", report.LOWER),
                ),
            )
        )
        (OUT / "cost.json").write_text(json.dumps(cost_rows, indent=1) + "\n")
    text = "\n\n".join(sections)
    (OUT / "summary.md").write_text(
        f"<!-- {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} -->\n{text}\n"
    )
    print(text)
    return 0 if sections else 1


if __name__ == "__main__":
    sys.exit(main())
