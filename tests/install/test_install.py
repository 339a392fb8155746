"""Phalanx installed the way users install it (the release's manifests and image archive,
``kubectl apply --server-side``), running in containers on a real kubelet, gang-scheduling Jobs on
the fake GPU nodes. The tests run in file order: the last one uninstalls."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import ssl
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests import builders
from tests.install.conftest import NAMESPACE, Install

pytestmark = [pytest.mark.install, pytest.mark.timeout(900)]

OPT_IN = "phalanx.io/gang-scheduling=enabled"
GATE = "phalanx.io/gang"
SERVICE_DNS = f"phalanx-webhook.{NAMESPACE}.svc"
UNPRIVILEGED_UID = "65532"
CONTROLLER = "app.kubernetes.io/component=controller"
WEBHOOK = "app.kubernetes.io/component=webhook"


def _pods(install: Install, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    args = ["get", "pods", "-n", namespace] + (["-l", selector] if selector else [])
    items: list[dict[str, Any]] = install.cluster.kubectl_json(*args)["items"]
    return items


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in pod.get("status", {}).get("conditions", [])
    )


def _opted_in_namespace(install: Install) -> str:
    name = f"gang-{uuid.uuid4().hex[:6]}"
    install.kubectl("create", "namespace", name)
    install.kubectl("label", "namespace", name, OPT_IN)
    install.wait(
        "the default ServiceAccount", lambda: install.kubectl("get", "sa", "default", "-n", name, check=False)
    )
    return name


def _apply(install: Install, namespace: str, obj: dict[str, Any]) -> None:
    install.cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj))


def _container_processes(install: Install, namespace: str) -> dict[str, int]:
    """``pod/container`` -> host pid of every (non-sandbox) container of ``namespace`` on the node."""
    tasks = install.node.ctr("tasks", "ls").stdout.splitlines()[1:]
    found: dict[str, int] = {}
    for line in tasks:
        container_id, pid, status = line.split()[:3]
        if status != "RUNNING":
            continue
        info = json.loads(install.node.ctr("containers", "info", container_id).stdout)
        labels = info.get("Labels", {})
        if (
            labels.get("io.kubernetes.pod.namespace") != namespace
            or "io.kubernetes.container.name" not in labels
        ):
            continue
        found[f"{labels['io.kubernetes.pod.name']}/{labels['io.kubernetes.container.name']}"] = int(pid)
    return found


def _status_field(pid: int, field: str) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"{field} missing from /proc/{pid}/status")


def _root_mount_options(pid: int) -> set[str]:
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":
            return set(fields[5].split(","))
    raise AssertionError(f"no root mount for pid {pid}")


def _served_certificate_verifies(pod_ip: str, ca_pem: str) -> bool:
    """TLS to the pod itself, verified against ``ca_pem`` under the Service's DNS name."""
    with tempfile.NamedTemporaryFile("w", suffix=".crt") as ca_file:
        ca_file.write(ca_pem)
        ca_file.flush()
        context = ssl.create_default_context(cafile=ca_file.name)
        with (
            socket.create_connection((pod_ip, 9443), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname=SERVICE_DNS),
        ):
            return True


def _tls_secret_ca(install: Install) -> str:
    secret = install.cluster.kubectl_json("get", "secret", "phalanx-webhook-tls", "-n", NAMESPACE)
    return base64.b64decode(secret["data"]["ca.crt"]).decode()


def _injected_ca_bundles(install: Install) -> set[str]:
    config = install.cluster.kubectl_json("get", "mutatingwebhookconfiguration", "phalanx-webhook")
    return {base64.b64decode(w["clientConfig"].get("caBundle", "")).decode() for w in config["webhooks"]}


def _lease_holder(install: Install) -> str:
    lease = install.cluster.kubectl_json("get", "lease", "phalanx-controller", "-n", NAMESPACE)
    holder: str = lease["spec"].get("holderIdentity") or ""
    return holder


def _controller_pods(install: Install) -> set[str]:
    pods = _pods(install, NAMESPACE, "app.kubernetes.io/component=controller")
    return {p["metadata"]["name"] for p in pods}


def test_phalanx_runs_on_the_real_node_unprivileged(install: Install) -> None:
    pods = _pods(install, NAMESPACE)
    assert len(pods) == 4, [p["metadata"]["name"] for p in pods]
    assert all(_ready(p) and p["spec"]["nodeName"] == install.node.config.name for p in pods)
    processes = _container_processes(install, NAMESPACE)
    # Two webhooks with their cert-bootstrap sidecars, two controllers.
    assert sorted(name.rsplit("/", 1)[1] for name in processes) == [
        "cert-bootstrap",
        "cert-bootstrap",
        "controller",
        "controller",
        "webhook",
        "webhook",
    ]
    for name, pid in processes.items():
        real, effective, *_ = _status_field(pid, "Uid").split()
        assert (real, effective) == (UNPRIVILEGED_UID, UNPRIVILEGED_UID), name
        assert int(_status_field(pid, "CapEff"), 16) == 0, f"{name} has capabilities"
        assert "ro" in _root_mount_options(pid), f"{name}'s root file system is writable"


def test_certificates_are_bootstrapped_injected_and_served(install: Install) -> None:
    ca = _tls_secret_ca(install)
    assert "BEGIN CERTIFICATE" in ca
    assert _injected_ca_bundles(install) == {ca}
    webhooks = _pods(install, NAMESPACE, WEBHOOK)
    assert len(webhooks) == 2
    for pod in webhooks:
        assert _served_certificate_verifies(pod["status"]["podIP"], ca)


def test_the_pdb_keeps_one_webhook(install: Install) -> None:
    pdb = install.cluster.kubectl_json("get", "pdb", "phalanx-webhook", "-n", NAMESPACE)
    status = pdb["status"]
    assert (status["expectedPods"], status["currentHealthy"], status["disruptionsAllowed"]) == (2, 2, 1)


def test_the_image_serves_admissions_on_uvloop(install: Install) -> None:
    """uvloop is installed in the image, so the webhook's default (``--event-loop auto``) picks it."""
    for pod in _pods(install, NAMESPACE, WEBHOOK):
        log = install.kubectl("logs", pod["metadata"]["name"], "-n", NAMESPACE, "-c", "webhook")
        serving = [json.loads(line) for line in log.splitlines() if '"webhook serving"' in line]
        assert [line["event_loop"] for line in serving] == ["uvloop"], log[-2000:]


def test_gangs_are_scheduled_in_cluster_and_another_replica_takes_over(install: Install) -> None:
    namespace = _opted_in_namespace(install)
    # Fills both fake GPU nodes (2 x 8 GPUs): admitted as one gang by the in-cluster controller.
    _apply(install, namespace, builders.job("fills").parallelism(2).gpus(8).build())

    def members_running(name: str, count: int) -> bool:
        pods = _pods(install, namespace, f"job-name={name}")
        return len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods)

    install.wait("the first gang to run", lambda: members_running("fills", 2), 120)
    fills = _pods(install, namespace, "job-name=fills")
    # The webhook (reached through its Service) linked the pods to their gang.
    assert {p["metadata"]["labels"].get("phalanx.io/pod-group") for p in fills} == {"fills"}
    assert {p["spec"]["nodeName"] for p in fills} == {"gpu-node-000", "gpu-node-001"}

    # No GPU is left: the next gang waits at its gate.
    _apply(install, namespace, builders.job("waits").parallelism(1).gpus(1).build())
    install.wait("the second gang's pod", lambda: len(_pods(install, namespace, "job-name=waits")) == 1, 60)
    (waiting,) = _pods(install, namespace, "job-name=waits")
    assert GATE in {g["name"] for g in waiting["spec"].get("schedulingGates", [])}

    # Kill the leader: another replica takes the Lease over and admits the waiting gang. The
    # leader releases the Lease on SIGTERM, so the standby and the Deployment's replacement pod
    # race for it; either may win, never the deleted pod.
    leader = _lease_holder(install)
    controllers = _controller_pods(install)
    (leader_pod,) = [name for name in controllers if leader.startswith(name)]
    install.kubectl("delete", "pod", leader_pod, "-n", NAMESPACE, "--wait=false")

    def another_replica_leads() -> bool:
        holder = _lease_holder(install)
        return any(holder.startswith(name) for name in _controller_pods(install) - {leader_pod})

    install.wait("another replica to take the Lease", another_replica_leads, 90)
    install.kubectl("delete", "job", "fills", "-n", namespace, "--cascade=foreground", timeout=120)
    install.wait("the waiting gang to run under the new leader", lambda: members_running("waits", 1), 120)


def test_a_restarted_webhook_serves_the_same_ca(install: Install) -> None:
    ca = _tls_secret_ca(install)
    before = {p["metadata"]["name"] for p in _pods(install, NAMESPACE, WEBHOOK)}
    install.kubectl("delete", "pod", sorted(before)[0], "-n", NAMESPACE, timeout=120)

    def replaced() -> bool:
        pods = _pods(install, NAMESPACE, WEBHOOK)
        names = {p["metadata"]["name"] for p in pods}
        return len(pods) == 2 and names != before and all(_ready(p) for p in pods)

    install.wait("a replacement webhook pod", replaced, 120)
    assert _tls_secret_ca(install) == ca
    assert _injected_ca_bundles(install) == {ca}
    for pod in _pods(install, NAMESPACE, WEBHOOK):
        assert _served_certificate_verifies(pod["status"]["podIP"], ca)


def test_a_gang_applied_while_a_webhook_replica_is_down_starts_whole(install: Install) -> None:
    """One webhook replica frozen (SIGSTOP: it takes connections and never answers, as a hung
    process does): the API server's calls to it time out and, with failurePolicy Fail, the pod is
    refused and re-created by the Job controller until a call reaches the live replica. No member
    escapes the gate, and the gang starts whole."""
    webhooks = sorted(
        (name, pid)
        for name, pid in _container_processes(install, NAMESPACE).items()
        if name.endswith("/webhook")
    )
    assert len(webhooks) == 2, webhooks
    frozen_name, frozen_pid = webhooks[0]
    namespace = _opted_in_namespace(install)
    frozen_ip = next(
        p["status"]["podIP"]
        for p in _pods(install, NAMESPACE, WEBHOOK)
        if frozen_name.startswith(p["metadata"]["name"])
    )
    os.kill(frozen_pid, signal.SIGSTOP)
    try:
        # It is down for real: it takes the connection (the kernel does) and never finishes TLS.
        with pytest.raises(OSError):
            _served_certificate_verifies(frozen_ip, _tls_secret_ca(install))
        # Four members and the Job: each call picks a replica through the Service, so some reach
        # the frozen one (all five missing it is a 1-in-32 chance; the outcome must hold either way).
        # The Job's own review may reach the frozen replica too: the apply is then refused (the
        # API server's "failed calling webhook", nothing created) and applied again, as a user would.
        for _attempt in range(10):
            try:
                _apply(install, namespace, builders.job("one-down").parallelism(4).gpus(2).build())
                break
            except RuntimeError as refused:
                assert "failed calling webhook" in str(refused), refused
        else:
            raise AssertionError("the Job was refused ten times with one webhook replica alive")

        def running_whole() -> bool:
            pods = _pods(install, namespace, "job-name=one-down")
            return len(pods) == 4 and all(p["status"].get("phase") == "Running" for p in pods)

        install.wait("the gang to run with one webhook replica down", running_whole, 300)
        members = _pods(install, namespace, "job-name=one-down")
        # Every member went through the live replica: linked to its gang and admitted by the
        # controller (the admission record names them all), none bound around the gate.
        assert {p["metadata"]["labels"].get("phalanx.io/pod-group") for p in members} == {"one-down"}

        def podgroup_running() -> bool:
            podgroup = install.cluster.kubectl_json(
                "get", "podgroups.scheduling.sigs.k8s.io", "one-down", "-n", namespace
            )
            return bool(podgroup.get("status", {}).get("phase") == "Running")

        install.wait("the PodGroup to say Running", podgroup_running, 60)
        bypassed = install.kubectl(
            "get", "events", "-n", namespace, "--field-selector", "reason=GateBypassed", "-o", "name"
        )
        assert bypassed == "", bypassed
    finally:
        os.kill(frozen_pid, signal.SIGCONT)
    install.kubectl("delete", "job", "one-down", "-n", namespace, "--cascade=foreground", timeout=120)

    def both_ready() -> bool:
        pods = _pods(install, NAMESPACE, WEBHOOK)
        return len(pods) == 2 and all(_ready(p) for p in pods)

    install.wait(f"both webhook replicas ready again ({frozen_name} was frozen)", both_ready, 180)


def test_uninstall_leaves_pods_schedulable(install: Install) -> None:
    # A gang larger than the fleet (3 x 8 GPUs > 2 x 8) waits at its gate when Phalanx goes away.
    stranded = _opted_in_namespace(install)
    _apply(install, stranded, builders.job("too-big").parallelism(3).gpus(8).build())
    install.wait("the oversized gang's pods", lambda: len(_pods(install, stranded, "job-name=too-big")) == 3)

    install.kubectl("delete", "-f", str(install.manifest), "--wait=true", timeout=240)
    assert install.kubectl("get", "namespace", NAMESPACE, check=False) == ""
    assert install.kubectl("get", "mutatingwebhookconfiguration", "phalanx-webhook", check=False) == ""
    # A namespace still labelled for Phalanx: with the webhook gone, pods are neither refused
    # (failurePolicy Fail) nor gated, and the scheduler places them as usual.
    namespace = _opted_in_namespace(install)
    # No GPUs (whatever earlier tests left running), on the fake nodes (no registry for the image).
    after = builders.job("after").parallelism(2).build()
    after["spec"]["template"]["spec"]["nodeSelector"] = {"type": "kwok"}
    _apply(install, namespace, after)

    def running_ungated() -> bool:
        pods = _pods(install, namespace, "job-name=after")
        return (
            len(pods) == 2
            and all(not p["spec"].get("schedulingGates") for p in pods)
            and all(p["status"].get("phase") == "Running" for p in pods)
        )

    install.wait("ungated pods to run after uninstall", running_ungated, 120)
    # Nothing lifts a gate once Phalanx is gone (docs/operations.md: delete such workloads).
    for pod in _pods(install, stranded, "job-name=too-big"):
        assert GATE in {g["name"] for g in pod["spec"].get("schedulingGates", [])}
