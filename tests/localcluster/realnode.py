"""An opt-in real node beside the fake ones: containerd + runc + the CNI bridge + kubelet + kube-proxy.

Needs root, Debian's ``containerd``, ``runc`` and ``containernetworking-plugins`` (``/usr/lib/cni``),
iptables, and the kubelet/kube-proxy built by ``build-binaries.sh --node``. Everything it writes
lives in ``<cluster workdir>/node`` except what Linux keeps machine-wide: the bridge ``phalanx0``,
kube-proxy's iptables rules and the owner file below; ``down()`` removes those too.

Pods reach the API server the in-cluster way (Service ``kubernetes`` -> its endpoint): the API
server advertises the bridge's gateway address, where a small forwarder relays to the API server
on loopback (which stays its only listening address).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from tests.localcluster import procs
from tests.localcluster.binaries import ensure_binaries
from tests.localcluster.cluster import LocalCluster

BRIDGE = "phalanx0"
POD_SUBNET = "10.244.0.0/24"
GATEWAY = "10.244.0.1"
# The first address of kube-apiserver's default service range: the `kubernetes` Service.
KUBERNETES_SERVICE_IP = "10.0.0.1"
CNI_BIN_DIR = Path("/usr/lib/cni")
# kube-proxy's rules and the bridge are machine-wide: one real node per machine at a time.
OWNER_FILE = Path("/run/phalanx-realnode.owner")
# Chains the kubelet adds (and never removes) to the machine's iptables: (table, command).
KUBELET_IPTABLES_CLEANUP = (
    ("filter", ["-D", "INPUT", "-j", "KUBE-FIREWALL"]),
    ("filter", ["-D", "OUTPUT", "-j", "KUBE-FIREWALL"]),
    ("filter", ["-F", "KUBE-FIREWALL"]),
    ("filter", ["-X", "KUBE-FIREWALL"]),
    ("filter", ["-X", "KUBE-KUBELET-CANARY"]),
    ("nat", ["-X", "KUBE-KUBELET-CANARY"]),
    ("mangle", ["-X", "KUBE-KUBELET-CANARY"]),
    ("mangle", ["-X", "KUBE-IPTABLES-HINT"]),
)
ROUTE_LOCALNET = Path("/proc/sys/net/ipv4/conf/all/route_localnet")
PREREQUISITES = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip")


def _log(message: str) -> None:
    print(f"[realnode {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def missing_prerequisites() -> list[str]:
    """What this machine lacks for a real node (empty when it can run one)."""
    missing = [f"{tool} (not on PATH)" for tool in PREREQUISITES if shutil.which(tool) is None]
    if not (CNI_BIN_DIR / "bridge").is_file():
        missing.append(f"the CNI bridge plugin in {CNI_BIN_DIR} (Debian: containernetworking-plugins)")
    if os.geteuid() != 0:
        missing.append("root (kubelet, containerd and kube-proxy need it)")
    return missing


def cluster_options() -> dict[str, Any]:
    """kwokctl options the real node needs: the API server's certificate must name the addresses
    pods dial (the `kubernetes` Service IP and the gateway it forwards to)."""
    return {"kubeApiserverCertSANs": [KUBERNETES_SERVICE_IP, GATEWAY]}


def cluster_patches(pki_dir: Path) -> list[dict[str, Any]]:
    """The `kubernetes` Service's endpoint becomes the gateway address (relayed to loopback), and
    the API server authenticates to the kubelet (logs, exec) with kwokctl's admin certificate."""
    return [
        {
            "name": "kube-apiserver",
            "extraArgs": [
                {"key": "advertise-address", "value": GATEWAY},
                {"key": "kubelet-client-certificate", "value": str(pki_dir / "admin.crt")},
                {"key": "kubelet-client-key", "value": str(pki_dir / "admin.key")},
                # The node's name resolves nowhere; its InternalIP (the gateway) is the kubelet.
                {"key": "kubelet-preferred-address-types", "value": "InternalIP"},
            ],
        }
    ]


@dataclass
class RealNodeConfig:
    name: str = "real-node"
    kubelet_port: int = 10450
    kubelet_healthz_port: int = 10448
    proxy_healthz_port: int = 10456
    proxy_metrics_port: int = 10449
    ready_timeout: float = 120.0


class RealNode:
    def __init__(self, cluster: LocalCluster, config: RealNodeConfig | None = None) -> None:
        self.cluster = cluster
        self.config = config or RealNodeConfig()
        self.dir = cluster.config.workdir / "node"
        self.state_dir = Path("/run/phalanx") / self.config.name
        self.bin_dir: Path | None = None

    # ---- paths ---------------------------------------------------------------------------------
    @property
    def socket(self) -> Path:
        return self.dir / "containerd.sock"

    @property
    def pause_image(self) -> str:
        """The sandbox image, made locally from the pause binary (no registry serves one here)."""
        return f"localhost/phalanx-pause:{self.cluster.config.release.version}"

    @property
    def pid_dir(self) -> Path:
        return self.dir / "pids"

    @property
    def logs_dir(self) -> Path:
        return self.dir / "logs"

    def ctr(self, *args: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        cmd = ["ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args]
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(args)} failed: {result.stderr.strip()[-1000:]}")
        return result

    def import_image(self, archive: Path) -> None:
        """Load a docker-archive (``podman save --format docker-archive``) into the node."""
        self.ctr("images", "import", str(archive))

    # ---- lifecycle -----------------------------------------------------------------------------
    def up(self) -> RealNode:
        missing = missing_prerequisites()
        if missing:
            raise RuntimeError("cannot run a real node here: " + "; ".join(missing))
        started = time.monotonic()
        self.bin_dir = ensure_binaries(self.cluster.config.release, node=True)
        self._claim()
        self.down(quiet=True, release=False)
        for d in (self.dir, self.pid_dir, self.logs_dir, self.state_dir):
            d.mkdir(parents=True, exist_ok=True)
        (self.dir / "route_localnet.orig").write_text(ROUTE_LOCALNET.read_text())
        try:
            self._bridge()
            self._start_forwarder()
            self._start_containerd()
            self.import_image(self._pause_archive())
            self._start_kubelet()
            self._start_kube_proxy()
            self._wait_ready()
        except BaseException:
            _log(f"real node failed to start; logs in {self.logs_dir}")
            self.down(quiet=True)
            raise
        _log(f"real node {self.config.name} ready in {time.monotonic() - started:.1f}s")
        return self

    def _claim(self) -> None:
        owner = str(self.dir)
        if OWNER_FILE.exists():
            other = OWNER_FILE.read_text().strip()
            other_pids = procs.read_pids(Path(other) / "pids")
            if other != owner and any(procs.alive(p) for p in other_pids.values()):
                raise RuntimeError(f"another real node runs on this machine ({other}); stop it first")
        OWNER_FILE.write_text(owner)

    def _spawn(self, name: str, cmd: list[str]) -> None:
        log = (self.logs_dir / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
        log.close()
        (self.pid_dir / f"{name}.pid").write_text(str(proc.pid))

    def _bridge(self) -> None:
        # Made here rather than by the CNI plugin on the first pod, so the forwarder can bind the
        # gateway address before any pod exists. The bridge plugin adopts it as is.
        if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True, check=False).returncode != 0:
            _run(["ip", "link", "add", BRIDGE, "type", "bridge"])
        addrs = _output(["ip", "-4", "addr", "show", BRIDGE])
        if f"{GATEWAY}/" not in addrs:
            _run(["ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE])
        _run(["ip", "link", "set", BRIDGE, "up"])
        # Service traffic from pods back onto the same bridge must pass iptables.
        with contextlib.suppress(OSError):
            Path("/proc/sys/net/ipv4/ip_forward").write_text("1")

    def _apiserver_port(self) -> int:
        for line in self.cluster.kubeconfig.read_text().splitlines():
            if line.strip().startswith("server:"):
                port = urlparse(line.split("server:", 1)[1].strip()).port
                if port:
                    return port
        raise RuntimeError(f"no API server address in {self.cluster.kubeconfig}")

    def _start_forwarder(self) -> None:
        port = self._apiserver_port()
        self._spawn(
            "apiserver-forwarder",
            [sys.executable, "-m", "tests.localcluster.forward", GATEWAY, str(port), "127.0.0.1", str(port)],
        )

    def _start_containerd(self) -> None:
        config = self.dir / "containerd.toml"
        cni_conf = self.dir / "cni"
        cni_conf.mkdir(exist_ok=True)
        (cni_conf / "10-phalanx.conflist").write_text(json.dumps(self._cni_conflist(), indent=2))
        config.write_text(
            f"""version = 2
root = "{self.dir / "containerd"}"
state = "{self.state_dir / "containerd"}"
[grpc]
  address = "{self.socket}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{self.pause_image}"
  # Lowering oom_score_adj needs CAP_SYS_RESOURCE, which this machine does not grant.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{cni_conf}"
"""
        )
        self._spawn("containerd", ["containerd", "--config", str(config)])
        _poll(
            "containerd",
            lambda: (
                subprocess.run(
                    ["ctr", "--address", str(self.socket), "version"], capture_output=True, check=False
                ).returncode
                == 0
            ),
            30,
        )

    def _cni_conflist(self) -> dict[str, Any]:
        return {
            "cniVersion": "0.4.0",
            "name": "phalanx",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": True,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_SUBNET, "gateway": GATEWAY}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        # Kept with the node, so a teardown forgets every lease.
                        "dataDir": str(self.dir / "ipam"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }

    def _pause_archive(self) -> Path:
        """A docker-archive holding the pause binary as the sandbox image (no registry needed)."""
        assert self.bin_dir is not None
        archive = self.dir / "pause.tar"
        write_binary_image(self.bin_dir / "phalanx-pause", self.pause_image, archive, "/pause", ["/pause"])
        return archive

    def _start_kubelet(self) -> None:
        assert self.bin_dir is not None
        c = self.config
        pki = self.cluster.cluster_dir / "pki"
        kubelet_config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            # This machine has cgroup v1 (hybrid) and no systemd; QoS cgroups cannot be made.
            "failCgroupV1": False,
            "cgroupDriver": "cgroupfs",
            "cgroupsPerQOS": False,
            "enforceNodeAllocatable": [],
            "failSwapOn": False,
            "address": GATEWAY,
            "port": c.kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": c.kubelet_healthz_port,
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(pki / "ca.crt")},
            },
            "authorization": {"mode": "AlwaysAllow"},
            "clusterDomain": "cluster.local",
            "resolvConf": "/etc/resolv.conf",
            # A shared build machine: never evict or garbage-collect because its disk is busy.
            "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "nodeStatusReportFrequency": "10s",
        }
        config_path = self.dir / "kubelet.yaml"
        config_path.write_text(json.dumps(kubelet_config, indent=2))
        root = self.dir / "kubelet"
        self._spawn(
            "kubelet",
            [
                str(self.bin_dir / "kubelet"),
                f"--config={config_path}",
                f"--kubeconfig={self.cluster.kubeconfig}",
                f"--hostname-override={c.name}",
                f"--node-ip={GATEWAY}",
                f"--root-dir={root}",
                f"--cert-dir={root / 'pki'}",
                "--node-labels=phalanx.io/real-node=true",
                "--v=1",
            ],
        )

    def _start_kube_proxy(self) -> None:
        assert self.bin_dir is not None
        c = self.config
        proxy_config = {
            "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
            "kind": "KubeProxyConfiguration",
            "clientConnection": {"kubeconfig": str(self.cluster.kubeconfig)},
            "hostnameOverride": c.name,
            "mode": "iptables",
            "clusterCIDR": POD_SUBNET,
            # SNAT all Service traffic: a pod reaching a Service backed by a pod on the same
            # bridge gets its replies back through the host.
            "iptables": {"masqueradeAll": True},
            "healthzBindAddress": f"127.0.0.1:{c.proxy_healthz_port}",
            "metricsBindAddress": f"127.0.0.1:{c.proxy_metrics_port}",
            # Leave the machine's conntrack sysctls alone.
            "conntrack": {
                "maxPerCore": 0,
                "min": 0,
                "tcpEstablishedTimeout": "0s",
                "tcpCloseWaitTimeout": "0s",
            },
        }
        config_path = self.dir / "kube-proxy.yaml"
        config_path.write_text(json.dumps(proxy_config, indent=2))
        self._spawn("kube-proxy", [str(self.bin_dir / "kube-proxy"), f"--config={config_path}", "--v=1"])

    def _wait_ready(self) -> None:
        def ready() -> bool:
            node = self.cluster.kubectl_json("get", "node", self.config.name)
            return any(
                cond["type"] == "Ready" and cond["status"] == "True"
                for cond in node.get("status", {}).get("conditions", [])
            )

        def services_programmed() -> bool:
            rules = _output(["iptables", "-t", "nat", "-S", "KUBE-SERVICES"])
            return f"{KUBERNETES_SERVICE_IP}/32" in rules

        _poll(f"node {self.config.name} Ready", ready, self.config.ready_timeout, self._dead_component)
        _poll("kube-proxy's Service rules", services_programmed, 60, self._dead_component)

    def _dead_component(self) -> str | None:
        for name, pid in procs.read_pids(self.pid_dir).items():
            if not procs.alive(pid):
                tail = (self.logs_dir / f"{name}.log").read_text(errors="replace")[-1500:]
                return f"{name} exited; last log lines:\n{tail}"
        return None

    def down(self, quiet: bool = False, release: bool = True) -> None:
        """Stop the node's processes and pods, unmount what they mounted, remove machine-wide state."""
        pids = procs.read_pids(self.pid_dir)
        kubelet = pids.pop("kubelet", None)
        if kubelet is not None:
            procs.terminate([kubelet])
        procs.terminate(list(pids.values()))
        # Containers outlive containerd (stopped first, so it starts no shim cleanup of its own):
        # kill every shim of this containerd and what runs under it.
        for shim in _shims(self.socket):
            procs.terminate([*_descendants(shim), shim], grace_seconds=2)
        if "kube-proxy" in pids:
            # Its iptables rules are machine-wide and outlive it.
            bin_dir = self.bin_dir or ensure_binaries(self.cluster.config.release, quiet=True, node=True)
            subprocess.run([str(bin_dir / "kube-proxy"), "--cleanup"], capture_output=True, check=False)
        if kubelet is not None or "kube-proxy" in pids:
            for table, command in KUBELET_IPTABLES_CLEANUP:
                subprocess.run(["iptables", "-t", table, *command], capture_output=True, check=False)
            # kube-proxy turns route_localnet on; put back what the machine had.
            saved = self.dir / "route_localnet.orig"
            if saved.exists():
                with contextlib.suppress(OSError):
                    ROUTE_LOCALNET.write_text(saved.read_text())
        netns = [p for p in Path("/run/netns").glob("cni-*")] if release else []
        _unmount_under([self.dir, self.state_dir], extra=netns)
        for path in netns:
            path.unlink(missing_ok=True)
        subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True, check=False)
        for path in (self.pid_dir, self.state_dir, self.dir / "ipam"):
            shutil.rmtree(path, ignore_errors=True)
        if release and OWNER_FILE.exists() and OWNER_FILE.read_text().strip() == str(self.dir):
            OWNER_FILE.unlink()
        if not quiet:
            _log(f"real node stopped; logs kept in {self.logs_dir}")


def write_binary_image(
    binary: Path, reference: str, archive: Path, path: str, entrypoint: list[str] | None = None
) -> None:
    """Write a docker-archive of a one-layer image holding only ``binary`` at ``path`` -- enough
    for static Go programs, and loadable by ``ctr images import`` without any registry."""
    binary = binary.resolve()  # the file, not a link to it
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w") as tar:
        info = tar.gettarinfo(str(binary), arcname=path.lstrip("/"))
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        info.mtime = 0
        with binary.open("rb") as content:
            tar.addfile(info, content)
    layer_bytes = layer.getvalue()
    config: dict[str, Any] = {"Env": ["PATH=/usr/local/bin:/usr/bin:/bin"], "User": "0:0"}
    if entrypoint:
        config["Entrypoint"] = entrypoint
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(layer_bytes).hexdigest()]},
    }
    config_bytes = json.dumps(image_config).encode()
    config_name = hashlib.sha256(config_bytes).hexdigest() + ".json"
    manifest = [{"Config": config_name, "RepoTags": [reference], "Layers": ["layer.tar"]}]
    with tarfile.open(archive, mode="w") as tar:
        for name, data in (
            ("layer.tar", layer_bytes),
            (config_name, config_bytes),
            ("manifest.json", json.dumps(manifest).encode()),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _run(cmd: list[str]) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {result.stderr.strip()}")


def _output(cmd: list[str]) -> str:
    return subprocess.run(cmd, capture_output=True, text=True, check=False).stdout


def _poll(what: str, check: Any, timeout: float, diagnose: Any = None) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as err:  # keep polling; report the last error on timeout
            last = err
        if diagnose is not None and (why := diagnose()):
            raise RuntimeError(f"while waiting for {what}: {why}")
        time.sleep(0.5)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}" + (f": {last}" if last else ""))


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _shims(socket: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            cmd = _cmdline(int(entry.name))
            if cmd and cmd[0].endswith("containerd-shim-runc-v2") and str(socket) in cmd:
                found.append(int(entry.name))
    return found


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def _unmount_under(roots: list[Path], extra: list[Path]) -> None:
    """Lazily unmount every mount below ``roots`` (deepest first) and the mounts ``extra``."""
    prefixes = [str(r.resolve()) + "/" for r in roots]
    targets = [str(p) for p in extra]
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        target = line.split()[4].replace("\\040", " ")
        if any((target + "/").startswith(p) for p in prefixes):
            targets.append(target)
    for target in sorted(targets, key=len, reverse=True):
        subprocess.run(["umount", "-l", target], capture_output=True, check=False)
