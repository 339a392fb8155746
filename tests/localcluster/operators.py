"""Run the workload operators (mpi-operator, KubeRay, JobSet, LeaderWorkerSet, Kubeflow Trainer)
as local processes beside a local cluster, each only when a test asks for it.

``Operators(cluster).ensure("jobset")`` builds the operator if it is not cached yet
(``build-operators.sh``), installs the CRDs from its module archive, registers its webhooks by URL
on loopback, starts it and returns once it serves. ``down()`` stops every operator it started and
removes their webhook registrations (a registration left behind would refuse pods).
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import yaml

from tests.localcluster import procs
from tests.localcluster.cluster import REPO, LocalCluster
from tests.localcluster.operator_specs import SPECS, OperatorSpec, Ports

BUILD_SCRIPT = Path(__file__).with_name("build-operators.sh")


def _log(message: str) -> None:
    print(f"[operators {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def build(*names: str) -> dict[str, Path]:
    """Build (or find cached) the named operators; name -> directory with binary and manifests."""
    result = subprocess.run(
        ["nice", "-n", "10", "bash", str(BUILD_SCRIPT), *names],
        stdout=subprocess.PIPE,
        stderr=sys.stderr,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"building operators {', '.join(names)} failed (exit {result.returncode})")
    found = {}
    for line in result.stdout.splitlines():
        name, _, directory = line.partition(" ")
        found[name] = Path(directory)
    return found


@dataclass
class Running:
    spec: OperatorSpec
    process: subprocess.Popen[bytes]
    ports: Ports
    log: IO[bytes]
    webhook_configs: list[tuple[str, str]]  # (kind, name) registered for it


class Operators:
    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.dir = cluster.config.workdir / "operators"
        self.cert_dir = self.dir / "certs"
        self.running: dict[str, Running] = {}
        self.timings: dict[str, float] = {}

    def ensure(self, name: str) -> Running:
        """The operator ``name``, running (with what it needs); started on first use."""
        if name in self.running:
            return self.running[name]
        spec = SPECS[name]
        for need in spec.needs:
            self.ensure(need)
        t0 = time.monotonic()
        home = build(name)[name]
        t1 = time.monotonic()
        self.dir.mkdir(parents=True, exist_ok=True)
        for namespace in spec.namespaces:
            self.cluster.kubectl("create", "namespace", namespace, check=False)
        for namespace, secret in spec.secrets:
            self.cluster.kubectl("create", "secret", "generic", secret, "-n", namespace, check=False)
        self._install_crds(spec, home)
        ports = Ports(health=procs.free_port(), webhook=procs.free_port())
        webhook_configs = self._register_webhooks(spec, home, ports) if spec.webhooks else []
        process, log = self._start(spec, home, ports)
        running = Running(spec, process, ports, log, webhook_configs)
        self.running[name] = running
        self._wait_serving(running)
        for extra in spec.extras:
            self._apply_file(home / "manifests" / extra)
        self.timings[name] = time.monotonic() - t1
        _log(
            f"{name} running in {self.timings[name]:.1f}s after {t1 - t0:.1f}s finding or building it "
            f"(log {self.dir / (name + '.log')})"
        )
        return running

    # ---- install -----------------------------------------------------------------------------
    def _apply_file(self, path: Path) -> None:
        # The operators' own CRDs replace any stand-in (the e2e MPIJob one), whoever applied it.
        self.cluster.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=phalanx-e2e-operators",
            "-f",
            str(path),
            timeout=120,
        )

    def _install_crds(self, spec: OperatorSpec, home: Path) -> None:
        names = []
        for crd in spec.crds:
            path = home / "manifests" / crd
            self._apply_file(path)
            names += [doc["metadata"]["name"] for doc in yaml.safe_load_all(path.read_text()) if doc]
        for name in names:
            self.cluster.kubectl("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s")

    def _certs(self) -> Path:
        if not (self.cert_dir / "tls.crt").is_file():
            result = subprocess.run(
                [sys.executable, "-m", "certs", "generate", "--out", str(self.cert_dir), "--ip", "127.0.0.1"],
                capture_output=True,
                text=True,
                check=False,
                cwd=REPO,
            )
            if result.returncode != 0:
                raise RuntimeError(f"certs generate failed: {result.stderr.strip()}")
        return self.cert_dir

    def _register_webhooks(self, spec: OperatorSpec, home: Path, ports: Ports) -> list[tuple[str, str]]:
        """The operator's webhook configurations, called by URL on loopback instead of a Service;
        renamed after the operator (JobSet's and LeaderWorkerSet's share their default names)."""
        ca = base64.b64encode((self._certs() / "ca.crt").read_bytes()).decode()
        assert spec.webhooks is not None
        registered = []
        for doc in yaml.safe_load_all((home / "manifests" / spec.webhooks).read_text()):
            if not doc:
                continue
            doc["metadata"] = {"name": spec.webhook_config_name or f"{spec.name}-{doc['metadata']['name']}"}
            for hook in doc.get("webhooks", []):
                if not spec.webhooks_called:
                    hook["rules"] = []
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{ports.webhook}{path}", "caBundle": ca}
                if spec.pod_label and any(
                    "pods" in rule.get("resources", []) for rule in hook.get("rules", [])
                ):
                    hook["objectSelector"] = {
                        "matchExpressions": [{"key": spec.pod_label, "operator": "Exists"}]
                    }
            self.cluster.apply_objects([doc], "--force-conflicts")
            registered.append((doc["kind"], doc["metadata"]["name"]))
        return registered

    # ---- processes ---------------------------------------------------------------------------
    def _start(
        self, spec: OperatorSpec, home: Path, ports: Ports
    ) -> tuple[subprocess.Popen[bytes], IO[bytes]]:
        workdir = self.dir / spec.name
        workdir.mkdir(parents=True, exist_ok=True)
        if spec.webhooks:
            self._certs()
        if spec.fixed_cert_dir:
            fixed = Path(spec.fixed_cert_dir)
            fixed.mkdir(parents=True, exist_ok=True)
            for name in ("tls.crt", "tls.key"):
                if not (fixed / name).exists():
                    shutil.copyfile(self._certs() / name, fixed / name)
        launch = spec.launch(home / spec.name, ports, workdir)
        for file_name, content in launch.files.items():
            (workdir / file_name).write_text(content)
        log = (self.dir / f"{spec.name}.log").open("ab")
        env = {**os.environ, **launch.env, "KUBECONFIG": str(self.cluster.kubeconfig)}
        process = subprocess.Popen(launch.argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir)
        (self.dir / f"{spec.name}.pid").write_text(str(process.pid))
        return process, log

    def _wait_serving(self, running: Running, timeout: float = 90.0) -> None:
        url = f"http://127.0.0.1:{running.ports.health}{running.spec.health_path}"
        log = self.dir / f"{running.spec.name}.log"
        procs.wait_serving(url, running.process, running.spec.name, log, timeout)

    def alive(self, name: str) -> bool:
        return name in self.running and self.running[name].process.poll() is None

    def down(self) -> None:
        for name, running in reversed(list(self.running.items())):
            for kind, config in running.webhook_configs:
                self.cluster.kubectl("delete", kind.lower(), config, "--ignore-not-found", check=False)
            running.process.terminate()
            try:
                running.process.wait(10)
            except subprocess.TimeoutExpired:
                running.process.kill()
                running.process.wait(5)
            running.log.close()
            (self.dir / f"{name}.pid").unlink(missing_ok=True)
        self.running.clear()

    def __enter__(self) -> Operators:
        return self

    def __exit__(self, *_: Any) -> None:
        self.down()


def stop_leftover_operators(workdir: Path) -> list[int]:
    """Stop operator processes a crashed or kept session left running; returns their pids."""
    stopped = []
    binaries = {f"/{name}".encode() for name in SPECS}
    for pid_file in sorted((workdir / "operators").glob("*.pid")):
        try:
            pid = int(pid_file.read_text().strip())
            program = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        except (OSError, ValueError):
            pid_file.unlink(missing_ok=True)
            continue
        # Only a process that is still one of ours (pids are reused): the cached operator binary.
        if any(program.endswith(b) for b in binaries) and b"/operators/" in program:
            procs.terminate([pid])
            stopped.append(pid)
        pid_file.unlink(missing_ok=True)
    return stopped
