"""Webhook latency and throughput over real TLS on loopback, against a bare aiohttp floor.

Run: ``python -m tests.bench.bench_webhook`` (or ``pytest -m bench tests/bench/bench_webhook.py``);
``--instructions`` adds instruction counts under callgrind (about 3 minutes more).
Starts the real webhook (``python -m webhook``, default settings: uvloop, INFO logs) and a bare
aiohttp TLS handler that answers ``allowed: true`` unchanged (the floor, on asyncio's loop as bare
aiohttp runs; the same handler on uvloop beside it for the like-for-like figure), each in its own
process, and drives them with
the same clients and the same mix of AdmissionReviews: a Job-owned pod (~3 KB, created from a
template Phalanx already gated, so nothing to change), an MPIJob (~8 KB, patched, with warnings)
and a pod Phalanx ignores. Phases: a fixed 1,000 requests/s from a keep-alive aiohttp client
(latency percentiles); saturation from ``wrk`` (a C load generator that needs a fraction of a core,
so that on a small machine the server, not the client, is what saturates) and, as before, from the
Python client (which saturates itself first: its figure understates the gap between the servers);
then wrk again with pod reviews only, and with an 8-worker MPIJob's reviews as the API server
sends them (the MPIJob, its launcher Job, nine pods: the mix the target is judged on); server CPU
per request in each. Rounds alternate between the servers so that other load on the
machine weighs on both alike. Also reports the admission logic's in-process CPU per request type,
including a pod that must be patched. Writes ``out/bench/webhook.json`` and prints a table. About a
minute; without ``wrk`` on the PATH (Debian: ``apt-get install wrk``) the Python client's figure is
the one compared with the target.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import logging
import math
import os
import platform
import resource
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypedDict

import aiohttp
import msgspec
import orjson
import pytest
import uvloop
from aiohttp import web

from tests.component.webhook.tls_helpers import serving_bundle, write_pair

HERE = Path(__file__).resolve()
ROOT = HERE.parents[2]
OUT = ROOT / "out" / "bench" / "webhook.json"
RATE = 1000
FIXED_SECONDS = 6.0  # per server, in ROUNDS alternating rounds
SATURATION_SECONDS = 6.0
ROUNDS = 6
WARMUP_SECONDS = 1.0
CONCURRENCY = 32
# wrk: whole seconds per round, and fewer, longer rounds: each run opens CONCURRENCY new TLS
# connections, whose handshakes should weigh little against the requests.
WRK_ROUND_SECONDS = 3
WRK_ROUNDS = 4
# Instruction counts (--instructions): a few connections, so the server is never saturated under
# valgrind and both servers handle their requests one loop pass at a time alike.
CALLGRIND_CONNECTIONS = 4
CALLGRIND_SECONDS = 20
TARGET_P99_MS = 3.0
TARGET_THROUGHPUT_RATIO = 0.85
# The webhook serves on uvloop; this floor does too (same handler), for the like-for-like figure.
UVLOOP_FLOOR = "floor-uvloop"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# --- payloads ---------------------------------------------------------------------------------


def _container(name: str, gpus: int, env: int) -> dict[str, Any]:
    return {
        "name": name,
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["torchrun", "--nnodes=8", "--nproc-per-node=1", "/workspace/train.py"],
        "args": ["--config", "/etc/train/config.yaml", "--checkpoint-dir", "/checkpoints/run-42"],
        "env": [{"name": f"TRAIN_SETTING_{i}", "value": f"value-{i:04d}-abcdefgh"} for i in range(env)],
        "resources": {
            "limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(gpus)},
            "requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": str(gpus)},
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/train"},
            {"name": "checkpoints", "mountPath": "/checkpoints"},
            {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"},
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }


def _pod_spec(gpus: int, env: int) -> dict[str, Any]:
    return {
        "restartPolicy": "Never",
        "containers": [_container("trainer", gpus, env)],
        "volumes": [
            {"name": "config", "configMap": {"name": "train-config", "defaultMode": 420}},
            {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "checkpoints"}},
            {
                "name": "kube-api-access-x7k2p",
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                    ],
                },
            },
        ],
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        ],
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "schedulerName": "default-scheduler",
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }


def _review(
    uid: str, gvk: tuple[str, str, str], resource: str, obj: dict[str, Any], user: str
) -> dict[str, Any]:
    group, version, kind = gvk
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "requestKind": {"group": group, "version": version, "kind": kind},
            "requestResource": {"group": group, "version": version, "resource": resource},
            "name": obj["metadata"].get("name", ""),
            "namespace": "ml-team",
            "operation": "CREATE",
            "userInfo": {
                "username": user,
                "uid": "8d2c4d3e-2f7a-4b0e-9a3c-1f4e5d6c7b8a",
                "groups": [
                    "system:serviceaccounts",
                    "system:serviceaccounts:kube-system",
                    "system:authenticated",
                ],
            },
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    }


def job_pod(uid: str, *, link: str) -> dict[str, Any]:
    """A pod as the Job controller creates it. ``link``: "gated" (from a template Phalanx already
    mutated: the common case, nothing to change), "foreign" (a Coscheduling label and no gate:
    must be patched) or "none" (not a gang member)."""
    labels = {
        "batch.kubernetes.io/controller-uid": "5b0a3c2e-7d1f-4e8a-9b6c-2a1d0e9f8c7b",
        "batch.kubernetes.io/job-name": "resnet-train",
        "controller-uid": "5b0a3c2e-7d1f-4e8a-9b6c-2a1d0e9f8c7b",
        "job-name": "resnet-train",
        "app.kubernetes.io/name": "resnet",
    }
    annotations = {"batch.kubernetes.io/job-completion-index": "3"}
    spec = _pod_spec(1, env=4)
    if link == "gated":
        labels["phalanx.io/pod-group"] = "resnet-train"
        annotations["phalanx.io/inferred-min-member"] = "8"
        spec["schedulingGates"] = [{"name": "phalanx.io/gang"}]
    elif link == "foreign":
        labels["pod-group.scheduling.sigs.k8s.io/name"] = "resnet-train"
        labels["pod-group.scheduling.sigs.k8s.io/min-available"] = "8"
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "resnet-train-",
            "namespace": "ml-team",
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "resnet-train",
                    "uid": "5b0a3c2e-7d1f-4e8a-9b6c-2a1d0e9f8c7b",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }
    return _review(uid, ("", "v1", "Pod"), "pods", obj, "system:serviceaccount:kube-system:job-controller")


def mpijob(uid: str) -> dict[str, Any]:
    obj = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {
            "name": "horovod-bench",
            "namespace": "ml-team",
            "labels": {"app.kubernetes.io/name": "horovod", "team": "vision"},
            "annotations": {"phalanx.io/schedule-timeout-seconds": "600"},
        },
        "spec": {
            "slotsPerWorker": 1,
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 3},
            "mpiImplementation": "OpenMPI",
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": {"metadata": {"labels": {"role": "launcher"}}, "spec": _pod_spec(0, env=33)},
                },
                "Worker": {
                    "replicas": 8,
                    "template": {
                        "metadata": {"labels": {"role": "worker"}},
                        "spec": {**_pod_spec(1, env=33), "schedulerName": "volcano"},
                    },
                },
            },
        },
    }
    return _review(uid, ("kubeflow.org", "v2beta1", "MPIJob"), "mpijobs", obj, "alice@example.com")


def launcher_job(uid: str) -> dict[str, Any]:
    """The launcher Job mpi-operator creates for the MPIJob above, from its launcher template as
    the webhook gated it: nothing left to gate, but a Job's traps are checked (and warned about)."""
    labels = {"role": "launcher", "phalanx.io/pod-group": "horovod-bench"}
    annotations = {"phalanx.io/inferred-min-member": "9", "phalanx.io/schedule-timeout-seconds": "600"}
    spec = {**_pod_spec(0, env=33), "schedulingGates": [{"name": "phalanx.io/gang"}]}
    owner = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "name": "horovod-bench",
        "uid": "0c7e1d2a-5b3f-4c8d-9e6a-7f1b2c3d4e5f",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "horovod-bench-launcher", "namespace": "ml-team", "ownerReferences": [owner]},
        "spec": {
            "backoffLimit": 6,
            "completions": 1,
            "parallelism": 1,
            "template": {"metadata": {"labels": labels, "annotations": annotations}, "spec": spec},
        },
    }
    return _review(
        uid, ("batch", "v1", "Job"), "jobs", obj, "system:serviceaccount:mpi-operator:mpi-operator"
    )


# The equal mix: each phase but the two below sends these in turn.
EQUAL_MIX = ("job-pod", "mpijob", "ignored-pod")
# Pod reviews only.
POD_MIX = {"job-pod": 1, "ignored-pod": 1}
# What the API server sends for one MPIJob of 8 workers: the MPIJob, the launcher Job mpi-operator
# creates, and nine pods (launcher and workers) from templates the webhook gated.
GANG_MIX = {"mpijob": 1, "launcher-job": 1, "job-pod": 9}


def payloads(extra: bool = False) -> dict[str, list[bytes]]:
    """Per request type, a few bodies with distinct uids (cycled): the equal mix's types, and with
    ``extra`` the launcher Job and a pod that must be patched (rare: Job pods come from gated
    templates)."""
    makers: dict[str, Any] = {
        "job-pod": lambda uid: job_pod(uid, link="gated"),
        "mpijob": mpijob,
        "ignored-pod": lambda uid: job_pod(uid, link="none"),
    }
    if extra:
        makers["foreign-linked-pod"] = lambda uid: job_pod(uid, link="foreign")
        makers["launcher-job"] = launcher_job
    return {name: [orjson.dumps(make(f"{name}-{i:04d}")) for i in range(16)] for name, make in makers.items()}


# --- servers ----------------------------------------------------------------------------------


def write_cert(directory: Path) -> bytes:
    """A throwaway serving certificate written as tls.crt / tls.key; returns the CA to trust."""
    bundle = serving_bundle()
    write_pair(directory, bundle)
    return bundle.ca_crt


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve_floor(port: int, cert_dir: Path, event_loop: str = "asyncio") -> None:
    """The floor: read, parse, answer allowed unchanged. Nothing else. ``event_loop``: asyncio's
    (bare aiohttp, what the target is judged against) or uvloop's (the webhook's own loop, for the
    like-for-like figure)."""

    async def handle(request: web.Request) -> web.Response:
        review = orjson.loads(await request.read())
        answer = {
            "apiVersion": review["apiVersion"],
            "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True},
        }
        return web.Response(body=orjson.dumps(answer), content_type="application/json")

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
    app = web.Application(client_max_size=3 * 1024 * 1024)
    app.router.add_post("/mutate", handle)
    loop = uvloop.new_event_loop() if event_loop == "uvloop" else None
    web.run_app(app, host="127.0.0.1", port=port, ssl_context=context, access_log=None, print=None, loop=loop)


def floor_command(port: int, cert_dir: Path, event_loop: str = "asyncio") -> list[str]:
    # Run as a module from the root (``started`` sets the cwd): the floor imports from tests/.
    return [
        sys.executable, "-m", "tests.bench.bench_webhook", "--serve-floor", str(port), str(cert_dir),
        "--floor-loop", event_loop,
    ]  # fmt: skip


@contextmanager
def started(command: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as sink:
        proc = subprocess.Popen(command, stdout=sink, stderr=sink, cwd=ROOT)
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


async def wait_ready(url: str, context: ssl.SSLContext, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    async with aiohttp.ClientSession() as session:
        while True:
            try:
                async with session.post(url, data=b"{}", ssl=context) as resp:
                    await resp.read()
                    return  # any HTTP answer over TLS means it is serving
            except aiohttp.ClientError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url} did not come up")
            await asyncio.sleep(0.1)


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS  # utime, stime


def cpu_seconds(pid: int) -> float:
    return sum(cpu_times(pid))


# --- load -------------------------------------------------------------------------------------


def percentile(sorted_values: list[float], fraction: float) -> float:
    index = max(0, math.ceil(fraction * len(sorted_values)) - 1)
    return sorted_values[index]


def summary_ms(latencies: list[float]) -> dict[str, float]:
    values = sorted(latencies)
    return {
        "count": len(values),
        "p50_ms": round(percentile(values, 0.50) * 1000, 3),
        "p99_ms": round(percentile(values, 0.99) * 1000, 3),
        "p999_ms": round(percentile(values, 0.999) * 1000, 3),
        "max_ms": round(values[-1] * 1000, 3),
    }


class Load:
    """One keep-alive client session against one server."""

    def __init__(self, name: str, url: str, context: ssl.SSLContext, pid: int) -> None:
        self.name, self.url, self.context, self.pid = name, url, context, pid
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONCURRENCY, ssl=context))
        self.mix = self.interleaved(payloads())
        self.latencies: list[tuple[str, float]] = []
        self.fixed_elapsed = 0.0
        self.done = 0
        self.saturated_elapsed = self.server_cpu = self.client_cpu = 0.0

    @staticmethod
    def interleaved(bodies: dict[str, list[bytes]]) -> list[tuple[str, bytes]]:
        """The request types interleaved, so that every phase sees the same mix."""
        return [
            (kind, body)
            for group in zip(*bodies.values(), strict=True)
            for kind, body in zip(bodies, group, strict=True)
        ]

    async def one(self, index: int) -> tuple[str, float]:
        kind, body = self.mix[index % len(self.mix)]
        started_at = time.perf_counter()
        async with self.session.post(
            self.url, data=body, headers={"Content-Type": "application/json"}
        ) as resp:
            await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"{self.name}: HTTP {resp.status}")
        return kind, time.perf_counter() - started_at

    async def fixed_rate(self, rate: int, seconds: float) -> None:
        """Open loop: requests start on schedule whether or not earlier ones have finished."""
        total = int(rate * seconds)
        start = time.perf_counter() + 0.005
        tasks = []
        for i in range(total):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(self.one(i)))
        self.latencies += await asyncio.gather(*tasks)
        self.fixed_elapsed += time.perf_counter() - start

    async def saturate(self, seconds: float, record: bool = True) -> None:
        """Closed loop: CONCURRENCY requests always in flight."""
        done = 0
        stop_at = time.perf_counter() + seconds

        async def worker(offset: int) -> None:
            nonlocal done
            i = offset
            while time.perf_counter() < stop_at:
                await self.one(i)
                done += 1
                i += CONCURRENCY

        cpu, own, started_at = cpu_seconds(self.pid), time.process_time(), time.perf_counter()
        await asyncio.gather(*(worker(i) for i in range(CONCURRENCY)))
        if record:
            self.done += done
            self.saturated_elapsed += time.perf_counter() - started_at
            self.server_cpu += cpu_seconds(self.pid) - cpu
            self.client_cpu += time.process_time() - own

    def report(self) -> dict[str, Any]:
        by_type: dict[str, list[float]] = {}
        for kind, latency in self.latencies:
            by_type.setdefault(kind, []).append(latency)
        return {
            "fixed_rate": {
                "offered_rps": RATE,
                "achieved_rps": round(len(self.latencies) / self.fixed_elapsed, 1),
                "all": summary_ms([latency for _, latency in self.latencies]),
                "by_type": {kind: summary_ms(values) for kind, values in by_type.items()},
            },
            "saturation": {
                "concurrency": CONCURRENCY,
                "rps": round(self.done / self.saturated_elapsed, 1),
                "server_cpu_percent": round(100 * self.server_cpu / self.saturated_elapsed, 1),
                "client_cpu_percent": round(100 * self.client_cpu / self.saturated_elapsed, 1),
                "server_cpu_us_per_request": round(1e6 * self.server_cpu / self.done, 1),
                # What one fully busy server core would sustain, whatever this client manages.
                "rps_per_server_core": round(self.done / self.server_cpu, 1),
            },
        }


async def measure(loads: list[Load]) -> None:
    """Alternate short rounds between the servers, so that whatever else runs on the machine
    weighs on both alike."""
    for load in loads:
        await load.saturate(WARMUP_SECONDS, record=False)
    for round_ in range(ROUNDS):
        for load in loads if round_ % 2 == 0 else loads[::-1]:
            await load.fixed_rate(RATE, FIXED_SECONDS / ROUNDS)
    for round_ in range(ROUNDS):
        for load in loads if round_ % 2 == 0 else loads[::-1]:
            await load.saturate(SATURATION_SECONDS / ROUNDS)


# --- wrk: a load generator that is not the bottleneck ------------------------------------------


# The wrk phases, by the suffix of their results' key: the equal mix, pods only, the MPIJob gang.
WRK_MIXES: dict[str, dict[str, int] | None] = {"": None, "_pods": POD_MIX, "_gang": GANG_MIX}


def weighted(weights: dict[str, int]) -> list[tuple[str, bytes]]:
    """``weights[kind]`` reviews of each kind in turn, their bodies cycled."""
    bodies = payloads(extra=True)
    seen = dict.fromkeys(weights, 0)
    mix = []
    for _ in range(16):
        for kind, count in weights.items():
            for _ in range(count):
                mix.append((kind, bodies[kind][seen[kind] % len(bodies[kind])]))
                seen[kind] += 1
    return mix


def wrk_script(directory: Path, weights: dict[str, int] | None = None) -> Path:
    """A wrk Lua script POSTing the same interleaved mix as ``Load`` (or the ``weights`` mix), body
    files read at start; ``done`` prints the figures as one JSON line."""
    mix = Load.interleaved(payloads()) if weights is None else weighted(weights)
    name = "all" if weights is None else "-".join(f"{kind}{n}" for kind, n in weights.items())
    for i, (_, body) in enumerate(mix):
        (directory / f"body-{name}-{i:03d}.json").write_bytes(body)
    script = directory / f"post-{name}.lua"
    script.write_text(
        f"""local bodies = {{}}
for i = 0, {len(mix) - 1} do
  local f = assert(io.open(string.format("{directory}/body-{name}-%03d.json", i), "rb"))
  bodies[i + 1] = f:read("*a")
  f:close()
end
local i = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  i = i % #bodies + 1
  return wrk.format(nil, nil, nil, bodies[i])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{{"requests": %d, "duration_us": %d, "errors": %d, "non_2xx": %d, "p99_us": %d}}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.timeout, e.status,
    latency:percentile(99)))
end
"""
    )
    return script


class WrkLoad:
    """Closed-loop saturation from wrk (one thread, CONCURRENCY keep-alive connections)."""

    def __init__(self, name: str, url: str, pid: int, script: Path) -> None:
        self.name, self.url, self.pid, self.script = name, url, pid, script
        self.done = self.errors = 0
        self.elapsed = self.server_user = self.server_system = self.client_cpu = 0.0

    def run(self, seconds: int, record: bool = True) -> None:
        user, system = cpu_times(self.pid)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        command = ["wrk", "-t1", f"-c{CONCURRENCY}", f"-d{seconds}s", "-s", str(self.script), self.url]
        out = subprocess.run(command, capture_output=True, text=True, check=True).stdout
        figures = orjson.loads(out.strip().splitlines()[-1])
        if figures["non_2xx"]:
            raise RuntimeError(f"{self.name}: {figures['non_2xx']} answers were not 2xx")
        if not record:
            return
        user_after, system_after = cpu_times(self.pid)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.done += figures["requests"]
        self.errors += figures["errors"]
        self.elapsed += figures["duration_us"] / 1e6
        self.server_user += user_after - user
        self.server_system += system_after - system
        self.client_cpu += (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)

    def report(self) -> dict[str, Any]:
        server_cpu = self.server_user + self.server_system
        return {
            "client": f"wrk -t1 -c{CONCURRENCY}",
            "rps": round(self.done / self.elapsed, 1),
            "socket_errors": self.errors,
            "server_cpu_percent": round(100 * server_cpu / self.elapsed, 1),
            "client_cpu_percent": round(100 * self.client_cpu / self.elapsed, 1),
            "server_cpu_us_per_request": round(1e6 * server_cpu / self.done, 1),
            "server_user_us_per_request": round(1e6 * self.server_user / self.done, 1),
            "server_system_us_per_request": round(1e6 * self.server_system / self.done, 1),
            "rps_per_server_core": round(self.done / server_cpu, 1),
        }


def measure_wrk(loads: list[WrkLoad]) -> None:
    for load in loads:
        load.run(1, record=False)
    for round_ in range(WRK_ROUNDS):
        for load in loads if round_ % 2 == 0 else loads[::-1]:
            load.run(WRK_ROUND_SECONDS)


# --- instruction counts: repeatable on a busy machine -------------------------------------------


def instructions_per_request(name: str, command: list[str], port: int, script: Path, log: Path) -> float:
    """User-space instructions per request of one server under callgrind, at low concurrency.

    Unlike CPU time these do not depend on what else runs on the machine (kernel time, the same
    for both servers, is not counted). TLS handshakes (of wrk's connections) are left out.
    """
    out = log.with_suffix(".callgrind")
    valgrind = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    url = f"https://127.0.0.1:{port}/mutate"
    with started([*valgrind, *command], log) as proc:
        context = ssl.create_default_context()
        context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
        asyncio.run(wait_ready(url, context, timeout=120))
        load = ["wrk", "-t1", f"-c{CALLGRIND_CONNECTIONS}", "-s", str(script), url]
        subprocess.run([*load[:3], "-d5s", *load[3:]], capture_output=True, check=True)  # warm-up
        subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], capture_output=True, check=True)
        result = subprocess.run(
            [*load[:3], f"-d{CALLGRIND_SECONDS}s", *load[3:]], capture_output=True, text=True, check=True
        )
        subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], capture_output=True, check=True)
        subprocess.run(["callgrind_control", "-d", str(proc.pid)], capture_output=True, check=True)
    requests: int = orjson.loads(result.stdout.strip().splitlines()[-1])["requests"]
    dump = max(out.parent.glob(out.name + ".*"), key=lambda p: p.stat().st_mtime)
    annotated = subprocess.run(
        ["callgrind_annotate", "--inclusive=yes", str(dump)], capture_output=True, text=True, check=True
    ).stdout
    total = handshakes = 0
    for line in annotated.splitlines():
        count = line.split()[0].replace(",", "") if line.strip() else ""
        if "PROGRAM TOTALS" in line:
            total = int(count)
        elif "SSL_do_handshake" in line and not handshakes:
            handshakes = int(count)
    return (total - handshakes) / requests


ADMISSION_CALLS = 500


def count_admission(kind: str, step: str) -> None:
    """Run under callgrind (``--count-admission``): ADMISSION_CALLS calls of one step on one
    request type, with instrumentation on for those calls only. ``floor``: what the floor does
    (parse, answer allowed); ``admit``: the webhook's whole admission of the body."""
    from shared.logging import configure_logging
    from webhook.admission import Admitter
    from webhook.metrics import WebhookMetrics
    from webhook.mutate import MutationConfig

    configure_logging("INFO")  # as the server runs; stderr goes to a file
    admitter = Admitter(MutationConfig(), WebhookMetrics())
    bodies = payloads(extra=True)[kind]

    def floor(body: bytes) -> bytes:
        review = orjson.loads(body)
        answer = {"apiVersion": review["apiVersion"], "kind": "AdmissionReview",
                  "response": {"uid": review["request"]["uid"], "allowed": True}}  # fmt: skip
        return orjson.dumps(answer)

    def admit(body: bytes) -> Any:
        return admitter.admit(body, time.perf_counter())

    call = {"floor": floor, "admit": admit}[step]
    for i in range(200):  # warm caches (pointer(), regexes) as a running server has them
        call(bodies[i % len(bodies)])
    subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], capture_output=True, check=True)
    for i in range(ADMISSION_CALLS):
        call(bodies[i % len(bodies)])
    subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], capture_output=True, check=True)


def admission_instructions(directory: Path) -> dict[str, dict[str, int]]:
    """Instructions per request of the floor's work and of the webhook's admission, per request
    type, in process: where the webhook's extra instructions go (the HTTP and TLS path is the
    same for both servers)."""
    result: dict[str, dict[str, int]] = {}
    for kind in payloads(extra=True):
        result[kind] = {}
        for step in ("floor", "admit"):
            out = directory / f"admission-{kind}-{step}.callgrind"
            command = [
                "valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                sys.executable, "-m", "tests.bench.bench_webhook", "--count-admission", kind, step,
            ]  # fmt: skip
            subprocess.run(command, cwd=ROOT, capture_output=True, check=True)
            dump = max(directory.glob(out.name + "*"), key=lambda p: p.stat().st_mtime)
            annotated = subprocess.run(
                ["callgrind_annotate", str(dump)], capture_output=True, text=True, check=True
            ).stdout
            total = next(int(line.split()[0].replace(",", "")) for line in annotated.splitlines()
                         if "PROGRAM TOTALS" in line)  # fmt: skip
            result[kind][f"{step}_instructions"] = round(total / ADMISSION_CALLS)
    return result


class _UidRequest(TypedDict):
    uid: str


class _UidReview(TypedDict):
    apiVersion: str
    request: _UidRequest


# The least any handler must read to answer (the floor parses the whole body, as a bare handler
# does): the webhook's pod view reads less than the whole, so this is the like-for-like figure.
_UID_ONLY = msgspec.json.Decoder(_UidReview)


def admission_cost() -> dict[str, Any]:
    """In-process CPU of the admission logic alone (best of several runs, so machine noise
    mostly drops out), next to the JSON parse that the floor does too, and to the least read
    (apiVersion and uid) any handler needs."""
    from shared.logging import configure_logging
    from webhook.admission import Admitter
    from webhook.metrics import WebhookMetrics
    from webhook.mutate import MutationConfig

    with open(os.devnull, "w") as sink:
        saved, sys.stderr = sys.stderr, sink
        try:
            configure_logging("INFO")  # as the server runs: one JSON line per patched object
            admitter = Admitter(MutationConfig(), WebhookMetrics())
            result: dict[str, Any] = {}
            for kind, bodies in payloads(extra=True).items():
                admit = min(
                    _per_call(lambda b: admitter.admit(b, time.perf_counter()), bodies) for _ in range(7)
                )
                parse = min(_per_call(orjson.loads, bodies) for _ in range(7))
                least = min(_per_call(_UID_ONLY.decode, bodies) for _ in range(7))
                result[kind] = {
                    "admit_us": round(admit, 1),
                    "json_parse_us": round(parse, 1),
                    "uid_only_read_us": round(least, 1),
                }
        finally:
            sys.stderr = saved
            logging.getLogger().handlers.clear()
    return result


def _per_call(fn: Any, bodies: list[bytes], calls: int = 800) -> float:
    started_at = time.perf_counter()
    for i in range(calls):
        fn(bodies[i % len(bodies)])
    return 1e6 * (time.perf_counter() - started_at) / calls


def webhook_command(port: int, health_port: int, cert_dir: Path) -> list[str]:
    # The webhook runs at its default log level (INFO: one JSON line per patched object).
    return [
        sys.executable, "-m", "webhook", "--bind-address", "127.0.0.1", "--port", str(port),
        "--health-port", str(health_port), "--cert-dir", str(cert_dir),
    ]  # fmt: skip


async def run_bench(instructions: bool = False) -> dict[str, Any]:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    cost = admission_cost()
    wrk = shutil.which("wrk") is not None
    with tempfile.TemporaryDirectory() as tmp:
        cert_dir = Path(tmp)
        ca = write_cert(cert_dir)
        scripts = {suffix: wrk_script(cert_dir, weights) for suffix, weights in WRK_MIXES.items()}
        context = ssl.create_default_context(cadata=ca.decode())
        floor_port, uv_port, hook_port, health_port = free_port(), free_port(), free_port(), free_port()
        floor_cmd = floor_command(floor_port, cert_dir)
        hook_cmd = webhook_command(hook_port, health_port, cert_dir)
        with (
            started(floor_cmd, OUT.parent / "webhook-bench-floor.log") as floor_proc,
            started(
                floor_command(uv_port, cert_dir, "uvloop"), OUT.parent / "webhook-bench-floor-uvloop.log"
            ) as uv_proc,
            started(hook_cmd, OUT.parent / "webhook-bench-webhook.log") as hook_proc,
        ):
            loads = [
                Load("floor", f"https://localhost:{floor_port}/mutate", context, floor_proc.pid),
                Load(UVLOOP_FLOOR, f"https://localhost:{uv_port}/mutate", context, uv_proc.pid),
                Load("webhook", f"https://localhost:{hook_port}/mutate", context, hook_proc.pid),
            ]
            wrk_loads = {
                suffix: [WrkLoad(load.name, load.url, load.pid, script) for load in loads]
                for suffix, script in scripts.items()
            }
            try:
                for load in loads:
                    await wait_ready(load.url, context)
                await measure(loads)
                if wrk:
                    for mix_loads in wrk_loads.values():
                        await asyncio.to_thread(measure_wrk, mix_loads)
            finally:
                for load in loads:
                    await load.session.close()
            results = {load.name: load.report() for load in loads}
            if wrk:
                for suffix, mix_loads in wrk_loads.items():
                    for wrk_load in mix_loads:
                        results[wrk_load.name]["saturation_wrk" + suffix] = wrk_load.report()
        counts: dict[str, int] = {}
        in_process: dict[str, dict[str, int]] = {}
        tools = ("valgrind", "callgrind_control", "callgrind_annotate", "wrk")
        if instructions and not all(shutil.which(tool) for tool in tools):
            print(f"--instructions needs {', '.join(tools)} on the PATH; skipped", file=sys.stderr)
        elif instructions:  # the same commands, now under valgrind, one at a time
            for name, command, port in (("floor", floor_cmd, floor_port), ("webhook", hook_cmd, hook_port)):
                for suffix, script in scripts.items():
                    log = OUT.parent / f"webhook-bench-{name}{suffix}-callgrind.log"
                    per_request = await asyncio.to_thread(
                        instructions_per_request, name, command, port, script, log
                    )
                    counts[name + suffix] = round(per_request)
            in_process = await asyncio.to_thread(admission_instructions, cert_dir)
    return summarize(cost, results, counts, in_process, wrk)


def summarize(
    cost: dict[str, Any],
    results: dict[str, Any],
    counts: dict[str, int],
    in_process: dict[str, dict[str, int]],
    wrk: bool,
) -> dict[str, Any]:
    sizes = {kind: len(bodies[0]) for kind, bodies in payloads(extra=True).items()}
    webhook, floor, uv_floor = results["webhook"], results["floor"], results[UVLOOP_FLOOR]
    # The figure compared with the target: the MPIJob gang as the API server sends it, with wrk (the
    # server saturates, not the client); without wrk, the Python client's equal mix.
    method = "saturation_wrk_gang" if wrk else "saturation"

    def ratio(of: str, base: dict[str, Any] = floor) -> float | None:
        return round(webhook[of]["rps"] / base[of]["rps"], 3) if of in webhook else None

    targets: dict[str, Any] = {
        "p99_ms_at_1000_rps": {"target": TARGET_P99_MS, "seen": webhook["fixed_rate"]["all"]["p99_ms"]},
        "saturated_throughput_vs_floor": {
            "target": TARGET_THROUGHPUT_RATIO,
            "seen": ratio(method),
            "client": webhook[method].get("client", "python aiohttp"),
            "mix": "gang" if wrk else "equal",
        },
        "per_core_throughput_vs_floor": {
            "seen": round(webhook[method]["rps_per_server_core"] / floor[method]["rps_per_server_core"], 3)
        },
        # Pod reviews only (wrk): most of what an API server sends.
        "saturated_throughput_vs_floor_pods_only": {"seen": ratio("saturation_wrk_pods")},
        # One review of each type in turn (wrk): workloads weigh three times what they do in a gang.
        "saturated_throughput_vs_floor_equal_mix": {"seen": ratio("saturation_wrk")},
        # The earlier method (one Python client, itself saturated, equal mix), kept for comparison.
        "saturated_throughput_vs_floor_python_client": {"seen": ratio("saturation")},
        # Against the same floor on uvloop, the webhook's own loop: what the admission itself costs.
        "saturated_throughput_vs_uvloop_floor": {
            "seen": ratio(method, uv_floor),
            "mix": "gang" if wrk else "equal",
        },
        "saturated_throughput_vs_uvloop_floor_pods_only": {"seen": ratio("saturation_wrk_pods", uv_floor)},
    }
    for suffix, mix in (("_gang", "gang"), ("_pods", "pods_only"), ("", "equal_mix")):
        if counts:
            targets[f"instructions_per_request_vs_floor_{mix}"] = {
                "seen": round(counts["floor" + suffix] / counts["webhook" + suffix], 3)
            }
    seen = targets["saturated_throughput_vs_floor"]["seen"]
    return {
        "benchmark": "webhook",
        "when": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "payload_bytes": sizes,
        "mixes": {"gang": GANG_MIX, "pods_only": POD_MIX, "equal": dict.fromkeys(EQUAL_MIX, 1)},
        "admission_cost_in_process": cost,
        "results": results,
        "instructions_per_request": counts or None,
        "admission_instructions_in_process": in_process or None,
        "targets": targets,
        "met": {
            "p99": webhook["fixed_rate"]["all"]["p99_ms"] <= TARGET_P99_MS,
            "throughput": seen is not None and seen >= TARGET_THROUGHPUT_RATIO,
        },
    }


def table(report: dict[str, Any]) -> str:
    rows = [f"{'':42}{'floor':>12}{'webhook':>12}{'floor/uvloop':>14}"]
    floor, hook = report["results"]["floor"], report["results"]["webhook"]
    uv = report["results"][UVLOOP_FLOOR]
    for label, key in (
        ("p50 ms @1000 rps", "p50_ms"),
        ("p99 ms @1000 rps", "p99_ms"),
        ("p999 ms @1000 rps", "p999_ms"),
    ):
        rows.append(
            f"{label:42}{floor['fixed_rate']['all'][key]:>12}{hook['fixed_rate']['all'][key]:>12}"
            f"{uv['fixed_rate']['all'][key]:>14}"
        )
    for name in floor["fixed_rate"]["by_type"]:
        label = f"  p99 ms {name}"
        rows.append(f"{label:42}{floor['fixed_rate']['by_type'][name]['p99_ms']:>12}"
                    f"{hook['fixed_rate']['by_type'][name]['p99_ms']:>12}")  # fmt: skip
    for method, client in (
        ("saturation_wrk_gang", "wrk, MPIJob gang"),
        ("saturation_wrk_pods", "wrk, pods only"),
        ("saturation_wrk", "wrk, equal mix"),
        ("saturation", "python client"),
    ):
        if method not in floor:
            continue
        for what, key in (
            ("saturated req/s", "rps"),
            ("server CPU %", "server_cpu_percent"),
            ("client CPU %", "client_cpu_percent"),
            ("server CPU us/request", "server_cpu_us_per_request"),
            ("req/s per server core", "rps_per_server_core"),
        ):
            label = f"{what} ({client})"
            rows.append(f"{label:42}{floor[method][key]:>12}{hook[method][key]:>12}{uv[method][key]:>14}")
    if counts := report["instructions_per_request"]:
        for suffix, mix in (("_gang", "MPIJob gang"), ("_pods", "pods only"), ("", "equal mix")):
            label = f"instructions/request ({mix})"
            rows.append(f"{label:42}{counts['floor' + suffix]:>12}{counts['webhook' + suffix]:>12}")
    for kind, count in (report.get("admission_instructions_in_process") or {}).items():
        label = f"in-process instr. {kind}"
        rows.append(f"{label:42}{count['floor_instructions']:>12}{count['admit_instructions']:>12}")
    for kind, cost in report["admission_cost_in_process"].items():
        label = f"in-process us {kind}"
        rows.append(f"{label:42}{cost['json_parse_us']:>12}{cost['admit_us']:>12}")
    targets = report["targets"]
    throughput = targets["saturated_throughput_vs_floor"]

    def share(key: str) -> str:
        seen = targets.get(key, {}).get("seen")
        return "-" if seen is None else f"{seen:.0%}"

    rows.append(
        f"targets: p99 {targets['p99_ms_at_1000_rps']['seen']} ms (<= {TARGET_P99_MS}), "
        f"throughput {share('saturated_throughput_vs_floor')} of floor on the {throughput['mix']} mix "
        f"with {throughput['client']} (>= {TARGET_THROUGHPUT_RATIO:.0%}); pods only "
        f"{share('saturated_throughput_vs_floor_pods_only')}, equal mix "
        f"{share('saturated_throughput_vs_floor_equal_mix')}, python client "
        f"{share('saturated_throughput_vs_floor_python_client')}; against the floor on uvloop "
        f"{share('saturated_throughput_vs_uvloop_floor')} (pods only "
        f"{share('saturated_throughput_vs_uvloop_floor_pods_only')}); per core "
        f"{share('per_core_throughput_vs_floor')}"
        + (
            f"; instructions {share('instructions_per_request_vs_floor_gang')} (pods only "
            f"{share('instructions_per_request_vs_floor_pods_only')}, equal mix "
            f"{share('instructions_per_request_vs_floor_equal_mix')})"
            if counts
            else ""
        )
        + f"; payloads {report['payload_bytes']}"
    )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve-floor", nargs=2, metavar=("PORT", "CERT_DIR"))
    parser.add_argument(
        "--floor-loop", choices=("asyncio", "uvloop"), default="asyncio", help=argparse.SUPPRESS
    )
    parser.add_argument("--count-admission", nargs=2, metavar=("KIND", "STEP"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions per request under callgrind"
    )
    args = parser.parse_args()
    if args.serve_floor:
        serve_floor(int(args.serve_floor[0]), Path(args.serve_floor[1]), args.floor_loop)
        return
    if args.count_admission:
        count_admission(*args.count_admission)
        return
    report = asyncio.run(run_bench(instructions=args.instructions))
    OUT.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    print(table(report))
    print(f"written to {OUT}")


@pytest.mark.bench
def test_webhook_bench() -> None:
    report = asyncio.run(run_bench())
    OUT.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    print(table(report))
    assert report["results"]["webhook"]["fixed_rate"]["all"]["count"] == int(RATE * FIXED_SECONDS)


if __name__ == "__main__":
    main()
