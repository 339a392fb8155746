"""Failover with the production lease (15 s duration, 5 s renew) on a real local control plane.

Two figures, each the time from a SIGKILL of the leading controller until a gang created right
after the kill has all its gates lifted (how long admission stops):

- *standby takeover*: a second replica (another identity) is running; it must wait for the dead
  leader's lease to expire;
- *restart*: the same replica is started again at once (same identity, as a restarted container of
  the same pod): it takes its own lease back without waiting.

Run: ``python -m tests.bench.bench_failover`` (about 2 minutes). Writes ``out/bench/failover.json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.localcluster import ClusterConfig, FleetSpec, LocalCluster, procs
from tests.localcluster.cluster import REPO
from tests.localcluster.phalanx import Phalanx, PhalanxOptions

OUT = Path("out/bench/failover.json")
NAMESPACE = "failover"
ROUNDS = 3


def gang(name: str, size: int = 4) -> dict[str, Any]:
    pods = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "labels": {"phalanx.io/pod-group": name},
                "annotations": {"phalanx.io/min-member": str(size)},
            },
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "containers": [
                    {"name": "main", "image": "pause", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                ],
            },
        }
        for i in range(size)
    ]
    return {"apiVersion": "v1", "kind": "List", "items": pods}


def lifted(cluster: LocalCluster, name: str) -> bool:
    pods = cluster.kubectl_json("get", "pods", "-n", NAMESPACE, "-l", f"phalanx.io/pod-group={name}")["items"]
    return len(pods) == 4 and all(not p["spec"].get("schedulingGates") for p in pods)


def admission_pause(cluster: LocalCluster, phalanx: Phalanx, name: str, restart: bool) -> float:
    phalanx.stop_controller(kill=True)
    killed = time.monotonic()
    cluster.kubectl("apply", "-n", NAMESPACE, "-f", "-", input=json.dumps(gang(name)))
    if restart:
        phalanx.start_controller()
    while not lifted(cluster, name):
        if time.monotonic() - killed > 120:
            raise RuntimeError(f"{name}: not admitted within 120 s")
        time.sleep(0.1)
    return time.monotonic() - killed


def main() -> int:
    # The production lease: the options' short e2e lease settings are dropped.
    options = PhalanxOptions()
    for key in ("PHALANX_CONTROLLER_LEASE_DURATION_SECONDS", "PHALANX_CONTROLLER_LEASE_RENEW_SECONDS"):
        options.controller_env.pop(key, None)
    config = ClusterConfig(
        name="phalanx-failover", workdir=REPO / ".local" / "bench-failover", fleet=FleetSpec(gpu_nodes=4)
    )
    figures: dict[str, Any] = {"lease_duration_s": 15.0, "lease_renew_s": 2.0}
    cluster = LocalCluster(config).up()
    phalanx = Phalanx(cluster, options)
    try:
        phalanx.install()
        phalanx.start_webhook()
        cluster.kubectl("create", "namespace", NAMESPACE)
        cluster.kubectl("label", "namespace", NAMESPACE, "phalanx.io/gang-scheduling=enabled")
        phalanx.start_controller()
        restarts = [admission_pause(cluster, phalanx, f"restart-{i}", restart=True) for i in range(ROUNDS)]
        takeovers = []
        for i in range(ROUNDS):
            standby = phalanx.spawn_controller(procs.free_port(), log_name=f"standby-{i}")
            try:
                takeovers.append(admission_pause(cluster, phalanx, f"takeover-{i}", restart=False))
            finally:
                standby.terminate()
                try:
                    standby.wait(10)
                except subprocess.TimeoutExpired:
                    standby.kill()  # never leave it running against the next cluster on this port
                    raise RuntimeError(f"standby-{i} did not stop within 10 s of SIGTERM") from None
            phalanx.start_controller()
            cluster.kubectl("delete", "pods", "--all", "-n", NAMESPACE, "--wait=false")
    finally:
        phalanx.down()
        cluster.down()
    figures["restart_pause_s"] = [round(x, 2) for x in restarts]
    figures["standby_takeover_pause_s"] = [round(x, 2) for x in takeovers]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as err:
        print(err, file=sys.stderr)
        sys.exit(1)
