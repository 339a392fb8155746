"""The three PodGroup CRDs: generated from one source, and in step with each other."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from shared import constants

from .manifests import DEPLOY, load

PRIMARY = DEPLOY / "components/crds/podgroups.scheduling.sigs.k8s.io.yaml"
X_K8S = DEPLOY / "components/crds-x-k8s/podgroups.scheduling.x-k8s.io.yaml"
KAI = DEPLOY / "components/kai-compat/podgroups.scheduling.run.ai.yaml"


def _crdgen() -> ModuleType:
    spec = importlib.util.spec_from_file_location("phalanx_crdgen", DEPLOY / "crdgen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def _crd(path: Path) -> dict[str, Any]:
    (doc,) = load(path)
    return doc


def _version(path: Path) -> dict[str, Any]:
    """The storage version (the only one, but for KAI's)."""
    (version,) = [v for v in _crd(path)["spec"]["versions"] if v["storage"]]
    return dict(version)


def _schema(path: Path) -> dict[str, Any]:
    return dict(_version(path)["schema"]["openAPIV3Schema"])


def test_committed_yaml_is_what_crdgen_generates() -> None:
    crdgen = _crdgen()
    for variant in crdgen.VARIANTS:
        committed = (DEPLOY / variant.path).read_text()
        assert committed == crdgen.render(variant), f"deploy/{variant.path} is stale: run deploy/crdgen.py"
    assert crdgen.main(["--check"]) == 0


def test_primary_crd_matches_the_public_contract() -> None:
    crd = _crd(PRIMARY)
    assert crd["metadata"]["name"] == f"{constants.PODGROUP_PLURAL}.{constants.PODGROUP_GROUP}"
    assert crd["spec"]["group"] == constants.PODGROUP_GROUP
    assert crd["spec"]["names"]["kind"] == constants.PODGROUP_KIND
    assert crd["spec"]["names"]["shortNames"] == ["pg"]
    assert crd["spec"]["scope"] == "Namespaced"
    assert _version(PRIMARY)["name"] == constants.PODGROUP_VERSION


@pytest.mark.parametrize(
    ("path", "group", "version"),
    [
        (PRIMARY, "scheduling.sigs.k8s.io", "v1alpha1"),
        (X_K8S, "scheduling.x-k8s.io", "v1alpha1"),
        (KAI, "scheduling.run.ai", "v2alpha2"),
    ],
)
def test_each_crd_is_a_served_namespaced_podgroup_with_status(path: Path, group: str, version: str) -> None:
    crd = _crd(path)
    assert crd["metadata"]["name"] == f"podgroups.{group}"
    assert crd["spec"]["scope"] == "Namespaced"
    v = _version(path)
    assert (v["name"], v["served"], v["storage"]) == (version, True, True)
    assert v["subresources"] == {"status": {}}


@pytest.mark.parametrize("path", [PRIMARY, X_K8S, KAI])
def test_crds_in_protected_groups_carry_the_api_approval_annotation(path: Path) -> None:
    """The API server refuses a CRD in *.k8s.io or *.kubernetes.io without api-approved.kubernetes.io."""
    crd = _crd(path)
    group = crd["spec"]["group"]
    protected = any(group == d or group.endswith(f".{d}") for d in ("k8s.io", "kubernetes.io"))
    annotations = crd["metadata"].get("annotations") or {}
    assert ("api-approved.kubernetes.io" in annotations) == protected, group


def test_only_the_primary_crd_claims_the_short_name_pg() -> None:
    # kubectl resolves an ambiguous short name to the alphabetically first group (scheduling.run.ai).
    assert "shortNames" not in _crd(X_K8S)["spec"]["names"]
    assert "shortNames" not in _crd(KAI)["spec"]["names"]


def test_spec_schema() -> None:
    spec = _schema(PRIMARY)["properties"]["spec"]
    assert spec["required"] == ["minMember"]
    props = spec["properties"]
    assert set(props) == {
        "minMember",
        "maxMember",
        "minResources",
        "scheduleTimeoutSeconds",
        "priorityClassName",
        "priority",
        "queue",
        "parentPodGroup",
        "topologyRequired",
        "topology",
        "topologyPreferred",
        "topologySliceRequired",
        "topologySliceSize",
        "disruptionMode",
    }
    assert props["minMember"]["type"] == "integer" and props["minMember"]["minimum"] == 1
    assert props["topologyRequired"]["type"] == "string"
    assert props["disruptionMode"]["enum"] == ["All", "Single"]
    assert props["maxMember"]["minimum"] == 1
    assert props["scheduleTimeoutSeconds"]["minimum"] == 1
    assert props["minResources"]["additionalProperties"]["x-kubernetes-int-or-string"] is True
    (rule,) = spec["x-kubernetes-validations"]
    assert rule["rule"] == "!has(self.maxMember) || self.maxMember >= self.minMember"


def test_status_schema_and_printer_columns() -> None:
    status = _schema(PRIMARY)["properties"]["status"]["properties"]
    assert status["phase"]["enum"] == [
        "Pending",
        "Scheduling",
        "Scheduled",
        "Running",
        "Finished",
        "Failed",
        "Unknown",
    ]
    for count in ("members", "gated", "scheduled", "running", "succeeded", "failed"):
        assert status[count]["type"] == "integer"
    for when in ("scheduleStartTime", "admittedTime"):
        assert status[when]["format"] == "date-time"
    for text in ("occupiedBy", "reason", "message"):
        assert status[text]["type"] == "string"
    condition = status["conditions"]["items"]["properties"]
    assert set(condition) == {
        "type",
        "status",
        "reason",
        "message",
        "lastTransitionTime",
        "observedGeneration",
    }
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    columns = {c["name"]: c["jsonPath"] for c in _version(PRIMARY)["additionalPrinterColumns"]}
    assert columns == {
        "Phase": ".status.phase",
        "Min": ".spec.minMember",
        "Scheduled": ".status.scheduled",
        "Running": ".status.running",
        "Reason": ".status.reason",
        "Age": ".metadata.creationTimestamp",
        "Message": ".status.message",
    }


def test_the_three_crds_agree() -> None:
    primary, x_k8s, kai = (_schema(p) for p in (PRIMARY, X_K8S, KAI))
    assert x_k8s == primary
    assert kai["properties"]["status"] == primary["properties"]["status"]
    kai_spec = kai["properties"]["spec"]
    primary_spec = primary["properties"]["spec"]
    # KAI's own spelling of these is its topologyConstraint and none: its schema stays KAI's.
    own = {"minResources", "disruptionMode", "topologyRequired", "topology", "topologyPreferred"}
    own |= {"topologySliceRequired", "topologySliceSize"}
    shared_fields = set(primary_spec["properties"]) - own
    assert set(kai_spec["properties"]) == shared_fields | KAI_ONLY_FIELDS
    for field in shared_fields:
        assert kai_spec["properties"][field] == primary_spec["properties"][field], field
    assert kai_spec["x-kubernetes-validations"] == primary_spec["x-kubernetes-validations"]
    columns = [_version(p)["additionalPrinterColumns"] for p in (PRIMARY, X_K8S, KAI)]
    assert columns[0] == columns[1] == columns[2]


# What KAI v0.12's own scheduling.run.ai/v2alpha2 PodGroup spec has beyond Phalanx's fields
# (pkg/apis/scheduling/v2alpha2 at the version tests/localcluster/build-peers.sh pins).
KAI_ONLY_FIELDS = {
    "preemptibility",
    "parallelism",
    "completions",
    "backoffLimit",
    "markUnschedulable",
    "schedulingBackoff",
    "topologyConstraint",
    "subGroups",
}


def test_kai_crd_serves_v2alpha2_and_v2_with_one_schema() -> None:
    """KAI writes v2alpha2; older tutorials wrote v2. With the `None` conversion the API server only
    rewrites apiVersion, so both versions must carry the very same schema for no field to be lost."""
    crd = _crd(KAI)
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    storage, tutorial = crd["spec"]["versions"]
    assert (storage["name"], storage["served"], storage["storage"]) == ("v2alpha2", True, True)
    assert (tutorial["name"], tutorial["served"], tutorial["storage"]) == ("v2", True, False)
    assert {k: v for k, v in storage.items() if k not in ("name", "storage")} == {
        k: v for k, v in tutorial.items() if k not in ("name", "storage")
    }
    subgroup = storage["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["subGroups"]
    assert subgroup["items"]["required"] == ["name"]
    assert set(subgroup["items"]["properties"]) == {"name", "minMember", "parent", "topologyConstraint"}


def test_kai_crd_warns_against_installing_it_next_to_kai() -> None:
    assert "NEVER install" in KAI.read_text()
    assert "NEVER install" in (KAI.parent / "kustomization.yaml").read_text()


def test_schemas_are_structural() -> None:
    """Every property declares a type (or is int-or-string), as apiextensions/v1 requires."""

    def walk(schema: dict[str, Any], where: str) -> None:
        assert "type" in schema or schema.get("x-kubernetes-int-or-string"), where
        for name, child in (schema.get("properties") or {}).items():
            walk(child, f"{where}.{name}")
        if isinstance(schema.get("items"), dict):
            walk(schema["items"], f"{where}[]")
        if isinstance(schema.get("additionalProperties"), dict):
            walk(schema["additionalProperties"], f"{where}{{}}")

    for path in (PRIMARY, X_K8S, KAI):
        walk(_schema(path), path.name)


QUEUE = DEPLOY / "base/queues.scheduling.phalanx.io.yaml"
KAI_QUEUE = DEPLOY / "components/kai-compat/queues.scheduling.run.ai.yaml"


@pytest.mark.parametrize("path", [QUEUE, KAI_QUEUE])
def test_queue_crds_are_cluster_scoped_with_status_and_columns(path: Path) -> None:
    crd = _crd(path)
    assert crd["spec"]["scope"] == "Cluster" and crd["spec"]["names"]["kind"] == "Queue"
    version = _version(path)
    assert version["subresources"] == {"status": {}}
    assert [c["name"] for c in version["additionalPrinterColumns"]] == [
        "Parent",
        "GPUs (used/fair/quota)",
        "Admitted",
        "Waiting",
        "Age",
    ]
    status = _schema(path)["properties"]["status"]["properties"]
    assert {"allocated", "requested", "fairShare", "admittedGangs", "waitingGangs"} <= set(status)


def test_kai_queue_has_kais_resource_fields() -> None:
    resources = _schema(KAI_QUEUE)["properties"]["spec"]["properties"]["resources"]["properties"]
    assert set(resources) == {"gpu", "cpu", "memory"}
    assert set(resources["gpu"]["properties"]) == {"quota", "limit", "overQuotaWeight"}


def test_the_spec_schema_is_generated_from_the_typed_model() -> None:
    """The fields the controller reads (shared/podgroup.py) are exactly the fields the CRDs serve."""
    from shared.podgroup import spec_fields

    crdgen = _crdgen()
    assert list(crdgen.SPEC_FIELDS) == [about.wire for about, _ in spec_fields()]
    assert crdgen.SPEC_FIELDS["minMember"] == {
        "type": "integer",
        "format": "int32",
        "minimum": 1,
        "description": "Pods that must fit together before any starts.",
    }
    assert crdgen.SPEC_FIELDS["minResources"]["additionalProperties"] == crdgen.QUANTITY
    assert crdgen.SPEC_FIELDS["queue"] == {"type": "string", "description": "Queue name (KAI style)."}
