"""kubectl phalanx preflight's decisions: a pure function of the server version and the CRDs it read."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.cli import preflight
from controller.cli.preflight import CONFLICT, ERROR, OK, Crd, decide, parse_version

REPO = Path(__file__).resolve().parents[3]
RELEASE = "9.9.9"
FOREIGN = REPO / "tests/e2e/manifests/foreign/podgroups.scheduling.sigs.k8s.io.yaml"
OURS = {
    "podgroups.scheduling.sigs.k8s.io": REPO / "deploy/components/crds/podgroups.scheduling.sigs.k8s.io.yaml",
    "queues.scheduling.phalanx.io": REPO / "deploy/base/queues.scheduling.phalanx.io.yaml",
    "podgroups.scheduling.run.ai": REPO / "deploy/components/kai-compat/podgroups.scheduling.run.ai.yaml",
}


def _load(path: Path) -> dict[str, Any]:
    obj: dict[str, Any] = yaml.safe_load(path.read_text())
    return obj


def _crd(obj: dict[str, Any]) -> Crd:
    return Crd.from_object(obj)


def _levels(verdict: preflight.Verdict, subject: str) -> list[str]:
    return [f.level for f in verdict.findings if f.subject == subject]


def test_a_fresh_cluster_installs_the_default_compat_piece_and_the_core() -> None:
    verdict = decide((1, 35), [], RELEASE)
    assert not verdict.blocked
    assert verdict.apply == (
        "phalanx-9.9.9-compat-scheduling.sigs.k8s.io.yaml",
        "phalanx-9.9.9.yaml",
    )
    assert verdict.helm_values == {
        "compat.schedulingSigsK8s": True,
        "compat.schedulingXK8s": False,
        "compat.schedulingRunAi": False,
        "compat.schedulingVolcanoSh": False,
    }
    assert {f.level for f in verdict.findings} == {OK}


def test_another_projects_podgroup_crd_is_named_and_left_out() -> None:
    verdict = decide((1, 35), [_crd(_load(FOREIGN))], RELEASE)
    conflicts = [f for f in verdict.findings if f.subject == "podgroups.scheduling.sigs.k8s.io"]
    assert [f.level for f in conflicts] == [CONFLICT, CONFLICT]
    assert "another project's CRD (app.kubernetes.io/name=scheduler-plugins)" in conflicts[0].message
    assert "do not apply phalanx-9.9.9-compat-scheduling.sigs.k8s.io.yaml" in conflicts[0].message
    # Its schema keeps phase and counts but prunes what explains a wait.
    assert "status.reason, status.message, status.conditions, status.admittedTime" in conflicts[1].message
    assert verdict.apply == ("phalanx-9.9.9.yaml",)
    assert verdict.helm_values["compat.schedulingSigsK8s"] is False
    assert not verdict.blocked  # Phalanx works with the PodGroups that CRD serves


def test_phalanx_own_crds_are_recognised_and_upgraded() -> None:
    crds = [_crd(_load(path)) for path in OURS.values()]
    verdict = decide((1, 30), crds, RELEASE)
    assert not verdict.blocked
    assert verdict.apply == (
        "phalanx-9.9.9-compat-scheduling.sigs.k8s.io.yaml",
        "phalanx-9.9.9-compat-scheduling.run.ai.yaml",
        "phalanx-9.9.9.yaml",
    )
    assert {f.level for f in verdict.findings} == {OK}


def test_a_kubernetes_below_the_floor_blocks() -> None:
    verdict = decide((1, 29), [], RELEASE)
    assert verdict.blocked
    (finding,) = [f for f in verdict.findings if f.subject == "kubernetes"]
    assert finding.level == ERROR
    assert "1.29 is below 1.30" in finding.message and "gate" in finding.message
    assert "Do not install" in preflight.text(verdict)
    assert decide(None, [], RELEASE).blocked  # an unreadable version blocks too


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        ({"gitVersion": "v1.35.4", "major": "1", "minor": "35"}, (1, 35)),
        ({"gitVersion": "v1.30.0-gke.100"}, (1, 30)),
        ({"major": "1", "minor": "29+"}, (1, 29)),
        ({}, None),
    ],
)
def test_the_server_version_is_read_as_kubectl_shows_it(info: dict[str, str], expected: object) -> None:
    assert parse_version(info) == expected


def test_phalanx_queue_crd_held_by_someone_else_blocks() -> None:
    queue = _load(OURS["queues.scheduling.phalanx.io"])
    queue["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "someone"}
    verdict = decide((1, 35), [_crd(queue)], RELEASE)
    assert verdict.blocked
    assert _levels(verdict, "queues.scheduling.phalanx.io") == [ERROR]


def test_a_foreign_podgroup_crd_phalanx_cannot_write_to_blocks() -> None:
    foreign = _load(FOREIGN)
    version = foreign["spec"]["versions"][0]
    version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["phase"]["enum"] = [
        "Pending",
        "Running",
    ]
    verdict = decide((1, 35), [_crd(foreign)], RELEASE)
    assert verdict.blocked
    (error,) = [f for f in verdict.findings if f.level == ERROR]
    assert "lacks Scheduling, Scheduled, Finished, Failed" in error.message

    other_version = copy.deepcopy(_load(FOREIGN))
    other_version["spec"]["versions"][0]["name"] = "v1beta1"
    assert decide((1, 35), [_crd(other_version)], RELEASE).blocked


def test_kai_own_crds_are_a_conflict_not_a_block() -> None:
    kai = _load(OURS["podgroups.scheduling.run.ai"])
    kai["metadata"]["labels"] = {}
    kai["metadata"]["annotations"] = {
        "meta.helm.sh/release-name": "kai-scheduler",
        "meta.helm.sh/release-namespace": "kai-system",
    }
    # KAI's own CRD serves v2alpha2 alone, the version Phalanx reads: one conflict, nothing it lacks.
    kai["spec"]["versions"] = [v for v in kai["spec"]["versions"] if v["name"] == "v2alpha2"]
    verdict = decide((1, 35), [_crd(kai)], RELEASE)
    assert not verdict.blocked
    levels = _levels(verdict, "podgroups.scheduling.run.ai")
    assert levels == [CONFLICT]
    text = preflight.text(verdict)
    assert "Helm release kai-system/kai-scheduler" in text
    assert "phalanx-9.9.9-compat-scheduling.run.ai.yaml" not in verdict.apply


def test_a_kai_crd_without_the_version_phalanx_reads_says_so() -> None:
    kai = _load(OURS["podgroups.scheduling.run.ai"])
    kai["metadata"]["labels"] = {}
    kai["spec"]["versions"] = [v for v in kai["spec"]["versions"] if v["name"] == "v2"]
    verdict = decide((1, 35), [_crd(kai)], RELEASE)
    assert not verdict.blocked  # an optional group: Phalanx just does not read those objects
    assert _levels(verdict, "podgroups.scheduling.run.ai") == [CONFLICT, CONFLICT]
    assert "not v2alpha2" in preflight.text(verdict)


def test_json_output_has_one_shape() -> None:
    data = decide((1, 35), [_crd(_load(FOREIGN))], RELEASE).data()
    assert set(data) == {"blocked", "findings", "apply", "helmValues"}
    assert all(set(f) == {"level", "subject", "message"} for f in data["findings"])
