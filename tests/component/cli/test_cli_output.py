"""kubectl phalanx's output byte for byte, and its exit codes: what a person or a script reads.

The long outputs are kept in ``expected/``; a change there is a change people will see.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from controller.api import resources as r
from controller.api.kube import ApiError
from controller.api.resources import JOBS, ResourceType
from controller.cli import __main__ as cli
from controller.cli import audit, report
from controller.cli.__main__ import EXIT_API, EXIT_FINDINGS, EXIT_NOT_FOUND, EXIT_OK, EXIT_USAGE, main
from controller.cli.cluster import STATEFULSETS
from controller.cli.connection import Access, Chosen, list_or_narrow
from controller.core import DEFAULT_LEVELS
from shared import constants as c
from tests.component.cli.scenario import (
    dra_gang_short,
    dra_workloads_to_audit,
    eight_on_five_free,
    plain_job,
    with_a_queue,
)
from tests.component.controller.fake_kube import FakeKube
from tests.component.controller.harness import NS, T0, namespace, pod

EXPECTED = Path(__file__).parent / "expected"


def expected(name: str) -> str:
    return (EXPECTED / f"{name}.txt").read_text()


# ---- clusters -------------------------------------------------------------------------------------


def with_an_unsized_gang() -> FakeKube:
    kube = eight_on_five_free()
    linked = pod("own-0", "own", min_member=None)
    linked["metadata"]["labels"][c.COSCHEDULING_LABEL] = "own"  # the user's PodGroup, not made yet
    kube.seed(r.PODS, linked)
    return kube


def with_workloads_to_audit() -> FakeKube:
    """A namespace not opted in, with one workload for each thing the audit says."""
    kube = eight_on_five_free()
    kube.seed(r.NAMESPACES, namespace("plain", opted_in=False))
    oversized = plain_job("oversized").parallelism(2).annotation(c.MIN_MEMBER_ANNOTATION, "4").build()
    refused = plain_job("bad").parallelism(2).annotation(c.MIN_MEMBER_ANNOTATION, "abc").build()
    skipped = plain_job("skipped").parallelism(2).annotation(c.SKIP, "true").build()
    foreign = plain_job("foreign").parallelism(1).scheduler("my-scheduler").build()
    linked = plain_job("linked").parallelism(2).template_label(c.COSCHEDULING_LABEL, "theirs").build()
    urgent = plain_job("urgent").parallelism(8).pod_spec(priorityClassName="high").build()
    kube.seed(
        JOBS,
        plain_job("fits").parallelism(2).build(),
        plain_job("huge").parallelism(12).build(),
        plain_job("slow").parallelism(8).active_deadline(600).build(),
        plain_job("cpu").parallelism(2).gpus(0).build(),
        oversized,
        refused,
        skipped,
        foreign,
        linked,
        urgent,
    )
    kube.seed(
        r.PRIORITY_CLASSES,
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        },
    )
    kube.seed(
        STATEFULSETS,
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "plain", "uid": "db-uid"},
            "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "m", "image": "x"}]}}},
        },
    )
    return kube


# ---- the whole command ----------------------------------------------------------------------------


def run_plugin(
    make_cluster: Callable[[], FakeKube],
    argv: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str, str, bool]:
    """``kubectl phalanx ARGV`` against the fake at ``T0``: exit code, stdout, stderr, and whether
    the connection was closed."""
    kube = make_cluster()
    closed = []

    async def close() -> None:
        closed.append(True)

    async def connect(chosen: Chosen, args: object, namespace: str | None) -> Any:
        """The fake, narrowing its lists on 403 exactly as the plugin's client does."""
        access = Access()
        list_ = kube.list

        async def narrowing(
            rt: ResourceType, ns: str | None = None, label_selector: str | None = None
        ) -> tuple[list[dict[str, Any]], str]:
            return await list_or_narrow(list_, access, namespace, rt, ns, label_selector)

        monkeypatch.setattr(kube, "close", close, raising=False)
        monkeypatch.setattr(kube, "list", narrowing)
        monkeypatch.setattr(kube, "access", access, raising=False)
        return kube

    monkeypatch.setattr(cli, "choose", lambda args: Chosen(KUBECONFIG, 'context "test"'))
    monkeypatch.setattr(cli, "connect", connect)
    monkeypatch.setattr(time, "time", lambda: T0)
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err, bool(closed)


# A context without a namespace: commands default to "default", as kubectl does.
KUBECONFIG = {
    "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
    "contexts": [{"name": "test", "context": {"cluster": "c"}}],
    "current-context": "test",
}


@pytest.mark.parametrize(
    ("make_cluster", "argv", "code", "stdout"),
    [
        (eight_on_five_free, ["explain", "job/big", "-n", NS], EXIT_OK, "explain-waiting"),
        (
            eight_on_five_free,
            ["-o", "json", "explain", "pod/small-0", "-n", NS],
            EXIT_OK,
            "explain-running-json",
        ),
        (with_an_unsized_gang, ["explain", "pod/own-0", "-n", NS], EXIT_OK, "explain-unsized"),
        (with_a_queue, ["top", "-A"], EXIT_OK, "top-with-queue"),
        (eight_on_five_free, ["top", "-n", NS, "-o", "yaml"], EXIT_OK, "top-yaml"),
        (with_workloads_to_audit, ["audit", "-n", "plain"], EXIT_FINDINGS, "audit"),
        # GPUs that are only DRA devices: counted in the members' GPU column, in top, in the audit.
        (dra_gang_short, ["explain", "job/big", "-n", NS], EXIT_OK, "explain-dra-waiting"),
        (dra_gang_short, ["top", "-n", NS], EXIT_OK, "top-dra"),
        (dra_workloads_to_audit, ["audit", "-n", "plain"], EXIT_FINDINGS, "audit-dra"),
    ],
    ids=lambda value: value if isinstance(value, str) else None,
)
def test_output(
    make_cluster: Callable[[], FakeKube],
    argv: list[str],
    code: int,
    stdout: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_plugin(make_cluster, argv, monkeypatch, capsys) == (code, expected(stdout), "", True)


SETTINGS_LINE = (
    "Planner settings from defaults (no Deployment phalanx-system/phalanx-controller): preemption true "
    "(default), preemption-min-runtime-seconds 0.0 (default), starvation-age-seconds unset (default), "
    "default-schedule-timeout-seconds unset (default), topology-levels "
    + ",".join(DEFAULT_LEVELS)
    + " (default), topologies unset (default)\n"
)


@pytest.mark.parametrize(
    ("argv", "code", "stdout", "stderr"),
    [
        (["top", "-n", "elsewhere"], EXIT_OK, "No gangs.\n\n" + SETTINGS_LINE, ""),
        (["audit", "-n", "elsewhere"], EXIT_OK, "No workloads to audit.\n\n" + SETTINGS_LINE, ""),
        # kubectl's words and exit code for an object that is not there
        (
            ["explain", "job/nothing", "-n", NS],
            EXIT_NOT_FOUND,
            "",
            'Error from server (NotFound): jobs.batch "nothing" not found\n',
        ),
        (["explain", "pod/x"], EXIT_NOT_FOUND, "", 'Error from server (NotFound): pods "x" not found\n'),
        (
            ["explain", "pg/x", "-n", NS],
            EXIT_NOT_FOUND,
            "",
            'Error from server (NotFound): podgroups.scheduling.sigs.k8s.io "x" not found\n',
        ),
        # a kind the plugin does not read: it cannot say the object is absent, only that no gang is
        (
            ["explain", "deployment/x"],
            EXIT_NOT_FOUND,
            "",
            "error: deployment/x in namespace default: no gang found\n",
        ),
        (["explain", "job"], EXIT_USAGE, "", "error: expected <kind>/<name> (e.g. job/train), got 'job'\n"),
    ],
)
def test_short_answers(
    argv: list[str],
    code: int,
    stdout: str,
    stderr: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_plugin(eight_on_five_free, argv, monkeypatch, capsys) == (code, stdout, stderr, True)


def test_a_gang_of_an_unmanaged_namespace_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def plain_pod() -> FakeKube:
        kube = eight_on_five_free()
        kube.seed(r.NAMESPACES, namespace("plain", opted_in=False))
        kube.seed(r.PODS, pod("lone-0", "lone", ns="plain", gates=()))
        return kube

    code, out, err, _ = run_plugin(plain_pod, ["explain", "pod/lone-0", "-n", "plain"], monkeypatch, capsys)
    assert (code, out) == (EXIT_NOT_FOUND, "")
    assert err == (
        "error: pod/lone-0: its gang plain/lone is not managed by Phalanx "
        "(namespace not opted in and no gated member)\n"
    )


def test_a_bad_controller_flag_is_refused_before_connecting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["top", "--controller", "nope"]
    assert run_plugin(eight_on_five_free, argv, monkeypatch, capsys) == (
        EXIT_USAGE,
        "",
        "--controller must be namespace/name\n",
        False,
    )


def test_an_api_error_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def refuse(*args: object, **kwargs: object) -> bool:
        raise ApiError(403, "Forbidden", "nodes is forbidden")

    def forbidding() -> FakeKube:
        kube = eight_on_five_free()
        monkeypatch.setattr(kube, "served", refuse)
        return kube

    code, out, err, closed = run_plugin(forbidding, ["top"], monkeypatch, capsys)
    assert (code, out, closed) == (EXIT_API, "", True)
    assert err == "error: the API server answered 403 Forbidden: nodes is forbidden\n"


# ---- explain's text, branch by branch ------------------------------------------------------------


def explain_data(**changes: Any) -> dict[str, Any]:
    """What ``report.explain_data`` returns, for a gang with every optional part filled in."""
    members = [
        {"name": f"m-{i:02d}", "state": "Gated" if i % 3 else "Running", "node": None, c.GPU_RESOURCE: 2}
        for i in range(18)
    ]
    data: dict[str, Any] = {
        "gang": "team/big",
        "source": report.PLANNER,
        "podGroup": {
            "kind": "podgroups.scheduling.x-k8s.io",
            "minMember": 16,
            "maxMember": 18,
            "phase": "Pending",
            "message": "waiting for room",
        },
        "priority": 100,
        "localPriority": 10,
        "queue": "research",
        "placement": "packed",
        "waiting": 3 * 3600 + 300,
        "members": members,
        "order": {"position": 9, "of": 12, "ahead": [f"team/g{i}" for i in range(8)]},
        "decision": {"action": "Wait", "reason": "InsufficientCapacity", "message": "needs 32 GPUs"},
        "partial": {"needed": 16, "placed": 0, "nodes": {}},
        "fixes": [],
        "notes": ["planner settings from defaults"],
    }
    data.update(changes)
    return data


def test_explain_text_with_every_part_and_no_fix_found() -> None:
    assert report.explain_text(explain_data()) == expected("explain-every-part")


def test_explain_text_when_room_is_not_what_the_gang_waits_for() -> None:
    data = explain_data(
        podGroup={"kind": "podgroups.x", "minMember": 2, "maxMember": None, "phase": None, "message": None},
        localPriority=None,
        queue=None,
        waiting=None,
        members=[],
        order={"position": 1, "of": 1, "ahead": []},
        decision={"action": "Wait", "reason": "WaitingForMembers", "message": "1 of 2 members exist"},
        partial=None,
    )
    assert report.explain_text(data).splitlines() == [
        "Gang:       team/big (PodGroup podgroups.x, minMember 2)",
        "Priority:   100; placement packed",
        "Order:      1 of 1",
        "Members:    0",
        "  NAME   STATE   NODE",
        "Decision:   Wait WaitingForMembers: 1 of 2 members exist",
        "Room is not what it waits for (see the decision).",
        "Note:       planner settings from defaults",
    ]


def test_explain_text_of_a_room_wait_with_nothing_ahead() -> None:
    data = explain_data(order={"position": 1, "of": 1, "ahead": []}, members=[], notes=[])
    assert report.explain_text(data).splitlines()[-1] == (
        "No single change searched (GPUs freed on one node or in one domain it is held to, up to 64 "
        "new nodes like one it may use, a new domain like one of its own, running gangs ended) starts it."
    )


def test_explain_text_of_a_fix_freeing_many_holders() -> None:
    holders = [{"pod": f"p{i}", "amount": 1, "gang": f"team/g{i}" if i < 7 else None} for i in range(9)]
    holders.append({"pod": "p-extra", "amount": 1, "gang": "team/g0"})
    fix = {"change": "FreeOnNode", "node": "n1", "resource": c.GPU_RESOURCE, "amount": 10, "heldBy": holders}
    lines = report.explain_text(explain_data(fixes=[fix], notes=[])).splitlines()
    assert lines[-1] == (
        "  - free 10 nvidia.com/gpu on node n1 (held now by gang team/g0 (2 pods, 2), gang team/g1 (1), "
        "gang team/g2 (1), gang team/g3 (1), gang team/g4 (1), gang team/g5 (1), … (+3 more))"
    )
    assert lines[-2] == "It would start if you (each checked by re-planning):"


def test_audit_text_counts_one_warning_in_the_singular() -> None:
    finding = audit.Finding(audit.WARNING, "ns", "Job/x", "Deadline", "m")
    assert audit.text([finding]).splitlines()[-1] == "0 would never start, 1 warning"


def test_explain_text_shows_what_the_gang_requires_of_placement_and_preemption() -> None:
    podgroup = {
        "kind": "podgroups.x",
        "minMember": 2,
        "maxMember": None,
        "phase": None,
        "message": None,
        "topologyRequired": "topology.kubernetes.io/rack",
        "disruptionMode": "Single",
    }
    lines = report.explain_text(explain_data(podGroup=podgroup)).splitlines()
    assert lines[1:3] == [
        "Topology:   every member inside one topology.kubernetes.io/rack domain (required)",
        "Disruption: Single (preemption may take single pods of it)",
    ]


def test_explain_text_of_the_fixes_for_a_gang_held_to_one_rack() -> None:
    rack = "topology.kubernetes.io/rack"
    holders = [{"pod": "other/x", "amount": 3, "gang": None}]
    free = {"change": "FreeInDomain", "level": rack, "domain": "r1", "resource": c.GPU_RESOURCE}
    add = {"change": "AddDomain", "level": rack, "like": "r1", "nodes": 2, "resource": c.GPU_RESOURCE}
    fixes = [{**free, "amount": 3, "heldBy": holders}, {**add, "free": "8"}]
    lines = report.explain_text(explain_data(fixes=fixes, notes=[])).splitlines()
    assert lines[-2:] == [
        f"  - free 3 nvidia.com/gpu in {rack}=r1 (held now by pod other/x (3))",
        f"  - add a {rack} domain like r1 with 8 free nvidia.com/gpu (2 nodes like its own)",
    ]
