"""The wired controller (controller/app.py) and its health server, against the FakeKube."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CONTENT_TYPE_LATEST

from controller import resources as r
from controller.app import Controller
from controller.config import ControllerSettings
from controller.health import health_app
from controller.informer import Informer
from controller.metrics import ControllerMetrics
from controller.reconciler import REPLAN
from controller.store import Store, sinks_for
from shared import constants as c
from tests.component.controller.fake_kube import FakeKube
from tests.component.controller.harness import Harness, gang, gates_of, namespace, node, until


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- health server --------------------------------------------------------------------------------


async def test_readyz_is_503_until_the_informers_synced() -> None:
    kube = FakeKube()
    kube.seed(r.NODES, node("node-0"))
    informer = Informer(kube, r.NODES, sinks_for(Store(), ())[str(r.NODES)])
    app = health_app(informer.synced.is_set, lambda: True, ControllerMetrics().registry)
    async with TestClient(TestServer(app)) as client:
        resp = await client.get("/readyz")
        assert resp.status == 503
        assert await resp.text() == "informers not synced"
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), 2)
            resp = await client.get("/readyz")
            assert resp.status == 200
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_healthz_reports_liveness() -> None:
    alive = True
    app = health_app(lambda: False, lambda: alive, ControllerMetrics().registry)
    async with TestClient(TestServer(app)) as client:
        resp = await client.get("/healthz")
        assert (resp.status, await resp.text()) == (200, "ok")
        alive = False  # e.g. leadership lost
        assert (await client.get("/healthz")).status == 500


async def test_metrics_are_served_in_the_prometheus_text_format() -> None:
    metrics = ControllerMetrics()
    metrics.admissions.inc()
    async with TestClient(TestServer(health_app(lambda: True, lambda: True, metrics.registry))) as client:
        resp = await client.get("/metrics")
        assert resp.status == 200
        assert resp.headers["Content-Type"] == CONTENT_TYPE_LATEST
        assert "phalanx_admissions_total 1.0" in await resp.text()


# ---- the whole controller -------------------------------------------------------------------------


@pytest.fixture
async def controller() -> AsyncIterator[tuple[FakeKube, Controller, int]]:
    """Controller.run() with informers, queue and reconciler live; no leader election."""
    kube = FakeKube()
    kube.unserved = {r.WORKLOADS, r.PODGROUPS_KAI}
    kube.seed(r.NODES, node("node-0"), node("node-1"))
    kube.seed(r.NAMESPACES, namespace())
    port = free_port()
    settings = ControllerSettings(
        leader_election=False, health_bind_address="127.0.0.1", health_port=port, resync_seconds=3600
    )
    ctl = Controller(settings, kube)
    task = asyncio.create_task(ctl.run())
    yield kube, ctl, port
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def released(kube: FakeKube, prefix: str, n: int) -> bool:
    pods = [kube.obj(r.PODS, "team", f"{prefix}-{i}") for i in range(n)]
    return all(p is not None and not gates_of(p) for p in pods)


async def test_the_controller_admits_gangs_end_to_end(controller: tuple[FakeKube, Controller, int]) -> None:
    kube, ctl, port = controller
    await until(lambda: ctl.synced)
    assert {i.rt for i in ctl.informers} == {
        r.NODES,
        r.NAMESPACES,
        r.PODS,
        r.PRIORITY_CLASSES,
        r.PDBS,
        r.PODGROUPS,
        r.PODGROUPS_X_K8S,
        r.QUEUES,
        r.QUEUES_KAI,
    }

    kube.seed(r.PODS, *gang(5, "a"))
    await until(lambda: released(kube, "a", 5))
    kube.seed(r.PODS, *gang(3, "b"))  # exactly the 3 GPUs left
    await until(lambda: released(kube, "b", 3))
    kube.seed(r.PODS, *gang(2, "c"))  # no room left
    await until(
        lambda: (kube.obj(r.PODGROUPS, "team", "c") or {}).get("status", {}).get("phase") == "Pending"
    )
    assert gates_of(kube.obj(r.PODS, "team", "c-0")) == [c.GATE]

    # Per gang: PodGroup created, then the admission recorded, then the gates lifted.
    for group in ("a", "b"):
        writes = [w for w in kube.writes if w.name == group or w.name.startswith(f"{group}-")]
        verbs = [(w.verb, w.rt.plural, w.subresource) for w in writes]
        assert verbs[0] == ("create", "podgroups", None)
        assert verbs[1] == ("patch", "podgroups", None)
        assert c.ADMISSION_ANNOTATION in writes[1].body["metadata"]["annotations"]
        assert {v for v in verbs[2:] if v[1] == "pods"} == {("patch", "pods", None)}

    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/readyz") as resp:
            assert resp.status == 200
        async with session.get(f"http://127.0.0.1:{port}/metrics") as resp:
            assert "phalanx_admissions_total 2.0" in await resp.text()


async def test_a_gang_seen_while_standby_is_served_after_becoming_leader() -> None:
    h = Harness()
    h.cluster()
    h.kube.seed(r.PODS, *gang(5))
    leading = asyncio.Event()
    task = asyncio.create_task(h.reconciler.run(leading))
    try:
        h.sync()  # informers stay warm on a standby: the gang's key is queued ...
        await asyncio.sleep(0.05)  # ... and taken by the standby loop
        leading.set()  # the old leader died; Controller._resync then queues a REPLAN
        h.queue.add(REPLAN)
        await asyncio.sleep(0.05)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert h.pg() is not None
    assert released(h.kube, "g", 5)


async def test_a_podgroup_kind_served_after_the_start_is_watched_from_then_on() -> None:
    kube = FakeKube()
    kube.unserved = {r.WORKLOADS, r.PODGROUPS_KAI}
    kube.seed(r.NODES, node("node-0"), node("node-1"))
    kube.seed(r.NAMESPACES, namespace())
    settings = ControllerSettings(
        leader_election=False, health_bind_address="127.0.0.1", health_port=free_port(), resync_seconds=0.05
    )
    ctl = Controller(settings, kube)
    task = asyncio.create_task(ctl.run())
    try:
        await until(lambda: ctl.synced)
        assert r.PODGROUPS_KAI not in {i.rt for i in ctl.informers}
        kube.unserved = {r.WORKLOADS}  # the kai-compat component is installed later
        await until(lambda: r.PODGROUPS_KAI in {i.rt for i in ctl.informers} and ctl.synced)
        assert not task.done()  # the controller keeps running
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_invalid_settings_exit_2_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    from controller.__main__ import main

    assert main(["--bind-timeout-seconds", "abc"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("phalanx-controller: invalid settings:")
    assert "bind_timeout_seconds" in err
