"""kubectl phalanx as scripts and tenants meet it: one JSON shape per command whatever the answer,
errors on stderr only, `top -w`, and a tenant who may read only their namespace and the nodes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from controller.api import resources as r
from controller.api.kube import ApiError
from controller.api.resources import ResourceType
from controller.cli import __main__ as cli
from controller.cli.__main__ import EXIT_API, EXIT_FINDINGS, EXIT_NOT_FOUND, EXIT_OK
from shared.jsonread import JsonObject
from tests.component.cli.scenario import eight_on_five_free
from tests.component.cli.test_cli_output import run_plugin, with_an_unsized_gang, with_workloads_to_audit
from tests.component.controller.fake_kube import FakeKube
from tests.component.controller.harness import NS, podgroup

# ---- the documented shapes (docs/user-guide.md, "Output for scripts") ---------------------------------

ENVELOPE = {"settings", "access", "warnings"}
SHAPES = {
    "explain": {"gangs", "unplanned"} | ENVELOPE,
    "top": {"gangs", "queues"} | ENVELOPE,
    "audit": {"findings"} | ENVELOPE,
}
EXPLAINED_GANG = {
    "gang",
    "source",
    "podGroup",
    "priority",
    "localPriority",
    "queue",
    "placement",
    "waiting",
    "members",
    "order",
    "decision",
    "partial",
    "fixes",
    "notes",
    "autoscaler",
}
TOP_GANG = {
    "order",
    "namespace",
    "name",
    "queue",
    "priority",
    "size",
    "members",
    "state",
    "reason",
    "waitingSeconds",
    "gpusHeld",
    "message",
}
TOP_QUEUE = {
    "name",
    "parent",
    "gpuQuota",
    "gpuLimit",
    "gpuAllocated",
    "gpuRequested",
    "gpuFairShare",
    "admittedGangs",
    "waitingGangs",
}
FINDING = {"severity", "namespace", "workload", "check", "message"}
PLANNER_SETTINGS = {
    "preemption",
    "preemption-min-runtime-seconds",
    "starvation-age-seconds",
    "default-schedule-timeout-seconds",
    "topology-levels",
    "topologies",
}


def check_shape(command: str, data: Any) -> None:
    """Every key a script may rely on, at every level, and nothing else at the top."""
    assert isinstance(data, dict) and set(data) == SHAPES[command], data
    assert set(data["settings"]) == {"source", "values"}
    assert set(data["settings"]["values"]) == PLANNER_SETTINGS
    assert all(set(entry) == {"value", "from"} for entry in data["settings"]["values"].values())
    assert set(data["access"]) == {"complete", "narrowedToNamespace", "forbidden"}
    assert all(isinstance(warning, str) for warning in data["warnings"])
    if command == "explain":
        assert all(set(gang) == EXPLAINED_GANG for gang in data["gangs"])
        assert all(set(entry) == {"gang", "waitingFor"} for entry in data["unplanned"])
    elif command == "top":
        assert all(set(gang) == TOP_GANG for gang in data["gangs"])
        assert all(set(queue) == TOP_QUEUE for queue in data["queues"])
    else:
        assert all(set(finding) == FINDING for finding in data["findings"])


def tenant_of(make_cluster: Callable[[], FakeKube]) -> Callable[[], FakeKube]:
    """``make_cluster`` as a tenant of namespace NS sees it with the shipped plugin ClusterRole
    (nodes, PriorityClasses, queues) and their namespace's `view`: every other list is refused
    cluster-wide (403) and allowed in NS only; namespaces and the controller Deployment not at all."""
    cluster_wide_ok = {r.NODES, r.PRIORITY_CLASSES, *r.QUEUE_TYPES}

    def make() -> FakeKube:
        kube = make_cluster()
        list_, get = kube.list, kube.get

        async def list_as_tenant(
            rt: ResourceType, namespace: str | None = None, label_selector: str | None = None
        ) -> tuple[list[JsonObject], str]:
            if rt not in cluster_wide_ok and namespace != NS:
                raise ApiError(403, "Forbidden", f"{rt.plural} is forbidden")
            return await list_(rt, namespace, label_selector)

        async def get_as_tenant(rt: ResourceType, namespace: str | None, name: str) -> JsonObject:
            if namespace != NS:
                raise ApiError(403, "Forbidden", f"{rt.plural} {name} is forbidden")
            return await get(rt, namespace, name)

        kube.list = list_as_tenant  # type: ignore[method-assign]
        kube.get = get_as_tenant  # type: ignore[method-assign]
        return kube

    return make


def with_a_status_written() -> FakeKube:
    """The waiting gang's PodGroup, with what the controller wrote on it."""
    kube = eight_on_five_free()
    big = podgroup("big", min_member=8)
    big["status"] = {
        "phase": "Pending",
        "reason": "InsufficientCapacity",
        "message": "needs 8 pods × 1 nvidia.com/gpu; best placement fits 5: gpu-0 5",
    }
    kube.seed(r.PODGROUPS, big)
    return kube


CASES = [
    ("explain", eight_on_five_free, ["explain", "job/big", "-n", NS], EXIT_OK),
    ("explain", eight_on_five_free, ["explain", "pod/small-0", "-n", NS], EXIT_OK),
    ("explain", with_an_unsized_gang, ["explain", "pod/own-0", "-n", NS], EXIT_OK),
    ("explain", tenant_of(with_a_status_written), ["explain", "job/big", "-n", NS], EXIT_OK),
    ("top", eight_on_five_free, ["top", "-A"], EXIT_OK),
    ("top", eight_on_five_free, ["top", "-n", "elsewhere"], EXIT_OK),
    ("top", tenant_of(with_a_status_written), ["top", "-n", NS], EXIT_OK),
    ("audit", with_workloads_to_audit, ["audit", "-n", "plain"], EXIT_FINDINGS),
    ("audit", eight_on_five_free, ["audit", "-n", "elsewhere"], EXIT_OK),
]


@pytest.mark.parametrize("output", ["json", "yaml"])
@pytest.mark.parametrize(("command", "make_cluster", "argv", "code"), CASES)
def test_every_answer_has_its_command_s_one_shape(
    command: str,
    make_cluster: Callable[[], FakeKube],
    argv: list[str],
    code: int,
    output: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    got, out, _, _ = run_plugin(make_cluster, [*argv, "-o", output], monkeypatch, capsys)
    assert got == code
    check_shape(command, json.loads(out) if output == "json" else yaml.safe_load(out))


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["explain", "job/nothing", "-n", NS], EXIT_NOT_FOUND),
        (["explain", "job", "-n", NS], 2),
        (["audit", "-A"], EXIT_API),  # as a tenant: refused, said on stderr
        (["top", "-A"], EXIT_API),
    ],
)
def test_errors_under_json_go_to_stderr_and_nothing_to_stdout(
    argv: list[str], code: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    got, out, err, _ = run_plugin(tenant_of(eight_on_five_free), [*argv, "-o", "json"], monkeypatch, capsys)
    assert (got, out) == (code, "")
    assert err.startswith(("error: ", "Error from server (NotFound): ")) and "Traceback" not in err


def test_an_unplanned_gang_is_data_not_text_under_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _, _ = run_plugin(
        with_an_unsized_gang, ["explain", "pod/own-0", "-n", NS, "-o", "json"], monkeypatch, capsys
    )
    data = json.loads(out)
    assert data["gangs"] == []
    [unplanned] = data["unplanned"]
    assert unplanned["gang"] == f"{NS}/own" and "PodGroup" in unplanned["waitingFor"]


# ---- a tenant: their namespace's view and the plugin ClusterRole --------------------------------------


def test_a_tenant_gets_the_controller_s_explanation_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err, closed = run_plugin(
        tenant_of(with_a_status_written), ["explain", "job/big", "-n", NS], monkeypatch, capsys
    )
    assert (code, closed) == (EXIT_OK, True)
    assert out.splitlines()[:3] == [
        f"Gang:       {NS}/big (PodGroup podgroups.scheduling.sigs.k8s.io, minMember 8)",
        "Controller: Pending InsufficientCapacity: needs 8 pods × 1 nvidia.com/gpu; best placement fits 5: "
        "gpu-0 5",
        "Members:    8 (8 Gated)",
    ]
    assert err.startswith(
        "Warning: you may not read pods.core, namespaces.core, podgroups.scheduling.sigs.k8s.io "
        "cluster-wide, which planning needs: showing what the controller wrote on the PodGroups of "
        f"namespace {NS}"
    )

    _, out, _, _ = run_plugin(
        tenant_of(with_a_status_written), ["explain", "job/big", "-n", NS, "-o", "json"], monkeypatch, capsys
    )
    data = json.loads(out)
    [gang] = data["gangs"]
    assert (gang["source"], gang["decision"]["reason"], gang["order"], gang["fixes"]) == (
        "podGroupStatus",
        "InsufficientCapacity",
        None,
        [],
    )
    assert data["access"]["complete"] is False
    assert "pods.core" in data["access"]["narrowedToNamespace"]
    assert "namespaces.core" in data["access"]["forbidden"]
    assert data["settings"]["source"] == (
        "defaults (Deployment phalanx-system/phalanx-controller is not readable to you)"
    )


def test_a_tenant_s_top_lists_their_gangs_as_the_controller_wrote_them(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _, _ = run_plugin(
        tenant_of(with_a_status_written), ["top", "-n", NS, "-o", "json"], monkeypatch, capsys
    )
    rows = {row["name"]: row for row in json.loads(out)["gangs"]}
    assert (rows["big"]["state"], rows["big"]["reason"], rows["big"]["order"]) == (
        "Pending",
        "InsufficientCapacity",
        None,
    )
    assert (rows["small"]["gpusHeld"], rows["small"]["members"]) == (3, 3)


def test_everyone_else_plans_with_nothing_narrowed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, err, _ = run_plugin(
        with_a_status_written, ["explain", "job/big", "-n", NS, "-o", "json"], monkeypatch, capsys
    )
    data = json.loads(out)
    assert data["gangs"][0]["source"] == "planner" and data["access"]["complete"] is True
    assert (data["warnings"], err) == ([], "")


# ---- top -w ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("output", "separator"), [("table", "\n\n"), ("json", "\n\n"), ("yaml", "\n---\n")])
def test_top_watch_renders_again_every_interval(
    output: str, separator: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    slept: list[float] = []
    renders: list[float] = []
    monkeypatch.setattr(cli, "WATCH_LIMIT", 3)
    monkeypatch.setattr(time, "sleep", slept.append)
    real_load = cli.load

    async def load_at(kube: Any, now: float, **kwargs: Any) -> Any:
        renders.append(now)
        return await real_load(kube, now, **kwargs)

    monkeypatch.setattr(cli, "load", load_at)
    code, out, err, _ = run_plugin(
        eight_on_five_free, ["top", "-n", NS, "-w", "--interval", "7", "-o", output], monkeypatch, capsys
    )
    assert (code, err) == (EXIT_OK, "")
    assert slept == [7.0, 7.0] and len(renders) == 3  # three reads of the cluster, two waits between
    documents = out.rstrip("\n").split(separator) if output != "table" else out.split("\n\n#")
    assert len(documents) == 3
    if output == "json":
        assert [set(json.loads(document)) for document in documents] == [SHAPES["top"]] * 3
    if output == "yaml":
        assert [set(document) for document in yaml.safe_load_all(out)] == [SHAPES["top"]] * 3


def test_top_watch_ends_on_ctrl_c_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupt(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", interrupt)
    code, out, err, _ = run_plugin(eight_on_five_free, ["top", "-n", NS, "-w"], monkeypatch, capsys)
    assert (code, err) == (130, "")
    assert out.startswith("#   NAMESPACE")


def test_top_watch_stops_at_the_first_failure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "WATCH_LIMIT", 5)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    code, _, err, _ = run_plugin(tenant_of(eight_on_five_free), ["top", "-A", "-w"], monkeypatch, capsys)
    assert code == EXIT_API and err.count("error: ") == 1
