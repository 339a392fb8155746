"""Run Phalanx against the local cluster the way e2e tests and the demo need it.

The webhook and the controller run as local processes: the webhook serves real TLS on 127.0.0.1
with certificates made by ``certs/``, registered through the ``deploy/local`` kustomize overlay
(``clientConfig.url``) with the CA injected by ``python -m certs inject``; the controller runs with
a token of its own ServiceAccount, so the RBAC in ``deploy/`` is exercised for real.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import yaml

from tests.localcluster import procs
from tests.localcluster.cluster import REPO, LocalCluster

# deploy/local registers the webhook at this URL; the launcher rewrites the port it actually uses.
LOCAL_WEBHOOK_URL = "https://127.0.0.1:9443/mutate"
NAMESPACE = "phalanx-system"


def _log(message: str) -> None:
    print(f"[phalanx {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class PhalanxOptions:
    # Free loopback ports by default, so that clusters of several checkouts can run side by side.
    webhook_port: int = field(default_factory=procs.free_port)
    webhook_health_port: int = field(default_factory=procs.free_port)
    controller_health_port: int = field(default_factory=procs.free_port)
    # Short timeouts keep e2e tests quick; production defaults are in controller/runtime/config.py.
    # The lease keeps its production timing: a shorter one is lost whenever this busy process waits
    # a few seconds for the CPU (a large gang's admission on a shared 2-core machine).
    controller_env: dict[str, str] = field(
        default_factory=lambda: {
            "PHALANX_CONTROLLER_BIND_TIMEOUT_SECONDS": "20",
            "PHALANX_CONTROLLER_RESYNC_SECONDS": "5",
        }
    )
    # CRDs of deploy/local not to apply: another project's CRD of that name serves the group.
    leave_crds: frozenset[str] = frozenset()


class Phalanx:
    def __init__(self, cluster: LocalCluster, options: PhalanxOptions | None = None) -> None:
        self.cluster = cluster
        self.options = options or PhalanxOptions()
        self.dir = cluster.config.workdir / "phalanx"
        self.cert_dir = self.dir / "certs"
        self.webhook: subprocess.Popen[bytes] | None = None
        self.controller: subprocess.Popen[bytes] | None = None
        self._logs: list[IO[bytes]] = []

    # ---- install ---------------------------------------------------------------------------------
    def install(self) -> None:
        """CRDs, namespace, ServiceAccounts, RBAC and the webhook configuration from deploy/local."""
        self.dir.mkdir(parents=True, exist_ok=True)
        rendered = self.cluster.kubectl("kustomize", str(REPO / "deploy" / "local")).stdout
        if self.options.leave_crds:
            rendered = yaml.safe_dump_all(
                doc
                for doc in yaml.safe_load_all(rendered)
                if doc
                and not (
                    doc["kind"] == "CustomResourceDefinition"
                    and doc["metadata"]["name"] in self.options.leave_crds
                )
            )
        url = f"https://127.0.0.1:{self.options.webhook_port}/mutate"
        self.cluster.kubectl(
            "apply", "--server-side", "-f", "-", input=rendered.replace(LOCAL_WEBHOOK_URL, url), timeout=120
        )
        for crd in ("podgroups.scheduling.sigs.k8s.io",):
            self.cluster.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
        self._python("-m", "certs", "generate", "--out", str(self.cert_dir), "--ip", "127.0.0.1")
        self._python(
            "-m",
            "certs",
            "inject",
            "--kubeconfig",
            str(self.cluster.kubeconfig),
            "--webhook-config",
            "phalanx-webhook",
            "--ca-file",
            str(self.cert_dir / "ca.crt"),
        )

    def _python(self, *args: str) -> None:
        result = subprocess.run(
            [sys.executable, *args], capture_output=True, text=True, check=False, cwd=REPO
        )
        if result.returncode != 0:
            raise RuntimeError(f"python {' '.join(args)} failed: {result.stderr.strip()}")

    def _spawn(self, name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (self.dir / f"{name}.log").open("ab")
        self._logs.append(log)
        process = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env}, cwd=REPO
        )
        # Recorded so `python -m tests.localcluster down` can stop what a kept demo left running.
        (self.dir / f"{name}.pid").write_text(str(process.pid))
        return process

    # ---- webhook ---------------------------------------------------------------------------------
    def start_webhook(self) -> None:
        self.webhook = self._spawn(
            "webhook",
            [
                sys.executable,
                "-m",
                "webhook",
                "--bind-address",
                "127.0.0.1",
                "--port",
                str(self.options.webhook_port),
                "--health-port",
                str(self.options.webhook_health_port),
                "--cert-dir",
                str(self.cert_dir),
                "--log-level",
                "INFO",
            ],
            {},
        )
        self._wait_http(
            f"http://127.0.0.1:{self.options.webhook_health_port}/readyz", "webhook ready", self.webhook
        )
        self._wait_webhook_effective()

    def _wait_webhook_effective(self) -> None:
        """A new webhook configuration takes effect about a second later: probe with a dry-run create."""
        probe_ns = f"phalanx-probe-{uuid.uuid4().hex[:6]}"
        self.cluster.kubectl("create", "namespace", probe_ns)
        self.cluster.kubectl("label", "namespace", probe_ns, "phalanx.io/gang-scheduling=enabled")
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe", "labels": {"phalanx.io/pod-group": "probe"}},
            "spec": {"containers": [{"name": "c", "image": "pause"}]},
        }
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                result = self.cluster.kubectl(
                    "create",
                    "--dry-run=server",
                    "-n",
                    probe_ns,
                    "-o",
                    "json",
                    "-f",
                    "-",
                    input=json.dumps(pod),
                    check=False,
                )
                if result.returncode == 0:
                    gates = json.loads(result.stdout)["spec"].get("schedulingGates") or []
                    if any(g["name"] == "phalanx.io/gang" for g in gates):
                        return
                time.sleep(0.3)
            raise TimeoutError("the webhook did not take effect within 60s (see .local/phalanx/webhook.log)")
        finally:
            self.cluster.kubectl("delete", "namespace", probe_ns, "--wait=false", check=False)

    # ---- controller ------------------------------------------------------------------------------
    def controller_kubeconfig(self) -> Path:
        """A kubeconfig that authenticates as the controller's own ServiceAccount."""
        token = self.cluster.kubectl(
            "create", "token", "phalanx-controller", "-n", NAMESPACE, "--duration=24h"
        ).stdout.strip()
        admin = self.cluster.kubectl_json("config", "view", "--raw", "--minify")
        cluster_entry = admin["clusters"][0]["cluster"]
        ca = cluster_entry.get("certificate-authority-data")
        if not ca and cluster_entry.get("certificate-authority"):
            ca = base64.b64encode(Path(cluster_entry["certificate-authority"]).read_bytes()).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "local",
                    "cluster": {"server": cluster_entry["server"], "certificate-authority-data": ca},
                }
            ],
            "users": [{"name": "phalanx-controller", "user": {"token": token}}],
            "contexts": [
                {"name": "controller", "context": {"cluster": "local", "user": "phalanx-controller"}}
            ],
            "current-context": "controller",
        }
        path = self.dir / "controller.kubeconfig"
        path.write_text(json.dumps(config))
        path.chmod(0o600)
        return path

    def spawn_controller(
        self, health_port: int, extra_env: dict[str, str] | None = None, log_name: str = "controller"
    ) -> subprocess.Popen[bytes]:
        """A controller process under its own ServiceAccount's token, ready (informers synced)."""
        kubeconfig = self.controller_kubeconfig()
        env = {
            **self.options.controller_env,
            **(extra_env or {}),
            "PHALANX_CONTROLLER_KUBECONFIG": str(kubeconfig),
            "PHALANX_CONTROLLER_HEALTH_BIND_ADDRESS": "127.0.0.1",
            "PHALANX_CONTROLLER_HEALTH_PORT": str(health_port),
            "PHALANX_CONTROLLER_NAMESPACE": NAMESPACE,
            # One name per replica, kept across restarts, as a pod's name is.
            "PHALANX_CONTROLLER_IDENTITY": log_name,
        }
        process = self._spawn(log_name, [sys.executable, "-m", "controller"], env)
        self._wait_http(f"http://127.0.0.1:{health_port}/readyz", f"{log_name} ready", process)
        return process

    def start_controller(self, extra_env: dict[str, str] | None = None) -> None:
        self.controller = self.spawn_controller(self.options.controller_health_port, extra_env)

    def stop_controller(self, kill: bool = False) -> None:
        if self.controller is None:
            return
        if kill:
            self.controller.kill()
        else:
            self.controller.terminate()
        try:
            self.controller.wait(10)
        except subprocess.TimeoutExpired:
            self.controller.kill()
            self.controller.wait(5)
        self.controller = None

    def metrics(self, which: str = "controller", port: int | None = None) -> str:
        if port is None:
            port = (
                self.options.controller_health_port
                if which == "controller"
                else self.options.webhook_health_port
            )
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            return str(response.read().decode())

    def planning_passes(self) -> int:
        """How many planning passes the running controller has finished."""
        for line in self.metrics().splitlines():
            if line.startswith("phalanx_planning_pass_seconds_count "):
                return int(float(line.split()[1]))
        raise AssertionError("phalanx_planning_pass_seconds_count not exported")

    def _wait_http(self, url: str, what: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
        procs.wait_serving(url, process, what, self.dir, timeout, interval=0.2)

    # ---- all together ----------------------------------------------------------------------------
    def up(self) -> Phalanx:
        t0 = time.monotonic()
        self.install()
        self.start_webhook()
        self.start_controller()
        _log(
            f"Phalanx running in {time.monotonic() - t0:.1f}s "
            f"(webhook https://127.0.0.1:{self.options.webhook_port}, logs {self.dir})"
        )
        return self

    def down(self) -> None:
        self.stop_controller()
        if self.webhook is not None:
            self.webhook.terminate()
            try:
                self.webhook.wait(10)
            except subprocess.TimeoutExpired:
                self.webhook.kill()
            self.webhook = None
        for log in self._logs:
            log.close()
        self._logs.clear()

    def __enter__(self) -> Phalanx:
        return self.up()

    def __exit__(self, *_: Any) -> None:
        self.down()


def stop_leftovers(workdir: Path) -> list[int]:
    """Stop webhook/controller processes a kept demo (``--keep``) left running; returns their pids."""
    stopped = []
    for pid_file in sorted((workdir / "phalanx").glob("*.pid")):
        try:
            pid = int(pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            pid_file.unlink(missing_ok=True)
            continue
        # Only a process that is still ours: pids are reused.
        if b"-m" in cmdline and (b"webhook" in cmdline or b"controller" in cmdline):
            procs.terminate([pid])
            stopped.append(pid)
        pid_file.unlink(missing_ok=True)
    return stopped
