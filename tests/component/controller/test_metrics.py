"""The controller's metrics as the wired shell fills them: leader, queue labels on wait metrics,
the oldest waiting gang, cpu in cores, and the process metrics both processes export."""

from __future__ import annotations

from prometheus_client import generate_latest

from controller.api import resources as r
from controller.runtime.app import Controller
from controller.runtime.config import ControllerSettings
from shared import constants as c
from shared.health import version
from tests.component.controller.fake_kube import FakeKube
from tests.component.controller.harness import Harness, gang, gates_of, podgroup
from tests.component.controller.test_queues import label_namespace, phalanx_queue
from webhook.metrics import WebhookMetrics


def sample(h: Harness, name: str, **labels: str) -> float | None:
    return h.metrics.registry.get_sample_value(name, labels)


def test_the_leader_gauge_follows_the_elector() -> None:
    ctl = Controller(ControllerSettings(), FakeKube())
    value = lambda: ctl.metrics.registry.get_sample_value("phalanx_controller_leader")  # noqa: E731
    assert value() == 0.0  # a standby until it takes the lease
    ctl.elector.is_leader.set()
    assert value() == 1.0
    ctl.elector.is_leader.clear()  # lost or released
    assert value() == 0.0


def test_both_processes_export_process_metrics_and_build_info() -> None:
    controller = Controller(ControllerSettings(), FakeKube())
    for registry in (controller.metrics.registry, WebhookMetrics().registry):
        text = generate_latest(registry).decode()
        for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "python_info"):
            assert f"\n{name}" in text or text.startswith(f"# HELP {name}"), name
        build = [line for line in text.splitlines() if line.startswith("phalanx_build_info{")]
        assert len(build) == 1 and build[0].endswith(" 1.0")
        assert f'version="{version()}"' in build[0] and 'python="3.' in build[0]


async def test_a_waiting_gang_is_counted_by_queue_and_its_age_reported_until_admitted() -> None:
    h = Harness()
    h.cluster(nodes=2, gpus=4)
    h.kube.seed(r.QUEUES, phalanx_queue("team-a", quota=2, limit=4))
    label_namespace(h, "team-a")
    h.kube.seed(r.PODGROUPS, podgroup("g", min_member=5))
    h.kube.seed(r.PODS, *gang(5, "g"))

    await h.step()
    assert sample(h, "phalanx_gang_pending", reason="QueueLimit", queue="team-a") == 1
    assert sample(h, "phalanx_gang_oldest_pending_seconds", queue="team-a") == 0
    h.clock.advance(600)
    await h.step()
    assert sample(h, "phalanx_gang_oldest_pending_seconds", queue="team-a") == 600

    # The limit is raised: admitted, its wait observed under its queue, and no waiting gang is left.
    raise_limit = lambda q: q["spec"]["resources"][c.GPU_RESOURCE].update(limit="8")  # noqa: E731
    h.kube.mutate(r.QUEUES, None, "team-a", raise_limit)
    await h.step()
    assert gates_of(h.pod("g-0")) == []
    assert sample(h, "phalanx_gang_wait_seconds_count", queue="team-a") == 1
    assert sample(h, "phalanx_gang_wait_seconds_sum", queue="team-a") == 600
    assert sample(h, "phalanx_gang_oldest_pending_seconds", queue="team-a") is None
    assert sample(h, "phalanx_gang_pending", reason="QueueLimit", queue="team-a") is None


async def test_a_queue_name_no_queue_carries_is_not_a_label_value() -> None:
    """Label values stay as many as the Queues: a typo in a manifest makes no series of its own."""
    h = Harness()
    h.cluster(nodes=2, gpus=4)
    h.kube.seed(r.QUEUES, phalanx_queue("team-a", quota=2))
    label_namespace(h, "no-such-queue")
    h.kube.seed(r.PODGROUPS, podgroup("g", min_member=5))
    h.kube.seed(r.PODS, *gang(5, "g"))

    await h.step()
    assert sample(h, "phalanx_gang_pending", reason="QueueNotFound", queue="") == 1
    text = generate_latest(h.metrics.registry).decode()
    assert "no-such-queue" not in text


async def test_queue_cpu_is_reported_in_cores() -> None:
    h = Harness()
    h.cluster(nodes=2, gpus=4)
    queue = phalanx_queue("team-a", quota=8)
    queue["spec"]["resources"]["cpu"] = {"quota": "1500m"}
    h.kube.seed(r.QUEUES, queue)
    label_namespace(h, "team-a")
    h.kube.seed(r.PODGROUPS, podgroup("g", min_member=2))
    members = gang(2, "g")
    for member in members:
        member["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "250m", "memory": "1Gi"}
    h.kube.seed(r.PODS, *members)

    await h.step()
    assert sample(h, "phalanx_queue_quota", queue="team-a", resource="cpu") == 1.5
    assert sample(h, "phalanx_queue_allocated", queue="team-a", resource="cpu") == 0.5
    assert sample(h, "phalanx_queue_allocated", queue="team-a", resource="memory") == 2 * 2**30
    assert sample(h, "phalanx_queue_allocated", queue="team-a", resource=c.GPU_RESOURCE) == 2
