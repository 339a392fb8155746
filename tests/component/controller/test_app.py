"""The wired controller (controller/runtime/app.py) and its health server, against the FakeKube."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CONTENT_TYPE_LATEST

from controller.api import resources as r
from controller.api.informer import Informer
from controller.api.resources import ResourceType
from controller.api.store import Store, sinks_for
from controller.pipeline.reconciler import REPLAN
from controller.runtime.app import Controller, LeadershipLost
from controller.runtime.config import ControllerSettings
from shared import constants as c
from tests.component.controller.fake_kube import FakeKube
from tests.component.controller.harness import Harness, gang, gates_of, namespace, node, until
from tests.settings_help import help_text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- health server (shared.health, as the Controller wires it) -------------------------------------


async def test_readyz_is_503_until_the_informers_synced() -> None:
    kube = FakeKube()
    kube.seed(r.NODES, node("node-0"))
    ctl = Controller(ControllerSettings(), kube)
    informer = Informer(kube, r.NODES, sinks_for(Store(), ())[str(r.NODES)])
    ctl.informers.append(informer)  # what run() does with each watched type
    async with TestClient(TestServer(ctl.health_app())) as client:
        resp = await client.get("/readyz")
        assert resp.status == 503
        assert await resp.text() == "not ready: informers not synced\n"
        task = asyncio.create_task(informer.run())
        try:
            await asyncio.wait_for(informer.synced.wait(), 2)
            resp = await client.get("/readyz")
            assert (resp.status, await resp.text()) == (200, "ready\n")
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


async def test_healthz_fails_once_leadership_is_lost() -> None:
    ctl = Controller(ControllerSettings(), FakeKube())
    async with TestClient(TestServer(ctl.health_app())) as client:
        resp = await client.get("/healthz")
        assert (resp.status, await resp.text()) == (200, "ok\n")
        ctl.elector.lost.set()  # what the elector does when it cannot renew in time
        resp = await client.get("/healthz")
        assert (resp.status, await resp.text()) == (500, "unhealthy: leadership lost\n")


async def test_metrics_are_served_in_the_prometheus_text_format() -> None:
    ctl = Controller(ControllerSettings(), FakeKube())
    ctl.metrics.admissions.inc()
    async with TestClient(TestServer(ctl.health_app())) as client:
        resp = await client.get("/metrics")
        assert resp.status == 200
        assert resp.headers["Content-Type"] == CONTENT_TYPE_LATEST
        assert "phalanx_gang_admissions_total 1.0" in await resp.text()


# ---- the whole controller -------------------------------------------------------------------------


@pytest.fixture
async def controller() -> AsyncIterator[tuple[FakeKube, Controller, int]]:
    """Controller.run() with informers, queue and reconciler live; no leader election."""
    kube = FakeKube()
    kube.unserved = {*r.NATIVE_TYPES, r.PODGROUPS_KAI}
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
        r.PODGROUPS_VOLCANO,
        r.QUEUES,
        r.QUEUES_KAI,
        *r.SIZED_WORKLOAD_TYPES,  # a gang follows its workload's size
        *r.DRA_TYPES,  # the devices a plan counts, where resource.k8s.io is served
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
            assert "phalanx_gang_admissions_total 2.0" in await resp.text()


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
    kube.unserved = {*r.NATIVE_TYPES, r.PODGROUPS_KAI}
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
        kube.unserved = {*r.NATIVE_TYPES}  # the kai-compat component is installed later
        await until(lambda: r.PODGROUPS_KAI in {i.rt for i in ctl.informers} and ctl.synced)
        assert not task.done()  # the controller keeps running
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize(
    ("served", "watched"),
    [
        (r.NATIVE_TYPES, {str(r.WORKLOAD_VERSIONS[0]): "v1beta1", str(r.NATIVE_PODGROUPS): "v1beta1"}),
        ((r.WORKLOADS,), {str(r.WORKLOADS): "v1alpha1"}),  # 1.35: Workloads of v1alpha1 only
        (  # 1.36
            tuple(rt for rt in r.NATIVE_TYPES if rt.version == "v1alpha2"),
            {str(r.WORKLOADS): "v1alpha2", str(r.NATIVE_PODGROUPS): "v1alpha2"},
        ),
        ((), {}),  # a server without the native API: nothing of it is watched, nothing breaks
    ],
    ids=["newest-of-several", "v1alpha1-only", "v1alpha2-only", "none"],
)
async def test_the_native_api_is_read_at_the_newest_version_the_server_serves(
    served: tuple[ResourceType, ...], watched: dict[str, str]
) -> None:
    kube = FakeKube()
    kube.unserved = {rt for rt in r.NATIVE_TYPES if rt not in served}
    kube.seed(r.NODES, node("node-0"))
    kube.seed(r.NAMESPACES, namespace())
    settings = ControllerSettings(
        leader_election=False, health_bind_address="127.0.0.1", health_port=free_port(), resync_seconds=0.05
    )
    ctl = Controller(settings, kube)
    task = asyncio.create_task(ctl.run())
    try:
        await until(lambda: ctl.synced)
        await asyncio.sleep(0.2)  # a few looks for new kinds: none adds a second version
        native = {str(i.rt): i.rt.version for i in ctl.informers if i.rt.group == "scheduling.k8s.io"}
        native.pop(str(r.PRIORITY_CLASSES))
        assert native == watched
        assert not task.done()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_an_informer_started_later_is_supervised_too() -> None:
    """Every long-running task is in one TaskGroup: the crash of an informer started after the
    launch stops the controller (to be restarted) instead of leaving a kind silently unwatched."""
    kube = FakeKube()
    kube.unserved = {*r.NATIVE_TYPES, r.PODGROUPS_KAI}
    kube.seed(r.NODES, node("node-0"))
    kube.seed(r.NAMESPACES, namespace())
    settings = ControllerSettings(
        leader_election=False, health_bind_address="127.0.0.1", health_port=free_port(), resync_seconds=0.05
    )
    ctl = Controller(settings, kube)
    task = asyncio.create_task(ctl.run())
    try:
        await until(lambda: ctl.synced)
        crash = RuntimeError("watch of the late kind crashed")

        async def crashing() -> None:
            raise crash

        original = ctl._start_informers

        def start(group: asyncio.TaskGroup, types: list[r.ResourceType]) -> None:
            original(group, types)
            group.create_task(crashing())

        ctl._start_informers = start  # type: ignore[method-assign]
        kube.unserved = {*r.NATIVE_TYPES}  # a kind becomes served: its informer starts, and crashes
        with pytest.raises(ExceptionGroup) as raised:
            await asyncio.wait_for(task, 5)
        assert raised.value.exceptions == (crash,)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_lost_leadership_ends_the_run_with_leadership_lost() -> None:
    kube = FakeKube()
    kube.unserved = {*r.NATIVE_TYPES, r.PODGROUPS_KAI}
    kube.seed(r.NODES, node("node-0"))
    kube.seed(r.NAMESPACES, namespace())
    settings = ControllerSettings(
        health_bind_address="127.0.0.1", health_port=free_port(), resync_seconds=3600
    )
    ctl = Controller(settings, kube)
    task = asyncio.create_task(ctl.run())
    await until(ctl.elector.is_leader.is_set)
    ctl.elector.lost.set()  # what the elector does when it cannot renew in time
    with pytest.raises(ExceptionGroup) as raised:
        await asyncio.wait_for(task, 5)
    assert [type(e) for e in raised.value.exceptions] == [LeadershipLost]


async def test_leadership_is_renewed_through_its_own_client_never_the_busy_one() -> None:
    """A large gang's gate lifts fill the main client's pool; the lease goes through its own."""
    kube, lease_kube = FakeKube(), FakeKube()
    kube.unserved = {r.WORKLOADS, r.PODGROUPS_KAI}
    kube.seed(r.NODES, node("node-0"))
    kube.seed(r.NAMESPACES, namespace())
    settings = ControllerSettings(
        health_bind_address="127.0.0.1", health_port=free_port(), resync_seconds=3600
    )
    ctl = Controller(settings, kube, lease_kube=lease_kube)
    task = asyncio.create_task(ctl.run())
    try:
        await until(ctl.elector.is_leader.is_set)
        assert lease_kube.items(r.LEASES) and not kube.items(r.LEASES)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


# ---- command line (shared.cli) ---------------------------------------------------------------------


def test_flags_beat_the_environment_which_beats_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    from controller.__main__ import parse_settings

    defaults = parse_settings([])
    assert (defaults.leader_election, defaults.kubeconfig, defaults.bind_timeout_seconds) == (
        True,
        None,
        60.0,
    )
    monkeypatch.setenv("PHALANX_CONTROLLER_BIND_TIMEOUT_SECONDS", "90")
    monkeypatch.setenv("PHALANX_CONTROLLER_LEADER_ELECTION", "false")
    from_env = parse_settings([])
    assert (from_env.bind_timeout_seconds, from_env.leader_election) == (90.0, False)
    flags = parse_settings(["--bind-timeout-seconds", "120", "--leader-election", "--kubeconfig", "/k"])
    assert (flags.bind_timeout_seconds, flags.leader_election, flags.kubeconfig) == (120.0, True, "/k")
    assert parse_settings(["--no-leader-election", "--no-log-json"]).leader_election is False
    assert parse_settings(["--schedule-timeout-action=release"]).schedule_timeout_action == "release"


def test_invalid_settings_exit_2_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    from controller.__main__ import main

    with pytest.raises(SystemExit) as exited:
        main(["--bind-timeout-seconds", "abc"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("phalanx-controller: invalid settings:\n")
    assert (
        "--bind-timeout-seconds / PHALANX_CONTROLLER_BIND_TIMEOUT_SECONDS: Input should be a valid number"
        in err
    )
    with pytest.raises(SystemExit) as exited:
        main(["--schedule-timeout-action", "panic"])
    assert exited.value.code == 2
    assert "Input should be 'report' or 'release' (given: 'panic')" in capsys.readouterr().err


def test_help_lists_every_setting_with_its_description(capsys: pytest.CaptureFixture[str]) -> None:
    from controller.__main__ import parse_settings

    out = help_text(parse_settings, ControllerSettings, "PHALANX_CONTROLLER_", capsys)
    assert "--no-leader-election" in out
